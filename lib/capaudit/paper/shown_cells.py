"""Display-only cells a builder derives from a stage's rows (the CSV keeps the stage's own keys).

Intervals: the table model has no interval kind yet, so ``[lo, hi]`` is a text cell composed here,
its bounds printed as ``paper.render`` prints a ``num`` column (fixed decimals); a missing bound
makes the whole cell missing (``--``), never a number.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple


def stage_keys(rows: Sequence[Mapping[str, Any]]) -> Tuple[str, ...]:
    """Every key of the stage's rows in first-seen order (the CSV's columns)."""
    keys: Dict[str, None] = {}
    for r in rows:
        for k in r:
            keys.setdefault(k, None)
    return tuple(keys)


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def interval_text(lo: Any, hi: Any, decimals: int) -> Optional[str]:
    """``[0.650, 0.780]``, or None when a bound is missing."""
    if _missing(lo) or _missing(hi):
        return None
    return f"[{float(lo):.{decimals}f}, {float(hi):.{decimals}f}]"


def estimate_interval_text(est: Any, lo: Any, hi: Any, decimals: int) -> Optional[str]:
    """``0.12 [0.05, 0.20]``, or None when the estimate or a bound is missing."""
    iv = interval_text(lo, hi, decimals)
    if iv is None or _missing(est):
        return None
    return f"{float(est):.{decimals}f} {iv}"


__all__ = ["estimate_interval_text", "interval_text", "stage_keys"]
