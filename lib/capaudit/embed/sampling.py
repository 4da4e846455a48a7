"""Seeded samples of a stream (reference-spec §8.1 reservoir option) and of arrays."""

from __future__ import annotations

import random
from typing import Iterable, List, Optional, Tuple, TypeVar

import numpy as np

T = TypeVar("T")


def reservoir_sample(items: Iterable[T], k: Optional[int], seed: int = 0) -> List[Tuple[int, T]]:
    """A uniform sample of ``k`` items of a stream, as ``(position, item)`` in stream order.

    Algorithm R with ``random.Random(seed)``: the first ``k`` items fill the reservoir; item ``i``
    (0-based) then replaces slot ``j = randint(0, i)`` when ``j < k``. ``k=None`` keeps everything.
    The same stream and seed give the same sample.
    """
    if k is None:
        return list(enumerate(items))
    if isinstance(k, bool) or int(k) < 0:
        raise ValueError(f"reservoir_sample: k must be >= 0, got {k!r}")
    k = int(k)
    rng = random.Random(seed)
    res: List[Tuple[int, T]] = []
    for i, x in enumerate(items):
        if i < k:
            res.append((i, x))
        else:
            j = rng.randint(0, i)
            if j < k:
                res[j] = (i, x)
    res.sort(key=lambda t: t[0])
    return res


def subsample_rows(n: int, k: Optional[int], seed: int) -> np.ndarray:
    """Sorted row indices: all ``n`` rows, or ``k`` drawn with ``np.random.default_rng(seed)`` without replacement."""
    if k is None or n <= k:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=int(k), replace=False))


__all__ = ["reservoir_sample", "subsample_rows"]
