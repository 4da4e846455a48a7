"""The definitions every detail output names: which ICR the grounding gives, and how AOD/CD count
relations (``relation_ends``)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence

from .grounding import ICR_KIND_NOTES, icr_name
from .metrics import relation_ends_label


def icr_definition(rows: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """``{"kind", "name", "note"}`` of the ICR behind score rows (their ``icr_kind``; see
    :data:`ICR_KIND_NOTES`); ``kind`` is ``mixed`` for several, ``none`` without grounding."""
    kinds = sorted({str(r["icr_kind"]) for r in rows if r.get("icr_kind")})
    note = "; ".join(ICR_KIND_NOTES.get(k, k) for k in kinds) or "no grounding source"
    kind = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "none")
    return {"kind": kind, "name": icr_name(kinds), "note": note}


def definitions(rows: Sequence[Mapping[str, Any]], relation_ends: str) -> Dict[str, Any]:
    """The ICR definition of ``rows`` and the relation count (value and printed name): what a table's
    notes name."""
    return {"icr": icr_definition(rows), "relation_ends": relation_ends,
            "relation_ends_label": relation_ends_label(relation_ends)}


__all__ = ["definitions", "icr_definition"]
