"""Claims-stage tables: claimed density per surface, and the extractor's evaluation on DSG-1k."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence, Tuple

from .shown_cells import stage_keys
from .stage_tables import builder, columns
from .table_model import Table, stand_in_caveats

#: claim types in the order the claimed-density table shows them (key stem, label)
CLAIM_TYPES: Tuple[Tuple[str, str], ...] = (
    ("object", "object"), ("attribute", "attribute"), ("relation", "relation"), ("count", "count"),
    ("style", "style"), ("camera", "camera"), ("lighting", "lighting"), ("text_rendering", "text-rendering"))


#: why a claims table has no intervals when its rows say nothing about a bootstrap
NO_PER_CAPTION_DATA = ("no intervals: these rows come from a claims summary without per-caption data, "
                       "so there is nothing to bootstrap")


def _ci(key: str) -> Dict[str, str]:
    return {"lo_key": f"{key}_lower", "hi_key": f"{key}_upper"}


def interval_note(meta: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    """The one line that says how the intervals were computed, or why there are none: the rows'
    ``meta.bootstrap`` (written by the claims stage), absent for rows of a summary without
    per-caption data; a row left without an interval while the others have one is named."""
    boot = meta.get("bootstrap")
    if not isinstance(boot, Mapping):
        return NO_PER_CAPTION_DATA
    if not boot.get("reps"):
        return f"no intervals: caption bootstrap off ({boot.get('off') or 'bootstrap_reps is 0'})"
    note = (f"[lo, hi]: 95% caption-level {boot.get('method', 'percentile')} bootstrap intervals of CBU/cap and "
            f"CBU/100 lex ({int(boot['reps']):,} reps, seed {boot.get('seed')}; CBU/100 lex as a ratio of sums per "
            "replicate); per-type intervals in the CSV")
    without = [str(r.get("label", r.get("surface", "?"))) for r in rows if r.get("cbu_per_cap_lower") is None]
    if without:
        note += f"; no interval for {', '.join(without)} (no answered captions)"
    return note


def prompt_note(versions: Sequence[str]) -> str:
    """``; prompt: …`` naming the model-facing text the requests carried (empty when not recorded)."""
    from capaudit.prompt_sets import is_reference_version

    if not versions:
        return ""
    named = [f"the reference study's own ({v})" if is_reference_version(v) else f"capaudit's wording ({v})"
             for v in versions]
    return "; prompt: " + ", ".join(named)


@builder("claims_summary", notebook="04_claims")
def claims_summary(data: Mapping[str, Any]) -> Table:
    """One row per surface: captions, CBU/cap, CBU/100 lex at the main budget (with their
    caption-bootstrap intervals where the rows carry them), and deduplicated claims per caption by
    type (their intervals in the CSV); a note says how the intervals were computed or why there are
    none (:func:`interval_note`)."""
    meta = data["meta"]
    rows = list(data["rows"])
    return Table(
        id="claims_summary", title="Claimed density per surface", axis="claims",
        columns=columns(("label", "Surface", "text"), ("captions", "Captions", "int"),
                        ("cbu_per_cap", "CBU/cap", "ci", 2, _ci("cbu_per_cap")),
                        ("cbu_per_100_lex", "CBU/100 lex", "ci", 2, _ci("cbu_per_100_lex")),
                        *((f"{t}_per_cap", label, "num", 2) for t, label in CLAIM_TYPES)),
        rows=rows, provenance=data["provenance"],
        notes=(f"claimed CBU at B={meta.get('budget', '')}; extractor: {meta.get('extractor', '')}"
               + prompt_note(meta.get("prompt_versions") or ()), interval_note(meta, rows)),
        caveats=stand_in_caveats("extractor", meta.get("extractor_kinds") or (), bool(meta.get("offline_extractor"))))


@builder("extractor_eval_dsg", notebook="04b_extractor_eval")
def extractor_eval_dsg(data: Mapping[str, Any]) -> Table:
    """Per claim type (then overall): gold propositions, predicted units, precision, recall, F1; the
    note names the extractor and the DSG category mapping."""
    meta = data["meta"]
    rows = list(data["rows"])
    shown = [{**r, "type_label": str(r.get("type", "")).replace("_", "-")} for r in rows]
    return Table(
        id="extractor_eval_dsg", title="Claim extractor on DSG-1k", axis="claims",
        columns=columns(("type_label", "Type", "text"), ("gold", "Gold", "int"), ("predicted", "Pred.", "int"),
                        ("precision", "P", "num", 3), ("recall", "R", "num", 3), ("f1", "F1", "num", 3)),
        rows=shown, csv_columns=stage_keys(rows), provenance=data["provenance"], latex="tabular",
        notes=(f"DSG-1k extractor evaluation; extractor: {meta.get('extractor', '')}",
               f"mapping: {meta.get('mapping', '')}"),
        caveats=stand_in_caveats("extractor", meta.get("extractor_kinds") or (), bool(meta.get("offline_extractor"))))


__all__ = ["CLAIM_TYPES", "NO_PER_CAPTION_DATA", "claims_summary", "extractor_eval_dsg", "interval_note"]
