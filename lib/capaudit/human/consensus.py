"""Consensus of a study's human labels: per field, item and participant the latest label, and per
(item, field) the consensus value (adjudication first). Shared by :mod:`.export` (agreement,
exports) and :mod:`.corrected` (human-corrected supported CBU), which therefore import neither
each other."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from capaudit.stats.agreement import consensus

from .protocol import ADJUDICABLE_FIELDS
from .study import Study


def ratings_by_field(study: Study) -> Dict[str, Dict[str, Dict[str, str]]]:
    """field → item_id → participant_id → label (latest revision; non-repeat items)."""
    items = {r["item_id"]: r for r in study.items()}
    out: Dict[str, Dict[str, Dict[str, str]]] = {f: {} for f in ADJUDICABLE_FIELDS}
    for a in study.latest_annotations():
        it = items.get(a["item_id"])
        if it is None or it["repeat_of"] is not None:
            continue
        for f, ph in ADJUDICABLE_FIELDS.items():
            if a["phase"] == ph and a[f] is not None:
                out[f].setdefault(a["item_id"], {})[a["participant_id"]] = a[f]
    return out


def labels_by_field(study: Study) -> Dict[Tuple[str, str], List[str]]:
    """(item_id, field) → labels of distinct participants (latest revision; non-repeat items)."""
    return {(item, f): list(by_participant.values())
            for f, by_item in ratings_by_field(study).items() for item, by_participant in by_item.items()}


def consensus_rows(study: Study) -> Dict[Tuple[str, str], Optional[str]]:
    """(item_id, field) → consensus value (or ``None``) for every nominal field with at least one label."""
    labels = labels_by_field(study)
    adj = study.adjudicated()
    keys = set(labels) | {(i, f) for (i, _, f) in adj}
    return {k: consensus(labels.get(k, []), adj.get((k[0], ADJUDICABLE_FIELDS[k[1]], k[1]))) for k in sorted(keys)}


__all__ = ["consensus_rows", "labels_by_field", "ratings_by_field"]
