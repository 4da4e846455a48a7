"""Caption-level percentile bootstrap of per-caption means and ratios of sums, vectorised.

The method of the reference study's claimed-CBU interval export (``export_cbu_metric_tables.py``):

* resampling unit: the caption; one ``np.random.default_rng(seed)`` draws the whole index matrix
  ``rng.integers(0, n, size=(reps, n))`` (drawn here in row chunks: the same numbers, tested), and
  every metric of the sample is computed on that one matrix;
* a mean metric's replicate is the mean of the resampled values; a ratio metric's replicate is the
  ratio of the resampled sums, ``(scale · Σnum) / Σden`` (never a mean of per-caption ratios);
* the interval is the 2.5 % and 97.5 % quantiles of the replicates, ``np.quantile`` with its
  default (linear) interpolation: a 95 % percentile interval.

Why not ``scipy.stats.bootstrap(method="percentile")``: it draws the same replicates, but takes its
quantile at ``(1 - 0.95) / 2 = 0.025000000000000022``, so the endpoints differ from the
reference's in the last bits, and it would draw the index matrix again for every metric.

Speed and memory: each chunk of replicates becomes a dense caption-count matrix (``np.bincount``
per replicate), multiplied by the caption × metric value matrix (one BLAS product for every
metric). At 2,000 replicates on two cores: about 0.02 s for a surface of 1,000 captions, 0.07 s for
5,000, 19 s for a million (the draws alone 4 s of it). The values
are integer counts, so the float64 sums are exact and equal the reference's ``values[idx].sum``;
a chunk holds at most ``chunk_cells`` indices (bounded memory at any sample size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, Mapping, Optional, Sequence, Tuple

import numpy as np

from .bootstrap import CAPTION_REPS, CAPTION_SEED

#: the interval's quantiles (a 95 % percentile interval) and its name
QUANTILES: Tuple[float, float] = (0.025, 0.975)
LEVEL = 0.95
METHOD = "percentile"
#: at most this many caption indices per chunk of replicates (≈ 16 MiB of int64)
CHUNK_CELLS = 1 << 21


@dataclass(frozen=True)
class PercentileInterval:
    """One metric's interval: ``lower`` / ``upper`` = the 2.5 % / 97.5 % quantiles of its replicates."""

    lower: float
    upper: float


def check_reps(reps: int) -> int:
    """``reps`` as an int: 0 (no bootstrap) or at least 2 (a percentile of one replicate is no interval)."""
    if isinstance(reps, bool) or int(reps) != reps:
        raise ValueError(f"bootstrap reps must be a whole number, got {reps!r}")
    reps = int(reps)
    if reps < 0 or reps == 1:
        raise ValueError(f"bootstrap reps must be 0 (off) or at least 2, got {reps}")
    return reps


def index_chunks(n: int, reps: int, rng: np.random.Generator, chunk_cells: int = CHUNK_CELLS) -> Iterator[np.ndarray]:
    """The rows of ``rng.integers(0, n, size=(reps, n))``, in chunks of whole replicates."""
    per = max(1, chunk_cells // max(n, 1))
    done = 0
    while done < reps:
        k = min(per, reps - done)
        yield rng.integers(0, n, size=(k, n))
        done += k


def replicate_sums(values: np.ndarray, reps: int, seed: int, chunk_cells: int = CHUNK_CELLS) -> np.ndarray:
    """``(reps, k)`` sums of the ``(n, k)`` ``values`` over each replicate's resampled captions:
    row ``r`` = ``values[idx[r]].sum(axis=0)`` for the reference's index matrix ``idx``."""
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((reps, values.shape[1]), dtype=np.float64)
    counts = np.empty((0, n), dtype=np.float64)
    done = 0
    for idx in index_chunks(n, reps, rng, chunk_cells):
        k = idx.shape[0]
        if counts.shape[0] != k:
            counts = np.empty((k, n), dtype=np.float64)
        for r in range(k):  # how often each caption is drawn in replicate r
            counts[r] = np.bincount(idx[r], minlength=n)
        out[done:done + k] = counts @ values
        done += k
    return out


def _interval(replicates: np.ndarray) -> PercentileInterval:
    return PercentileInterval(float(np.quantile(replicates, QUANTILES[0])), float(np.quantile(replicates, QUANTILES[1])))


def percentile_bootstrap(
    columns: Mapping[str, Sequence[float]],
    means: Sequence[str] = (),
    ratios: Optional[Mapping[str, Tuple[str, str, float]]] = None,
    reps: int = CAPTION_REPS,
    seed: int = CAPTION_SEED,
    chunk_cells: int = CHUNK_CELLS,
) -> Dict[str, PercentileInterval]:
    """Percentile intervals (module docstring) of one sample of captions.

    ``columns``: per-caption values by name (equal lengths, in the sample's caption order: the
    order decides which caption each drawn index picks); ``means``: names bootstrapped as means;
    ``ratios``: name → ``(numerator column, denominator column, scale)``, bootstrapped as the ratio
    of sums. Every column must hold whole numbers (counts: the sums are then exact); a ratio's
    denominator column must be >= 0 for every caption and positive in every replicate's sum. Raises ``ValueError`` for an empty
    sample or ``reps`` < 2: no interval is ever made up.
    """
    ratios = dict(ratios or {})
    reps = check_reps(reps)
    if reps == 0:
        raise ValueError("percentile_bootstrap: reps is 0 (bootstrap off): no interval to compute")
    names = list(dict.fromkeys([*means, *(c for num, den, _ in ratios.values() for c in (num, den))]))
    unknown = [c for c in names if c not in columns]
    if unknown:
        raise ValueError(f"percentile_bootstrap: no column(s) {unknown}; have {sorted(columns)}")
    cols = [np.asarray(columns[c], dtype=np.float64) for c in names]
    n = len(cols[0]) if cols else 0
    if any(c.ndim != 1 or len(c) != n for c in cols):
        raise ValueError("percentile_bootstrap: columns must be 1-d and of one length")
    if n == 0:
        raise ValueError("percentile_bootstrap: no captions in the sample: no interval")
    values = np.stack(cols, axis=1)
    if not np.all(np.isfinite(values)) or not np.array_equal(values, np.round(values)):
        raise ValueError("percentile_bootstrap: columns must hold whole, finite numbers (per-caption counts)")
    for name, (_, den, _) in ratios.items():
        if np.any(np.asarray(columns[den]) < 0) or not np.asarray(columns[den]).sum() > 0:
            raise ValueError(f"percentile_bootstrap: ratio {name!r}: denominator column {den!r} must be >= 0 "
                             "with a positive sum")
    at = {c: i for i, c in enumerate(names)}
    sums = replicate_sums(values, reps, seed, chunk_cells)
    out: Dict[str, PercentileInterval] = {}
    for name in means:
        out[name] = _interval(sums[:, at[name]] / n)
    for name, (num, den, scale) in ratios.items():
        if not np.all(sums[:, at[den]] > 0):  # a replicate of only zero-denominator captions: no ratio
            raise ValueError(f"percentile_bootstrap: ratio {name!r}: a replicate drew only captions whose "
                             f"{den!r} is 0; no interval")
        out[name] = _interval(scale * sums[:, at[num]] / sums[:, at[den]])
    return out


__all__ = ["CHUNK_CELLS", "LEVEL", "METHOD", "QUANTILES", "PercentileInterval", "check_reps", "index_chunks",
           "percentile_bootstrap", "replicate_sums"]
