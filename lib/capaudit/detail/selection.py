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

**Deterministic tie order.** A ranking sorts by score, highest first; equal scores keep the input
row order (earlier row first); a missing score (``None``, e.g. ICR unavailable) ranks after every
number, in input order. In the second stage of a two-stage strategy, ties keep the first stage's
order (higher ITM first, then input order). ``random`` returns its draw in input order; ``full``
returns the input order.

K and T are counts (``int``) or proportions of the pool (``float`` in (0, 1], rounded half up);
counts above the pool size are clamped to it. A two-stage strategy needs T ≤ K.
"""

from __future__ import annotations

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
    v = row.get(key)
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

    def to_dict(self) -> Dict[str, Any]:
        return {"strategy": self.strategy, "label": STRATEGY_LABELS.get(self.strategy, self.strategy),
                "pool": self.pool, "k": self.k, "t": self.t, "selected": len(self.indices), "seed": self.seed,
                "fields": dict(self.fields)}


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
            raise FieldNotFoundError(key, sorted({f for r in rows[:50] for f in r}), path=where)
    score = {s: [_number(r, names[s], i, where) for i, r in enumerate(rows)] for s in used}
    order = list(range(n))
    if strategy == "full":
        chosen = order
    elif strategy == "random":
        chosen = sorted(random.Random(seed).sample(order, tt))  # type: ignore[arg-type]
    else:
        pool = rank(order, score[prune])[:kk] if prune is not None else order
        chosen = rank(pool, score[by])[:tt] if by is not None else pool[:tt]  # type: ignore[index]
    return Selection(strategy, tuple(chosen), n, kk if prune is not None else None, tt,
                     seed if strategy == "random" else None, {s: names[s] for s in used})


def subset_stats(rows: Sequence[Mapping[str, Any]], sel: Selection, itm_field: str = "itm") -> Dict[str, Any]:
    """Avg ICR, AOD, length and ITM of a selected subset (means over non-null values)."""
    def mean(key: str) -> Optional[float]:
        vals = [float(rows[i][key]) for i in sel.indices if isinstance(rows[i].get(key), (int, float))]
        return sum(vals) / len(vals) if vals else None

    return {**sel.to_dict(), "avg_icr": mean("icr"), "avg_aod": mean("aod"), "avg_length": mean("length"),
            "avg_itm": mean(itm_field), "avg_cd": mean("cd")}


__all__ = ["STRATEGIES", "STRATEGY_LABELS", "resolve_count", "parse_count", "rank", "Selection", "select",
           "subset_stats"]
