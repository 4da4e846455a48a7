"""The claims stage's summary table: one row per surface, written for the paper to render.

``artifacts/tables/claims_summary.json`` (:mod:`capaudit.summaries.table_rows`); the paper's
``tables_claims`` builder turns it into ``tables/claims_summary.{csv,tex}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.summaries.claimed import ClaimedSummary
from capaudit.summaries.table_rows import write_table_rows

TABLE = "claims_summary"


def interval_keys(block: Optional[Mapping[str, Any]], prefix: str = "") -> Dict[str, float]:
    """``<metric>_lower`` / ``<metric>_upper`` row keys of one surface's interval block
    (:class:`capaudit.claims.summarize.ClaimIntervals`): CBU/cap, CBU/100 lex and, without a
    ``prefix``, each type's CBU/cap; none without a block."""
    if not block:
        return {}
    items = [("cbu_per_cap", block["cbu_per_cap"]), ("cbu_per_100_lex", block["cbu_per_100_lex"])]
    if not prefix:
        items += [(f"{t}_per_cap", iv) for t, iv in block["per_type_per_cap"].items()]
    out: Dict[str, float] = {}
    for key, iv in items:
        out[f"{prefix}{key}_lower"] = iv["lower"]
        out[f"{prefix}{key}_upper"] = iv["upper"]
    return out


def summary_rows(main: ClaimedSummary, lexical: Optional[ClaimedSummary], surfaces: Sequence[str],
                 labels: Mapping[str, str], extractor: str, budget: int, intervals: Any = None,
                 lexical_intervals: Any = None) -> List[Dict[str, Any]]:
    """One row per surface (in ``surfaces`` order, those the main summary holds): CBU/cap, CBU/100
    lex, median lex, duplicate-row rate, deduplicated claims per caption by type, and the
    lexical-window CBU/cap and CBU/100 lex where that window ran; then, after those keys, the
    caption-bootstrap interval of every one of them that has one (:func:`interval_keys` of the
    :class:`~capaudit.claims.summarize.ClaimIntervals` ``intervals`` / ``lexical_intervals``; the
    existing keys and values are unchanged)."""
    rows = []
    for name in surfaces:
        if name not in main.surfaces:
            continue
        s = main.surface(name)
        row: Dict[str, Any] = {
            "surface": name, "label": labels.get(name, name), "extractor": extractor, "budget": budget,
            "captions": s.captions, "cbu_per_cap": s.cbu_per_cap, "cbu_per_100_lex": s.cbu_per_100_lex,
            "lex_median": s.distributions["caption_tokens"].median, "dup_row_rate": s.ratios["duplicate_row_rate"],
        }
        row.update({f"{t}_per_cap": v for t, v in s.per_type_dedup_per_caption.items()})
        if lexical is not None and name in lexical.surfaces:
            ls = lexical.surface(name)
            row["lexical_cbu_per_cap"] = ls.cbu_per_cap
            row["lexical_cbu_per_100_lex"] = ls.cbu_per_100_lex
        if intervals is not None:
            row.update(interval_keys(intervals.surface(name)))
        if lexical_intervals is not None and "lexical_cbu_per_cap" in row:
            row.update(interval_keys(lexical_intervals.surface(name), "lexical_"))
        rows.append(row)
    return rows


def write_summary_rows(rows: Sequence[Mapping[str, Any]], artifacts: Path, extractor: str, budget: int,
                       offline: bool, inputs: Sequence[str] = (), bootstrap: Optional[Mapping[str, Any]] = None,
                       prompt_versions: Sequence[str] = (), kinds: Sequence[str] = ()) -> Path:
    """``artifacts/tables/claims_summary.json``: the rows, the extractor (named in the table's note),
    the main budget, whether the extractor is capaudit's offline heuristic and, when intervals were
    computed or turned off, ``bootstrap`` (:meth:`ClaimIntervals.method`: reps, seed, method, or why
    there are none), and ``prompt_versions``: the prompt versions of the requests the rows were
    answered from (the model-facing text, named in the note), and ``kinds``: the kinds of the model
    cards that answered (:mod:`capaudit.llm.cards`; the table's caveats follow from them)."""
    meta: Dict[str, Any] = {"extractor": extractor, "budget": budget, "offline_extractor": offline,
                            "extractor_kinds": list(kinds), "prompt_versions": list(prompt_versions)}
    if bootstrap is not None:
        meta["bootstrap"] = dict(bootstrap)
    return write_table_rows(artifacts, TABLE, "claims", rows, function=f"{__name__}.summary_rows", inputs=inputs,
                            meta=meta)


__all__ = ["TABLE", "interval_keys", "summary_rows", "write_summary_rows"]
