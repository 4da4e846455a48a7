"""Bootstrap routines: caption-level (reference-spec §5.4) and image-cluster (§7).

Both take an explicit seed and build their own generator, so there is no hidden global state.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Callable, Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np

#: Reference defaults.
CAPTION_REPS = 2000
CAPTION_SEED = 0
CLUSTER_RESAMPLES = 10_000
CLUSTER_SEED = 1477


@dataclass(frozen=True)
class BootstrapStd:
    """Sample stds (ddof = 1) of the caption-bootstrap replicates of one cell (§5.4)."""

    supported_cap_std: float
    risk_std: float
    reps: int
    seed: int
    n: int


def _as_triples(triples: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    arr = np.asarray(triples, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 3:
        raise ValueError(f"caption_bootstrap: expected per-caption (yes, no, questions) triples, got shape {arr.shape}")
    if (arr < 0).any():
        raise ValueError("caption_bootstrap: counts must be non-negative")
    bad = np.nonzero(arr[:, 0] + arr[:, 1] > arr[:, 2])[0]
    if bad.size:
        raise ValueError(f"caption_bootstrap: row {int(bad[0])}: yes + no exceeds questions")
    return arr


def caption_bootstrap(
    triples: Sequence[Sequence[int]] | np.ndarray, reps: int = CAPTION_REPS, seed: int = CAPTION_SEED
) -> BootstrapStd:
    """Caption-level bootstrap of supported CBU/cap and risk for one cell (§5.4).

    ``triples`` are per-caption ``(yes, no, questions)`` in row order. A fresh
    ``np.random.default_rng(seed)`` draws, for each of ``reps`` replicates,
    ``rng.integers(0, n, size=n)``; supported = Σyes/n, risk = Σno/Σquestions (0 when Σquestions is
    0). Returns the sample stds (ddof = 1). Row order matters for exact reproduction.
    """
    arr = _as_triples(triples)
    n = arr.shape[0]
    if n == 0:
        raise ValueError("caption_bootstrap: no captions")
    if reps < 2:
        raise ValueError(f"caption_bootstrap: reps must be >= 2, got {reps}")
    yes, no, q = arr[:, 0], arr[:, 1], arr[:, 2]
    rng = np.random.default_rng(seed)
    sup = np.empty(reps)
    risk = np.empty(reps)
    for r in range(reps):
        idx = rng.integers(0, n, size=n)
        sup[r] = yes[idx].sum() / n
        qs = q[idx].sum()
        risk[r] = no[idx].sum() / qs if qs else 0.0
    return BootstrapStd(
        supported_cap_std=float(np.std(sup, ddof=1)),
        risk_std=float(np.std(risk, ddof=1)),
        reps=reps,
        seed=seed,
        n=n,
    )


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Percentile ``q`` ∈ [0, 1] of already-sorted values with linear interpolation (numpy 'linear')."""
    if not sorted_values:
        raise ValueError("percentile: no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"percentile: q must be in [0, 1], got {q}")
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def weighted_nominal_agreement(
    labels_a: Sequence[str],
    labels_b: Sequence[str],
    weights: Optional[Sequence[float]] = None,
    categories: Optional[Sequence[str]] = None,
) -> float:
    """Weighted nominal exact agreement Σ w·[a = b] / Σ w (§7).

    With ``categories``, every label must belong to it (error names the record index).
    """
    if len(labels_a) != len(labels_b):
        raise ValueError(f"weighted_nominal_agreement: {len(labels_a)} vs {len(labels_b)} labels")
    w = [1.0] * len(labels_a) if weights is None else [float(x) for x in weights]
    if len(w) != len(labels_a):
        raise ValueError("weighted_nominal_agreement: weights and labels differ in length")
    allowed = set(categories) if categories is not None else None
    num = den = 0.0
    for i, (a, b, wi) in enumerate(zip(labels_a, labels_b, w)):
        if wi < 0 or not math.isfinite(wi):
            raise ValueError(f"weighted_nominal_agreement: record {i}: weight must be finite and >= 0, got {wi}")
        if allowed is not None:
            for lab in (a, b):
                if lab not in allowed:
                    raise ValueError(f"weighted_nominal_agreement: record {i}: label {lab!r} not in {sorted(allowed)}")
        num += wi * (a == b)
        den += wi
    if den <= 0:
        raise ValueError("weighted_nominal_agreement: total weight is 0")
    return num / den


@dataclass(frozen=True)
class ClusterBootstrap:
    """Point estimate and cluster-bootstrap summary (§7); field names match the agreement JSON."""

    estimate: float
    lower: float
    upper: float
    bootstrap_mean: float
    bootstrap_std: float
    n_records: int
    n_clusters: int
    n_resamples: int
    seed: int

    def as_dict(self) -> Dict[str, float]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def cluster_bootstrap(
    records: Sequence[object],
    clusters: Sequence[Hashable],
    statistic: Callable[[List[object]], float],
    n_resamples: int = CLUSTER_RESAMPLES,
    seed: int = CLUSTER_SEED,
    confidence: float = 0.95,
) -> ClusterBootstrap:
    """Image-cluster bootstrap (§7): resample whole clusters with replacement.

    Clusters are taken in first-seen order; one ``random.Random(seed)`` draws, per resample,
    ``len(clusters)`` cluster indices with ``rng.randrange``; the replicate statistic is
    ``statistic`` of the concatenated records. Interval = percentiles ``(1 ± confidence)/2`` with
    linear interpolation; ``bootstrap_mean`` / ``bootstrap_std`` = ``statistics.mean`` /
    ``statistics.stdev`` of the replicates. (The reference's draw call is unverified, so exact
    replicate values are not claimed to match it; the definition is.)
    """
    if len(records) != len(clusters):
        raise ValueError(f"cluster_bootstrap: {len(records)} records but {len(clusters)} cluster ids")
    if not records:
        raise ValueError("cluster_bootstrap: no records")
    if n_resamples < 2:
        raise ValueError("cluster_bootstrap: n_resamples must be >= 2")
    groups: Dict[Hashable, List[object]] = {}
    for rec, c in zip(records, clusters):
        groups.setdefault(c, []).append(rec)
    members = list(groups.values())
    k = len(members)
    rng = random.Random(seed)
    reps: List[float] = []
    for _ in range(n_resamples):
        sample: List[object] = []
        for _ in range(k):
            sample.extend(members[rng.randrange(k)])
        reps.append(float(statistic(sample)))
    ordered = sorted(reps)
    tail = (1.0 - confidence) / 2.0
    return ClusterBootstrap(
        estimate=float(statistic(list(records))),
        lower=percentile(ordered, tail),
        upper=percentile(ordered, 1.0 - tail),
        bootstrap_mean=statistics.mean(reps),
        bootstrap_std=statistics.stdev(reps),
        n_records=len(records),
        n_clusters=k,
        n_resamples=n_resamples,
        seed=seed,
    )


def agreement_statistic(records: List[Tuple[str, str, float]]) -> float:
    """Statistic for :func:`cluster_bootstrap` over ``(human, judge, weight)`` records."""
    return weighted_nominal_agreement([r[0] for r in records], [r[1] for r in records], [r[2] for r in records])


def merge_counts(*parts: Dict[str, int]) -> Dict[str, int]:
    """Associative merge of count blocks (key-wise sums; keys in first-seen order)."""
    out: Dict[str, int] = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0) + v
    return out
