"""ITM-then-detailness data selection, its baselines and ablations (issue 13, "Selection").

The method (``itm_cd``): semantic pruning to the K pairs with the highest ITM score, then the top
T of those by CD (Eq. 5). Strategies (:data:`STRATEGIES`):

==================  =============================================================  ==========
strategy            rule                                                           uses
==================  =============================================================  ==========
``full``            every pair                                                     –
``random``          T pairs drawn without replacement (``random.Random(seed)``)    seed
``length``          the T longest captions                                         length
``itm``             top T by ITM (ablation "ITM only")                             itm
``itm_length``      top K by ITM, then the T longest (baseline ITM→Length)         itm, length
``itm_cd``          top K by ITM, then top T by CD (**the method**)                itm, cd
``itm_icr``         top K by ITM, then top T by ICR (ablation ITM+ICR)             itm, icr
``itm_aod``         top K by ITM, then top T by AOD (ablation ITM+AOD)             itm, aod
``icr_aod``         top T by CD over all pairs (ablation ICR+AOD without ITM)      cd
``itm_cd_unnorm``   top K by ITM, then top T by ICR·AOD (CD without length norm.)  itm, icr·aod
==================  =============================================================  ==========

**Seeded tie order.** A ranking sorts by score, highest first; a missing score (``None``, e.g. ICR
unavailable) ranks after every number. Equal scores are ordered by a seeded hash of the row,
``sha256("<seed>:<id>")`` (the ``id`` field; a row without one hashes its canonical JSON), then
input order for exact duplicates: the file order never decides which of many tied rows pass a
cut (the offline annotation-precision ITM gives 1.0 to most COCO captions), and another ``seed``
draws another tie order. In the second stage of a two-stage strategy, ties keep the first stage's
order (higher ITM first, then the seeded hash). ``random`` returns its draw in input order;
``full`` returns the input order. :meth:`Selection.to_dict` reports the ties at each cut
(``ties``; ``itm_ties``: rows sharing the ITM score at the ITM cut).

K and T are counts (``int``) or proportions of the pool (``float`` in (0, 1], rounded half up);
counts above the pool size are clamped to it. A two-stage strategy needs T ≤ K.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import FieldNotFoundError, InputError

STRATEGIES: Dict[str, Tuple[Optional[str], Optional[str]]] = {
    # name: (pruning score or None, ranking score or None)
    "full": (None, None),
    "random": (None, None),
    "length": (None, "length"),
    "itm": (None, "itm"),
    "itm_length": ("itm", "length"),
    "itm_cd": ("itm", "cd"),
    "itm_icr": ("itm", "icr"),
    "itm_aod": ("itm", "aod"),
    "icr_aod": (None, "cd"),
    "itm_cd_unnorm": ("itm", "cd_unnormalized"),
}
STRATEGY_LABELS = {
    "full": "Full", "random": "Random", "length": "Length", "itm": "ITM only", "itm_length": "ITM→Length",
    "itm_cd": "ITM→CD (method)", "itm_icr": "ITM+ICR", "itm_aod": "ITM+AOD", "icr_aod": "ICR+AOD (no ITM)",
    "itm_cd_unnorm": "ITM→CD w/o length norm.",
}
Count = Union[int, float]


ITM_HINT = ("score the captions with an ITM scorer: `capaudit detail score ... --itm "
            "annotation_precision|clip:PATH|open_clip:ARCH`")


def resolve_count(value: Optional[Count], n: int, name: str) -> Optional[int]:
    """K or T as a count: an ``int`` (clamped to ``n``) or a proportion ``float`` in (0, 1] of ``n``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"{name} must be a count or a proportion, got {value!r}", field=name)
    if isinstance(value, float):
        if not (0.0 < value <= 1.0) or math.isnan(value):
            raise InputError(f"{name} as a proportion must be in (0, 1], got {value}", field=name)
        return min(n, int(math.floor(value * n + 0.5)))
    if isinstance(value, int):
        if value < 0:
            raise InputError(f"{name} must be >= 0, got {value}", field=name)
        return min(n, value)
    raise InputError(f"{name} must be a count or a proportion, got {value!r}", field=name)


def parse_count(text: str) -> Count:
    """CLI form of K/T: ``30000`` (count) or ``0.6`` (proportion)."""
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise InputError(f"expected a count or a proportion, got {text!r}") from None


def _number(row: Mapping[str, Any], key: str, i: int, where: str) -> Optional[float]:
    if key not in row:  # a score that could not be computed is written as null, never left out
        raise InputError(f"row {i + 1}: field missing (other rows have it; a score that could not be computed "
                         "is null)", path=where, field=key)
    v = row[key]
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InputError(f"row {i + 1}: expected a number or null, got {v!r}", path=where, field=key)
    v = float(v)
    return None if math.isnan(v) else v


def rank(indices: Sequence[int], scores: Sequence[Optional[float]]) -> List[int]:
    """``indices`` sorted by ``scores[i]`` descending; ties keep the order of ``indices``; ``None`` last."""
    pos = {ix: p for p, ix in enumerate(indices)}
    return sorted(indices, key=lambda ix: (scores[ix] is None, -(scores[ix] or 0.0), pos[ix]))


TIE_BREAK_RULE = "equal scores ordered by sha256('<seed>:<id>') of the row (canonical JSON without an id)"


def tie_order(rows: Sequence[Mapping[str, Any]], seed: int) -> List[int]:
    """Row indices in the seeded tie order (module docstring): by ``sha256("<seed>:<id>")``, then index."""
    def key(i: int) -> Tuple[str, int]:
        r = rows[i]
        ident = r.get("id") if isinstance(r, Mapping) else None
        if ident is None:
            ident = json.dumps(r, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(f"{seed}:{ident}".encode("utf-8")).hexdigest(), i

    return sorted(range(len(rows)), key=key)


@dataclass(frozen=True)
class CutTies:
    """Ties at one cut: ``tied`` candidates share the score of the last row kept (0 when no other
    candidate has it), ``kept`` of them pass the cut; ``split`` when the tie order decided."""

    stage: str
    score: str
    cut: int
    candidates: int
    cut_score: Optional[float]
    tied: int
    kept: int

    @property
    def split(self) -> bool:
        return 0 < self.kept < self.tied

    def to_dict(self) -> Dict[str, Any]:
        return {"stage": self.stage, "score": self.score, "cut": self.cut, "candidates": self.candidates,
                "cut_score": self.cut_score, "tied": self.tied, "kept_of_tied": self.kept,
                "decided_by_tie_order": self.split}


def cut_ties(ranked: Sequence[int], scores: Sequence[Optional[float]], cut: int, stage: str, score: str) -> CutTies:
    """How many of ``ranked`` share the score at position ``cut`` (the last row kept)."""
    cut = min(cut, len(ranked))
    if cut <= 0:
        return CutTies(stage, score, cut, len(ranked), None, 0, 0)
    at = scores[ranked[cut - 1]]
    tied = [p for p, ix in enumerate(ranked) if scores[ix] == at]
    if len(tied) < 2:
        return CutTies(stage, score, cut, len(ranked), at, 0, 0)
    return CutTies(stage, score, cut, len(ranked), at, len(tied), sum(1 for p in tied if p < cut))


@dataclass(frozen=True)
class Selection:
    """The selected row indices (in selection order) and how they were chosen."""

    strategy: str
    indices: Tuple[int, ...]
    pool: int
    k: Optional[int]
    t: Optional[int]
    seed: Optional[int]
    fields: Mapping[str, str] = field(default_factory=dict)
    ties: Tuple[CutTies, ...] = ()
    tie_seed: Optional[int] = None

    @property
    def itm_ties(self) -> Optional[int]:
        """Rows sharing the ITM score at the ITM cut (``None`` when the strategy uses no ITM)."""
        return next((c.tied for c in self.ties if c.score == "itm"), None)

    def to_dict(self) -> Dict[str, Any]:
        out = {"strategy": self.strategy, "label": STRATEGY_LABELS.get(self.strategy, self.strategy),
               "pool": self.pool, "k": self.k, "t": self.t, "selected": len(self.indices), "seed": self.seed,
               "fields": dict(self.fields), "ties": [c.to_dict() for c in self.ties]}
        if self.tie_seed is not None:
            out["tie_break"] = {"rule": TIE_BREAK_RULE, "seed": self.tie_seed}
        if self.itm_ties is not None:
            out["itm_ties"] = self.itm_ties
        return out


def select(rows: Sequence[Mapping[str, Any]], strategy: str, k: Optional[Count] = None, t: Optional[Count] = None,
           seed: int = 0, itm_field: str = "itm", fields: Optional[Mapping[str, str]] = None,
           where: str = "scores") -> Selection:
    """Select rows by ``strategy`` (module docstring). ``fields`` renames the score fields
    (``length``, ``cd``, ``icr``, ``aod``, ``cd_unnormalized``); ``where`` names the input in errors."""
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}", field="strategy")
    names = {"itm": itm_field, "length": "length", "cd": "cd", "icr": "icr", "aod": "aod",
             "cd_unnormalized": "cd_unnormalized", **dict(fields or {})}
    n = len(rows)
    prune, by = STRATEGIES[strategy]
    kk = resolve_count(k, n, "k")
    tt = resolve_count(t, n, "t")
    if strategy != "full" and tt is None:
        raise InputError(f"strategy {strategy!r} needs T", field="t")
    if prune is not None:
        if kk is None:
            raise InputError(f"strategy {strategy!r} needs K", field="k")
        if tt is not None and tt > kk:
            raise InputError(f"T ({tt}) must not exceed K ({kk}) for strategy {strategy!r}", field="t")
    used = [s for s in (prune, by) if s is not None]
    for s in used:
        key = names[s]
        if n and not any(key in r for r in rows):
            hint = ITM_HINT if s == "itm" else ""
            raise FieldNotFoundError(key, sorted({f for r in rows[:50] for f in r}), path=where, hint=hint)
    score = {s: [_number(r, names[s], i, where) for i, r in enumerate(rows)] for s in used}
    for s in used:  # a ranking by a score no row has would be the tie order alone
        if n and all(v is None for v in score[s]):
            raise InputError(f"every row's score is null, so ranking by it would be arbitrary"
                             + (f"; {ITM_HINT}" if s == "itm" else ""), path=where, field=names[s])
    ties: List[CutTies] = []
    if strategy == "full":
        chosen = list(range(n))
    elif strategy == "random":
        chosen = sorted(random.Random(seed).sample(range(n), tt))  # type: ignore[arg-type]
    else:
        order = tie_order(rows, seed)
        pool = order
        if prune is not None:
            ranked = rank(order, score[prune])
            ties.append(cut_ties(ranked, score[prune], kk, "pruning", prune))  # type: ignore[arg-type]
            pool = ranked[:kk]
        if by is not None:
            ranked = rank(pool, score[by])
            ties.append(cut_ties(ranked, score[by], tt, "ranking", by))  # type: ignore[arg-type]
            chosen = ranked[:tt]
        else:
            chosen = pool[:tt]  # type: ignore[index]
    return Selection(strategy, tuple(chosen), n, kk if prune is not None else None, tt,
                     seed if strategy == "random" else None, {s: names[s] for s in used}, tuple(ties),
                     seed if strategy not in ("full", "random") else None)


def subset_stats(rows: Sequence[Mapping[str, Any]], sel: Selection, itm_field: str = "itm") -> Dict[str, Any]:
    """Avg ICR, AOD, length and ITM of a selected subset (means over non-null values)."""
    def mean(key: str) -> Optional[float]:
        vals = [float(rows[i][key]) for i in sel.indices if isinstance(rows[i].get(key), (int, float))]
        return sum(vals) / len(vals) if vals else None

    return {**sel.to_dict(), "avg_icr": mean("icr"), "avg_aod": mean("aod"), "avg_length": mean("length"),
            "avg_itm": mean(itm_field), "avg_cd": mean("cd")}


__all__ = ["STRATEGIES", "STRATEGY_LABELS", "TIE_BREAK_RULE", "resolve_count", "parse_count", "rank", "tie_order",
           "CutTies", "cut_ties", "Selection", "select", "subset_stats"]
