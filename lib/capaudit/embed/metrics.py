"""Embedding-space probes of a caption surface (reference-spec §8.1).

All functions take L2-normalised row embeddings (``float32``/``float64`` arrays ``n × d``) and an
explicit seed where they sample; none keeps state between calls.

* :func:`vendi_blocks` — Vendi score over random blocks (``random.Random(seed).sample`` per block,
  or one shuffled partition): per block, eigenvalues of K = XXᵀ (clamped ≥ 0) divided by their
  trace → p; Vendi = exp(−Σ p log p). Mean with a normal 95 % interval over blocks.
* :func:`spectrum` — eRank (exp of the spectral entropy), participation ratio, top-1/top-10 eigen
  mass of the covariance of the centred embeddings (divide by n−1; at most ``max_rows`` rows drawn
  with ``np.random.default_rng(seed).choice`` without replacement), and mean cosine to the centroid.
* :func:`coverage_density` — Coverage@k / Density@k, "PRDC-style, query in gallery": gallery = caption
  embeddings, queries = prompt embeddings; each gallery point's radius is its cosine to its k-th
  nearest *other* gallery point; a query is covered when its cosine to at least one gallery point is
  ≥ that point's radius. **Coverage** = share of covered queries; **Density** = mean over queries of
  (number of gallery balls containing it) / k. This is *not* the coverage of PRDC (Naeem et al.
  2020), which counts real-sample balls that contain at least one generated sample.
* :func:`knn_max_cosine` — per query the maximum cosine to the gallery; nearest-rank percentiles and
  shares at or above thresholds 0.60 … 0.90.
"""

from __future__ import annotations

import math
import random
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

#: Wording every Coverage/Density output carries (spec §8.1 note).
COVERAGE_NOTE = ("Coverage@k here is query-in-gallery (share of prompts inside at least one caption's k-NN "
                 "cosine ball); it differs from PRDC coverage (Naeem et al. 2020), the share of real-sample "
                 "balls that contain at least one generated sample.")
KNN_THRESHOLDS = (0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90)
KNN_PERCENTILES = (0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95)
#: Cosines within this of a ball's radius count as inside (floating-point ties, e.g. duplicates).
TIE_TOLERANCE = 1e-9


def _rows(x: Any, what: str = "embeddings") -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 2:
        raise ValueError(f"{what}: expected a 2-d array (rows × dims), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{what}: contains NaN or infinite values")
    return a


def l2_normalize(x: Any) -> np.ndarray:
    """Rows scaled to unit L2 norm (zero rows stay zero), as float32."""
    a = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    return np.divide(a, norms, out=np.zeros_like(a), where=norms > 0)


def entropy_exp(p: np.ndarray) -> float:
    """exp(−Σ p log p) over p > 0 (0·log 0 = 0)."""
    p = p[p > 0]
    return float(math.exp(-float(np.sum(p * np.log(p)))))


def nearest_rank(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``sorted_values[round(q·(n−1))]`` (the rule of spec §8.3)."""
    from capaudit.text.truncation import nearest_rank as _nr

    return _nr(sorted_values, q)


def normal_ci(values: Sequence[float], z: float = 1.96) -> Dict[str, Optional[float]]:
    """Mean, sample std (ddof 1) and the normal interval mean ± z·sd/√n (None when n < 2)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return {"mean": None, "std": None, "ci95_low": None, "ci95_high": None, "n": 0}
    mean = float(v.mean())
    if v.size < 2:
        return {"mean": mean, "std": None, "ci95_low": None, "ci95_high": None, "n": 1}
    sd = float(v.std(ddof=1))
    half = z * sd / math.sqrt(v.size)
    return {"mean": mean, "std": sd, "ci95_low": mean - half, "ci95_high": mean + half, "n": int(v.size)}


def vendi_score(x: Any) -> Dict[str, float]:
    """Vendi score of one block of normalised rows: ``{"vendi", "max_eigen_prob"}``.

    The non-zero eigenvalues of XXᵀ equal those of XᵀX, so the smaller Gram matrix is used.
    """
    a = _rows(x).astype(np.float64)
    if a.shape[0] == 0:
        raise ValueError("vendi_score: empty block")
    gram = a @ a.T if a.shape[0] <= a.shape[1] else a.T @ a
    lam = np.clip(np.linalg.eigvalsh(gram), 0.0, None)
    total = float(lam.sum())
    if total <= 0:
        raise ValueError("vendi_score: all rows are zero")
    p = lam / total
    return {"vendi": entropy_exp(p), "max_eigen_prob": float(p.max())}


def vendi_blocks(x: Any, block_size: int = 4096, blocks: int = 64, seed: int = 0,
                 mode: str = "random") -> Dict[str, Any]:
    """Vendi over blocks of rows (spec §8.1).

    ``mode='random'``: ``blocks`` blocks, each ``random.Random(seed).sample(range(n), block_size)``
    from one generator. ``mode='partition'``: rows shuffled once with ``random.Random(seed)`` and cut
    into consecutive blocks of ``block_size`` (a last partial block is dropped unless it is the only
    one). With n ≤ ``block_size`` there is a single block of all rows.
    """
    a = _rows(x)
    n = a.shape[0]
    if n == 0:
        raise ValueError("vendi_blocks: no rows")
    if block_size < 1 or blocks < 1:
        raise ValueError(f"vendi_blocks: block_size and blocks must be >= 1, got {block_size}, {blocks}")
    if mode not in ("random", "partition"):
        raise ValueError(f"vendi_blocks: mode must be 'random' or 'partition', got {mode!r}")
    rng = random.Random(seed)
    if n <= block_size:
        index_sets: List[List[int]] = [list(range(n))]
    elif mode == "random":
        index_sets = [rng.sample(range(n), block_size) for _ in range(blocks)]
    else:
        order = list(range(n))
        rng.shuffle(order)
        index_sets = [order[i:i + block_size] for i in range(0, n - block_size + 1, block_size)]
    per = [vendi_score(a[idx]) for idx in index_sets]
    v = [b["vendi"] for b in per]
    ci = normal_ci(v)
    return {"vendi_mean": ci["mean"], "vendi_std": ci["std"], "vendi_ci95": [ci["ci95_low"], ci["ci95_high"]],
            "max_eigen_prob_mean": float(np.mean([b["max_eigen_prob"] for b in per])),
            "blocks": len(per), "block_size": len(index_sets[0]), "rows": n, "mode": mode, "seed": seed,
            "per_block": v}


def spectrum(x: Any, max_rows: int = 100_000, seed: int = 0, top: int = 10) -> Dict[str, Any]:
    """eRank, participation ratio, top-1/top-``top`` eigen mass and mean cosine to centroid (spec §8.1).

    ``eigenvalues`` (descending, clamped ≥ 0) of the covariance are returned for plotting.
    """
    a = _rows(x)
    n = a.shape[0]
    if n < 2:
        raise ValueError(f"spectrum: need at least 2 rows, got {n}")
    if n > max_rows:
        idx = np.random.default_rng(seed).choice(n, size=max_rows, replace=False)
        a = a[np.sort(idx)]
    a = a.astype(np.float64)
    centred = a - a.mean(axis=0, keepdims=True)
    cov = centred.T @ centred / (a.shape[0] - 1)
    lam = np.clip(np.linalg.eigvalsh(cov), 0.0, None)[::-1]
    total = float(lam.sum())
    centroid = a.mean(axis=0)
    cnorm = float(np.linalg.norm(centroid))
    norms = np.linalg.norm(a, axis=1)
    cos = (a @ centroid) / np.where(norms > 0, norms, 1.0) / (cnorm if cnorm > 0 else 1.0)
    if total <= 0:
        erank = pr = top1 = topk = float("nan")
    else:
        p = lam / total
        erank = entropy_exp(p)
        pr = total ** 2 / float(np.sum(lam ** 2))
        top1 = float(p[0])
        topk = float(p[:top].sum())
    return {"erank": erank, "participation_ratio": pr, "top1_mass": top1, f"top{top}_mass": topk,
            "mean_cosine_to_centroid": float(cos.mean()), "rows": int(a.shape[0]), "dims": int(a.shape[1]),
            "max_rows": max_rows, "seed": seed, "eigenvalues": lam.tolist()}


def gallery_radii(gallery: Any, k: int = 10) -> np.ndarray:
    """Each gallery point's cosine to its k-th nearest *other* gallery point (sklearn NearestNeighbors)."""
    from sklearn.neighbors import NearestNeighbors

    g = _rows(gallery, "gallery").astype(np.float64)
    if g.shape[0] <= k:
        raise ValueError(f"coverage/density: the gallery needs more than k={k} points, got {g.shape[0]}")
    nn = NearestNeighbors(n_neighbors=k, metric="cosine", algorithm="brute").fit(g)
    _, idx = nn.kneighbors()  # X=None: each point's neighbours, itself excluded
    kth = idx[:, -1]
    return np.einsum("ij,ij->i", g, g[kth])


def _query_blocks(queries: np.ndarray, gallery: np.ndarray, radii: np.ndarray, chunk: int = 1024):
    for s in range(0, queries.shape[0], chunk):
        sims = queries[s:s + chunk] @ gallery.T
        yield sims, sims >= (radii[None, :] - TIE_TOLERANCE)


def coverage_density(gallery: Any, queries: Any, k: int = 10, *, thresholds: Sequence[float] = KNN_THRESHOLDS,
                     percentiles: Sequence[float] = KNN_PERCENTILES, chunk: int = 1024) -> Dict[str, Any]:
    """Coverage@k and Density@k of ``queries`` (prompts) against ``gallery`` (captions), plus kNN max-cosine.

    See the module docstring for the definitions (spec §8.1); ``note`` says how Coverage differs from
    PRDC coverage. ``per_query`` holds each query's ball count and max cosine.
    """
    g = _rows(gallery, "gallery").astype(np.float64)
    q = _rows(queries, "queries").astype(np.float64)
    if q.shape[0] == 0:
        raise ValueError("coverage/density: no queries")
    if g.shape[1] != q.shape[1]:
        raise ValueError(f"coverage/density: gallery has {g.shape[1]} dims, queries {q.shape[1]}")
    radii = gallery_radii(g, k)
    balls: List[np.ndarray] = []
    best: List[np.ndarray] = []
    for sims, inside in _query_blocks(q, g, radii, chunk):
        balls.append(inside.sum(axis=1))
        best.append(sims.max(axis=1))
    n_balls = np.concatenate(balls)
    max_cos = np.concatenate(best)
    out = {"k": k, "gallery": int(g.shape[0]), "queries": int(q.shape[0]),
           "coverage": float(np.mean(n_balls > 0)), "density": float(np.mean(n_balls / k)),
           "note": COVERAGE_NOTE}
    out["knn"] = knn_summary(max_cos, thresholds, percentiles)
    out["per_query"] = {"balls": n_balls.tolist(), "max_cosine": max_cos.tolist()}
    return out


def knn_summary(max_cos: Any, thresholds: Sequence[float] = KNN_THRESHOLDS,
                percentiles: Sequence[float] = KNN_PERCENTILES) -> Dict[str, Any]:
    """Nearest-rank percentiles of per-query max cosines and the shares ≥ each threshold."""
    v = np.sort(np.asarray(max_cos, dtype=np.float64))
    if v.size == 0:
        raise ValueError("knn: no queries")
    return {"mean": float(v.mean()),
            "percentiles": {f"p{int(round(p * 100)):02d}": float(nearest_rank(v, p)) for p in percentiles},
            "share_at_or_above": {f"{t:.2f}": float(np.mean(v >= t)) for t in thresholds}}


def knn_max_cosine(gallery: Any, queries: Any, *, thresholds: Sequence[float] = KNN_THRESHOLDS,
                   percentiles: Sequence[float] = KNN_PERCENTILES, chunk: int = 1024) -> Dict[str, Any]:
    """Per query the max cosine to the gallery, summarised (spec §8.1 ``knn``)."""
    g = _rows(gallery, "gallery").astype(np.float64)
    q = _rows(queries, "queries").astype(np.float64)
    best = [(q[s:s + chunk] @ g.T).max(axis=1) for s in range(0, q.shape[0], chunk)]
    return knn_summary(np.concatenate(best) if best else np.array([]), thresholds, percentiles)


__all__ = ["COVERAGE_NOTE", "KNN_PERCENTILES", "KNN_THRESHOLDS", "TIE_TOLERANCE", "coverage_density",
           "entropy_exp", "gallery_radii", "knn_max_cosine", "knn_summary", "l2_normalize", "nearest_rank",
           "normal_ci", "spectrum", "vendi_blocks", "vendi_score"]
