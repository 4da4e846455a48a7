"""Claims-stage tables: claimed density per surface, and the extractor's evaluation on DSG-1k."""

from __future__ import annotations

from typing import Any, Mapping, Tuple

from .shown_cells import stage_keys
from .stage_tables import builder, columns
from .table_model import Table

#: claim types in the order the claimed-density table shows them (key stem, label)
CLAIM_TYPES: Tuple[Tuple[str, str], ...] = (
    ("object", "object"), ("attribute", "attribute"), ("relation", "relation"), ("count", "count"),
    ("style", "style"), ("camera", "camera"), ("lighting", "lighting"), ("text_rendering", "text-rendering"))


@builder("claims_summary", notebook="04_claims")
def claims_summary(data: Mapping[str, Any]) -> Table:
    """One row per surface: captions, CBU/cap, CBU/100 lex at the main budget, and deduplicated
    claims per caption by type."""
    meta = data["meta"]
    return Table(
        id="claims_summary", title="Claimed density per surface", axis="claims",
        columns=columns(("label", "Surface", "text"), ("captions", "Captions", "int"),
                        ("cbu_per_cap", "CBU/cap", "num", 2), ("cbu_per_100_lex", "CBU/100 lex", "num", 2),
                        *((f"{t}_per_cap", label, "num", 2) for t, label in CLAIM_TYPES)),
        rows=list(data["rows"]), provenance=data["provenance"],
        notes=(f"claimed CBU at B={meta.get('budget', '')}; extractor: {meta.get('extractor', '')}",),
        caveats=("offline extractor",) if meta.get("offline_extractor") else ())


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
        caveats=("offline extractor",) if meta.get("offline_extractor") else ())


__all__ = ["CLAIM_TYPES", "claims_summary", "extractor_eval_dsg"]
