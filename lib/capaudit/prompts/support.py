"""Prompt-pool support metrics, blocks and the block-delta bootstrap (reference-spec §3.2).

* Distribution: ``(counts + alpha) / sum(counts + alpha)`` over every bucket (uniform if the
  total is zero, which only happens with ``alpha == 0``).
* ``jsd``: ½KL(p‖m) + ½KL(q‖m), m = (p+q)/2, natural log, KL summed over p > 0.
* ``prompt_mass_on_caption_support``: smoothed pool probability summed over the buckets whose
  caption-block count is > 0.
* Blocks: pairs in file order, contiguous blocks of ``block_size``; the last partial block kept.
* Bootstrap: means of ``reps`` resamples (with replacement) of the block deltas
  local − reference; 95 % interval = numpy-linear 2.5/97.5 % quantiles.

**Deviation from the reference (documented):** the reference seeds each bootstrap with
``abs(hash((seed, comparison, pool, metric))) % 2**32`` — Python's salted string hash, so its
intervals change with ``PYTHONHASHSEED``. Here the seed is
``blake2b("seed\\x1fcomparison\\x1fpool\\x1fmetric", digest_size=8)`` read as a little-endian
uint64 and passed to ``np.random.default_rng``: identical in every process. Point estimates
(delta mean, block means, blocks) are unaffected; published intervals can only be matched
statistically, not digit for digit.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from itertools import islice
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from capaudit.budgets import DEFAULT_BUDGET
from capaudit.errors import EmptyInputError

from capaudit.prompts.ngrams import HASH_BUCKETS, PoolCounts, ngram_buckets_per_text, tokenize_chunk
from capaudit.summaries.prompt_support import JSD, METRICS, PROMPT_MASS, PromptSupportRow

ALPHA = 1e-12
BLOCK_SIZE = 5000
BOOTSTRAP_REPS = 2000


def smoothed_distribution(counts: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """``(counts + alpha)`` normalised over every bucket; uniform when the total is 0 (§3.2)."""
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    smoothed = np.add(counts, alpha, dtype=np.float64)  # = counts.astype(float64) + alpha, one pass
    total = smoothed.sum()
    if total <= 0:
        return np.full(counts.shape, 1.0 / counts.size)
    smoothed /= total
    return smoothed


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p‖q) in nats, summed over p > 0 (``inf`` if q = 0 somewhere p > 0)."""
    if p.size and p.min() > 0:  # every term counts: the same sum without the masked copies
        if q.min() <= 0:
            return float("inf")
        t = np.divide(p, q)
        np.log(t, out=t)
        np.multiply(p, t, out=t)
        return float(np.sum(t))
    mask = p > 0
    pm, qm = p[mask], q[mask]
    if np.any(qm <= 0):
        return float("inf")
    return float(np.sum(pm * np.log(pm / qm)))


def jensen_shannon(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen–Shannon divergence, natural log (§3.2)."""
    m = np.add(p, q)
    m *= 0.5  # = 0.5 * (p + q)
    if p.size and p.min() > 0 and q.min() > 0:  # then m > 0: both sums over every term, one buffer
        t = np.divide(p, m)
        np.log(t, out=t)
        t *= p
        kl_p = float(np.sum(t))
        np.divide(q, m, out=t)
        np.log(t, out=t)
        t *= q
        return 0.5 * kl_p + 0.5 * float(np.sum(t))
    return 0.5 * kl_divergence(p, m) + 0.5 * kl_divergence(q, m)


def mass_on_support(probabilities: np.ndarray, counts: np.ndarray) -> float:
    """Σ of ``probabilities`` over the buckets where ``counts > 0`` (prompt-mass support, §3.2)."""
    return float(probabilities[counts > 0].sum())


def block_bounds(records: int, block_size: int) -> List[Tuple[int, int]]:
    """Contiguous ``[start, stop)`` blocks of ``block_size``; the last partial block kept (§3.2)."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    return [(s, min(s + block_size, records)) for s in range(0, records, block_size)]


def derive_seed(seed: int, comparison: str, pool: str, metric: str) -> int:
    """Process-independent bootstrap seed from (seed, comparison, pool, metric) — see module doc."""
    payload = "\x1f".join((str(int(seed)), comparison, pool, metric)).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(payload, digest_size=8).digest(), "little")


@dataclass(frozen=True)
class BootstrapResult:
    delta_mean: float
    ci95_low: float
    ci95_high: float


def block_bootstrap(deltas: np.ndarray, reps: int, seed: int) -> BootstrapResult:
    """Mean of ``deltas`` and the 2.5/97.5 % quantiles of ``reps`` resampled means (§3.2).

    Resample indices are drawn in one call, ``rng.integers(0, k, size=(reps, k))``.
    """
    deltas = np.asarray(deltas, dtype=np.float64)
    if deltas.ndim != 1 or deltas.size == 0:
        raise ValueError("block_bootstrap needs a non-empty 1-d array of block deltas")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, deltas.size, size=(reps, deltas.size))
    means = deltas[idx].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return BootstrapResult(float(np.mean(deltas)), float(low), float(high))


#: Fewer blocks than this give no interval worth a direction: with one block every bootstrap
#: resample is that block, so the "interval" has zero width by construction.
MIN_BLOCKS_FOR_DIRECTION = 2


def stable_direction(metric: str, ci_low: float, ci_high: float, blocks: Optional[int] = None) -> str:
    """§3.2 labels: JSD lower-is-closer, prompt mass higher-is-better; else ``inconclusive``.

    With ``blocks`` < :data:`MIN_BLOCKS_FOR_DIRECTION` the label is always ``inconclusive``: a
    one-block bootstrap has a zero-width interval by construction, which says nothing about a
    stable direction (a deliberate deviation; the reference would label it).
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r} (expected one of {list(METRICS)})")
    if blocks is not None and blocks < MIN_BLOCKS_FOR_DIRECTION:
        return "inconclusive"
    if metric == JSD:
        if ci_high < 0:
            return "local_lower"
        if ci_low > 0:
            return "reference_lower"
        return "inconclusive"
    if metric == PROMPT_MASS:
        if ci_low > 0:
            return "local_higher"
        if ci_high < 0:
            return "reference_higher"
        return "inconclusive"
    raise ValueError(f"unknown metric {metric!r} (expected one of {list(METRICS)})")


@dataclass
class PreparedPool:
    """A pool's counts with its smoothed distribution, ready for block metrics."""

    name: str
    counts: np.ndarray
    probabilities: np.ndarray
    records: int

    @classmethod
    def from_counts(cls, pool: PoolCounts, alpha: float = ALPHA) -> "PreparedPool":
        return cls(pool.name, pool.counts, smoothed_distribution(pool.counts, alpha), pool.records)


def block_metric_values(
    caption_counts: np.ndarray, pool: PreparedPool, alpha: float = ALPHA
) -> Dict[str, float]:
    """Both §3.2 metrics of one caption block against one pool."""
    p = smoothed_distribution(caption_counts, alpha)
    return {JSD: jensen_shannon(p, pool.probabilities), PROMPT_MASS: mass_on_support(pool.probabilities, caption_counts)}


@dataclass
class BlockMetrics:
    """Per pool, per metric: block-level values for the local and the reference surface."""

    records: int
    block_size: int
    blocks: int
    local: Dict[str, Dict[str, np.ndarray]] = field(default_factory=dict)
    reference: Dict[str, Dict[str, np.ndarray]] = field(default_factory=dict)


def _group_values(
    texts: Sequence[str],
    group: Sequence[Tuple[int, int]],
    pools: Sequence[PreparedPool],
    n: int,
    budget: Optional[int],
    buckets: int,
    alpha: float,
) -> np.ndarray:
    """Metric values ``[block, pool, metric]`` for a run of consecutive blocks (``texts`` = their pairs)."""
    offset = group[0][0]
    chunk = tokenize_chunk(texts, budget)
    bucket, per_text = ngram_buckets_per_text(chunk, n, budget, buckets)
    before = np.concatenate([[0], np.cumsum(per_text)])  # n-grams of the texts before each text
    cuts = before[[b[0] - offset for b in group] + [group[-1][1] - offset]]
    out = np.empty((len(group), len(pools), len(METRICS)))
    for i in range(len(group)):
        counts = np.bincount(bucket[cuts[i] : cuts[i + 1]], minlength=buckets)
        p = smoothed_distribution(counts, alpha)
        support = counts > 0
        for j, pool in enumerate(pools):
            out[i, j, METRICS.index(JSD)] = jensen_shannon(p, pool.probabilities)
            out[i, j, METRICS.index(PROMPT_MASS)] = float(pool.probabilities[support].sum())
    return out


# Worker-process copy of the pools, set once per process by the pool initializer (never read
# in the parent process); it only avoids re-sending the pool arrays with every job.
_WORKER_POOLS: List[PreparedPool] = []


def _init_worker(pools: List[PreparedPool]) -> None:
    _WORKER_POOLS[:] = pools


def _group_job(args) -> np.ndarray:
    texts, group, n, budget, buckets, alpha = args
    return _group_values(texts, group, _WORKER_POOLS, n, budget, buckets, alpha)


def _check_buckets(pools: Sequence[PreparedPool], buckets: int) -> None:
    """ValueError naming the first pool hashed into a different number of buckets."""
    for pool in pools:
        if pool.counts.size != buckets:
            raise ValueError(f"pool '{pool.name}': {pool.counts.size} buckets, expected {buckets}")


def block_metrics(
    local_texts: Sequence[str],
    reference_texts: Sequence[str],
    pools: Sequence[PreparedPool],
    ngram: int = 2,
    budget: Optional[int] = DEFAULT_BUDGET,
    block_size: int = BLOCK_SIZE,
    buckets: int = HASH_BUCKETS,
    alpha: float = ALPHA,
    chunk_target: int = 20_000,
    workers: int = 1,
) -> BlockMetrics:
    """Block-level JSD and prompt mass of both surfaces against every pool (§3.2).

    Captions keep their first ``budget`` lex units (None = whole caption). Runs of consecutive
    blocks (about ``chunk_target`` pairs) are independent jobs; ``workers > 1`` runs them in
    processes with identical results.
    """
    if len(local_texts) != len(reference_texts):
        raise ValueError(f"local and reference surfaces differ in length: {len(local_texts)} vs {len(reference_texts)}")
    if not local_texts:
        raise ValueError("no caption pairs")
    _check_buckets(pools, buckets)
    bounds = block_bounds(len(local_texts), block_size)
    per_job = max(1, chunk_target // block_size)
    groups = [bounds[c : c + per_job] for c in range(0, len(bounds), per_job)]
    jobs = [
        (texts[g[0][0] : g[-1][1]], g, ngram, budget, buckets, alpha)
        for texts in (local_texts, reference_texts)
        for g in groups
    ]
    if workers <= 1:
        parts = [_group_values(t, g, pools, n, b, k, a) for t, g, n, b, k, a in jobs]
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(list(pools),)) as ex:
            parts = list(ex.map(_group_job, jobs))
    local = np.concatenate(parts[: len(groups)])
    reference = np.concatenate(parts[len(groups) :])
    out = BlockMetrics(len(local_texts), block_size, len(bounds))
    for side, values in (("local", local), ("reference", reference)):
        setattr(out, side, {
            pool.name: {m: values[:, j, k].copy() for k, m in enumerate(METRICS)} for j, pool in enumerate(pools)
        })
    return out


def _pairs_job(job, pools: Sequence[PreparedPool], ngram: int, budget: Optional[int], buckets: int,
               alpha: float) -> Tuple[np.ndarray, np.ndarray]:
    """Block values of one run of blocks, both sides (the engine's map)."""
    local, reference, group = job
    return (_group_values(local, group, pools, ngram, budget, buckets, alpha),
            _group_values(reference, group, pools, ngram, budget, buckets, alpha))


def _pairs_job_installed(job, ngram: int, budget: Optional[int], buckets: int, alpha: float):
    """:func:`_pairs_job` against the pools installed in this worker by :func:`_init_worker`."""
    return _pairs_job(job, _WORKER_POOLS, ngram, budget, buckets, alpha)


def _iter_pair_jobs(pairs, block_size: int, per_job: int):
    """Runs of ``per_job`` consecutive blocks of a pair stream: (local, reference, block bounds)."""
    def runs():
        while True:
            run = list(islice(pairs, 4096))
            if not run:
                return
            yield [a for a, _ in run], [b for _, b in run]

    pairs = iter(pairs)
    return _iter_run_jobs(runs(), block_size, per_job)


def _iter_run_jobs(runs, block_size: int, per_job: int):
    """:func:`_iter_pair_jobs` of a stream of runs of pairs ``(local texts, reference texts)``."""
    size = block_size * per_job
    local: List[str] = []
    reference: List[str] = []
    start = 0
    for a, b in runs:
        if not local and len(a) == size:  # a run that is one job: no copies
            local, reference = a, b
        else:
            local += a
            reference += b
        while len(local) >= size:
            job_l, job_r = (local, reference) if len(local) == size else (local[:size], reference[:size])
            yield job_l, job_r, [(s, min(s + block_size, start + size)) for s in range(start, start + size, block_size)]
            start += size
            local, reference = ([], []) if len(local) == size else (local[size:], reference[size:])
    if local:
        end = start + len(local)
        yield local, reference, [(s, min(s + block_size, end)) for s in range(start, end, block_size)]


def block_metrics_stream(
    pairs,
    pools: Sequence[PreparedPool],
    ngram: int = 2,
    budget: Optional[int] = DEFAULT_BUDGET,
    block_size: int = BLOCK_SIZE,
    buckets: int = HASH_BUCKETS,
    alpha: float = ALPHA,
    chunk_target: int = 5_000,
    workers: int = 1,
    engine: str = "local",
    address: Optional[str] = None,
    runs=None,
) -> BlockMetrics:
    """:func:`block_metrics` of a stream of ``(local, reference)`` pairs (file order), holding only
    the runs of blocks in flight; runs are the engine's shards (``local`` or ``ray``), merged in
    order, so the values equal :func:`block_metrics`'s. ``runs`` (instead of ``pairs``, which is
    then ignored): the stream as runs of pairs ``(local texts, reference texts)``.

    Local workers get the pools once (a pool initializer), not with every run of blocks.
    """
    from functools import partial

    from capaudit.engine.executors import check_engine, map_merge

    _check_buckets(pools, buckets)
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    per_job = max(1, chunk_target // block_size)
    jobs = _iter_run_jobs(runs, block_size, per_job) if runs is not None else _iter_pair_jobs(pairs, block_size, per_job)
    init: dict = {}
    if workers > 1 and check_engine(engine) == "local":
        light = [PreparedPool(p.name, np.zeros(0, np.int64), p.probabilities, p.records) for p in pools]
        fn = partial(_pairs_job_installed, ngram=ngram, budget=budget, buckets=buckets, alpha=alpha)
        init = {"initializer": _init_worker, "initargs": (light,)}
    else:
        fn = partial(_pairs_job, pools=list(pools), ngram=ngram, budget=budget, buckets=buckets, alpha=alpha)

    def merge(parts):
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    try:
        local, reference = map_merge(jobs, fn, merge, engine=engine, workers=workers, address=address, **init)
    except EmptyInputError:
        raise ValueError("no caption pairs") from None
    blocks = local.shape[0]
    out = BlockMetrics(0, block_size, blocks)  # records: set by the caller, which counts the stream
    for side, values in (("local", local), ("reference", reference)):
        setattr(out, side, {
            pool.name: {m: values[:, j, k].copy() for k, m in enumerate(METRICS)} for j, pool in enumerate(pools)
        })
    return out


def compare_pairs_file(
    path,
    pools: Sequence[PoolCounts],
    comparison: str,
    local_field: str = "local_caption",
    reference_field: str = "reference_caption",
    local_surface: str = "local",
    reference_surface: str = "reference",
    limit: Optional[int] = 250_000,
    skip_incomplete: bool = False,
    ngram: int = 2,
    budget: Optional[int] = DEFAULT_BUDGET,
    block_size: int = BLOCK_SIZE,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 0,
    alpha: float = ALPHA,
    buckets: int = HASH_BUCKETS,
    workers: int = 1,
    engine: str = "local",
    address: Optional[str] = None,
):
    """:func:`compare_surfaces` on a pairs file streamed from disk (memory independent of its
    size); returns ``(rows, PairStats)``."""
    from capaudit.io.bulk import kept_heap, paused_gc

    # rows parsed and dropped by the hundred thousand, no cycles among them; per-block arrays of a
    # few MiB freed and allocated again: kept by the allocator instead of faulted in every time
    with paused_gc(), kept_heap():
        return _compare_pairs_file(path, pools, comparison, local_field, reference_field, local_surface,
                                   reference_surface, limit, skip_incomplete, ngram, budget, block_size, reps,
                                   seed, alpha, buckets, workers, engine, address)


def _compare_pairs_file(path, pools, comparison, local_field, reference_field, local_surface, reference_surface,
                        limit, skip_incomplete, ngram, budget, block_size, reps, seed, alpha, buckets, workers,
                        engine, address):
    from capaudit.prompts.io import PairStats, iter_pair_chunks

    for pool in pools:
        if pool.ngram != ngram:
            raise ValueError(f"pool '{pool.name}' was counted with n={pool.ngram}, captions use n={ngram}")
    prepared = [PreparedPool.from_counts(p, alpha) for p in pools]
    if workers > 1 and not skip_incomplete and block_size >= 1:
        from capaudit.engine.executors import check_engine

        if check_engine(engine) == "local" and str(path).lower().endswith((".jsonl", ".ndjson", ".json")):
            try:
                metrics, records = _metrics_from_raw_lines(path, prepared, local_field, reference_field, limit,
                                                           ngram, budget, block_size, buckets, alpha, workers)
            except _NotPlain:  # a row that is not a plain pair: the row-checking reader below
                pass
            else:
                metrics.records = records
                return summarise_blocks(metrics, comparison, local_surface, reference_surface, reps, seed), \
                    PairStats(records, 0)
    stats = PairStats()
    runs = iter_pair_chunks(path, local_field, reference_field, limit, skip_incomplete, stats, size=block_size)
    try:
        metrics = block_metrics_stream(None, prepared, ngram, budget, block_size, buckets, alpha, workers=workers,
                                       engine=engine, address=address, runs=runs)
    except ValueError as exc:
        if str(exc) == "no caption pairs":
            from pathlib import Path

            raise EmptyInputError("no caption pairs" + (f" ({stats.skipped} incomplete rows skipped)"
                                                          if stats.skipped else ""), path=Path(path)) from None
        raise
    metrics.records = stats.pairs
    return summarise_blocks(metrics, comparison, local_surface, reference_surface, reps, seed), stats


class _NotPlain(Exception):
    """A run of JSON lines that is not plain pairs (blank, bad or BOM'd line, missing, null or
    non-string field): the caller reads the file again with the row-checking reader."""


def _line_range_jobs(path, limit: Optional[int], size: int, block_size: int, counted: List[int],
                     piece: int = 8 << 20) -> Iterator[tuple]:
    """Runs of ``size`` lines as byte ranges ``(path, start, end, count, block bounds)`` (the
    workers read their own lines), bounded as :func:`_iter_run_jobs` bounds them when every line
    is a pair; ``counted[0]``: lines so far. Only newline positions are looked for here, a piece
    of the file at a time, so the parent's work and memory stay small."""
    if limit is not None and limit <= 0:
        return
    with open(path, "rb") as fh:
        line_start = 0  # byte offset of the next line
        run_start = 0  # byte offset of the current run
        in_run = 0  # lines in the current run
        lines = 0  # lines in all runs so far
        offset = 0  # byte offset of the piece
        done = False
        while not done:
            buf = fh.read(piece)
            if not buf:
                break
            ends = np.flatnonzero(np.frombuffer(buf, np.uint8) == 10)
            k = 0
            while k < ends.size:
                want = size - in_run
                if limit is not None:
                    want = min(want, limit - lines - in_run)
                take = min(want, ends.size - k)
                in_run += take
                k += take
                line_start = offset + int(ends[k - 1]) + 1
                if in_run == size or (limit is not None and lines + in_run >= limit):
                    yield _range_job(path, run_start, line_start, in_run, lines, block_size)
                    lines += in_run
                    counted[0] = lines
                    run_start, in_run = line_start, 0
                    if limit is not None and lines >= limit:
                        done = True
                        break
            offset += len(buf)
        if not done and offset > line_start:  # a last line without a newline
            in_run += 1
            line_start = offset
        if in_run:
            yield _range_job(path, run_start, line_start, in_run, lines, block_size)
            counted[0] = lines + in_run


def _range_job(path, start: int, end: int, count: int, first_line: int, block_size: int) -> tuple:
    last = first_line + count
    return (str(path), start, end, count,
            [(s, min(s + block_size, last)) for s in range(first_line, last, block_size)])


def _plain_pairs(blob: bytes, count: int, local_field: str, reference_field: str) -> Tuple[List[str], List[str]]:
    """The pairs of ``count`` JSON lines, each a plain pair (else :class:`_NotPlain`): the values
    :func:`capaudit.prompts.io.iter_pair_chunks` gives for such lines."""
    try:
        from orjson import loads
    except ImportError:  # pragma: no cover
        from json import loads
    lines = blob.split(b"\n", count)[:count]  # the last piece holds the rest: its line, whole
    if len(lines) != count:
        raise _NotPlain()
    from capaudit.prompts.io import plain_pairs

    parsed = plain_pairs(lines, local_field, reference_field, loads)
    if parsed is None:
        raise _NotPlain()
    return parsed


def _raw_lines_job(job, local_field: str, reference_field: str, ngram: int, budget: Optional[int], buckets: int,
                   alpha: float):
    path, start, end, count, group = job
    with open(path, "rb") as fh:
        fh.seek(start)
        blob = fh.read(end - start)
    local, reference = _plain_pairs(blob, count, local_field, reference_field)
    return _pairs_job((local, reference, group), _WORKER_POOLS, ngram, budget, buckets, alpha)


def _metrics_from_raw_lines(path, pools: Sequence[PreparedPool], local_field: str, reference_field: str,
                            limit: Optional[int], ngram: int, budget: Optional[int], block_size: int, buckets: int,
                            alpha: float, workers: int, chunk_target: int = 5_000) -> Tuple[BlockMetrics, int]:
    """:func:`block_metrics_stream` of a JSON-lines pairs file whose lines are all plain pairs,
    the workers parsing their own runs of lines (the parent only splits the file into runs);
    :class:`_NotPlain` as soon as a run is not (nothing is returned then)."""
    from functools import partial

    from capaudit.engine.executors import map_merge
    from capaudit.prompts.io import _check_pairs_file

    _check_buckets(pools, buckets)
    path, _ = _check_pairs_file(path, local_field, reference_field)
    per_job = max(1, chunk_target // block_size)
    counted = [0]
    jobs = _line_range_jobs(path, limit, block_size * per_job, block_size, counted)
    light = [PreparedPool(p.name, np.zeros(0, np.int64), p.probabilities, p.records) for p in pools]
    fn = partial(_raw_lines_job, local_field=local_field, reference_field=reference_field, ngram=ngram,
                 budget=budget, buckets=buckets, alpha=alpha)

    def merge(parts):
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

    try:
        local, reference = map_merge(jobs, fn, merge, engine="local", workers=workers, initializer=_init_worker,
                                     initargs=(light,))
    except EmptyInputError:
        raise _NotPlain() from None  # no lines: the reader below says so, as it always has
    out = BlockMetrics(0, block_size, local.shape[0])
    for side, values in (("local", local), ("reference", reference)):
        setattr(out, side, {
            pool.name: {m: values[:, j, k].copy() for k, m in enumerate(METRICS)} for j, pool in enumerate(pools)
        })
    return out, counted[0]


def summarise_blocks(
    metrics: BlockMetrics,
    comparison: str,
    local_surface: str,
    reference_surface: str,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 0,
) -> List[PromptSupportRow]:
    """TSV rows (pool-name order, then ``jsd``, ``prompt_mass_on_caption_support``) from block values."""
    rows: List[PromptSupportRow] = []
    for pool in sorted(metrics.local):
        for metric in METRICS:
            local = metrics.local[pool][metric]
            reference = metrics.reference[pool][metric]
            boot = block_bootstrap(local - reference, reps, derive_seed(seed, comparison, pool, metric))
            rows.append(
                PromptSupportRow(
                    prompt_pool=pool,
                    comparison=comparison,
                    local_surface=local_surface,
                    reference_surface=reference_surface,
                    metric=metric,
                    blocks=metrics.blocks,
                    block_size=metrics.block_size,
                    records=metrics.records,
                    delta_mean_local_minus_reference=boot.delta_mean,
                    ci95_low=boot.ci95_low,
                    ci95_high=boot.ci95_high,
                    stable_direction=stable_direction(metric, boot.ci95_low, boot.ci95_high, metrics.blocks),
                    local_block_mean=float(np.mean(local)),
                    reference_block_mean=float(np.mean(reference)),
                )
            )
    return rows


def direction_notes(rows: Sequence[PromptSupportRow]) -> List[str]:
    """Warnings for rows whose interval carries no information (one block)."""
    notes = []
    for comparison in sorted({r.comparison for r in rows}):
        blocks = {r.blocks for r in rows if r.comparison == comparison}
        if min(blocks) < MIN_BLOCKS_FOR_DIRECTION:
            notes.append(f"comparison '{comparison}': only {min(blocks)} block(s) of pairs: the bootstrap interval has "
                         f"zero width by construction, so stable_direction is 'inconclusive'; use more pairs or a "
                         f"smaller --block-size")
    return notes


def compare_surfaces(
    local_texts: Sequence[str],
    reference_texts: Sequence[str],
    pools: Sequence[PoolCounts],
    comparison: str,
    local_surface: str = "local",
    reference_surface: str = "reference",
    ngram: int = 2,
    budget: Optional[int] = DEFAULT_BUDGET,
    block_size: int = BLOCK_SIZE,
    reps: int = BOOTSTRAP_REPS,
    seed: int = 0,
    alpha: float = ALPHA,
    buckets: int = HASH_BUCKETS,
    workers: int = 1,
) -> List[PromptSupportRow]:
    """One comparison against every pool: the §3.2 TSV rows (``workers`` processes)."""
    for pool in pools:
        if pool.ngram != ngram:
            raise ValueError(f"pool '{pool.name}' was counted with n={pool.ngram}, captions use n={ngram}")
    prepared = [PreparedPool.from_counts(p, alpha) for p in pools]
    metrics = block_metrics(local_texts, reference_texts, prepared, ngram, budget, block_size, buckets, alpha,
                            workers=workers)
    return summarise_blocks(metrics, comparison, local_surface, reference_surface, reps, seed)


# --------------------------------------------------------------------------------------------
# Sensitivity variants (§3.2 ``caption_prompt_ngram_support.py``): whole-surface counts.

SENSITIVITY_COLUMNS: Tuple[str, ...] = (
    "prompt_pool",
    "comparison",
    "role",
    "surface",
    "budget",
    "ngram",
    "caption_records",
    "prompt_records",
    "caption_ngrams",
    "prompt_ngrams",
    "caption_buckets",
    "prompt_buckets",
    "overlap_buckets",
    "prompt_mass_on_caption_support",
    "caption_mass_on_prompt_support",
    "jsd",
    "kl_caption_to_prompt",
    "kl_prompt_to_caption",
)


def whole_surface_metrics(caption_counts: np.ndarray, pool_counts: np.ndarray, alpha: float = ALPHA) -> Dict[str, float]:
    """Whole-surface support of one caption surface against one pool (sensitivity variant)."""
    p = smoothed_distribution(caption_counts, alpha)
    q = smoothed_distribution(pool_counts, alpha)
    cap, pro = caption_counts > 0, pool_counts > 0
    return {
        "caption_ngrams": int(caption_counts.sum()),
        "prompt_ngrams": int(pool_counts.sum()),
        "caption_buckets": int(cap.sum()),
        "prompt_buckets": int(pro.sum()),
        "overlap_buckets": int((cap & pro).sum()),
        "prompt_mass_on_caption_support": float(q[cap].sum()),
        "caption_mass_on_prompt_support": float(p[pro].sum()),
        "jsd": jensen_shannon(p, q),
        "kl_caption_to_prompt": kl_divergence(p, q),
        "kl_prompt_to_caption": kl_divergence(q, p),
    }
