"""The prompt-support stage: ``run(cfg)`` for the ``prompt_support:`` params section (spec §3).

Steps: (1) prepare pools from raw sources (§3.1) and/or take ready pool files as given;
(2) count each pool's hashed n-grams (cached ``.npy`` keyed by file content, n and buckets);
(3) per comparison, block metrics and the block-delta bootstrap (§3.2) → the TSV;
(4) direction summary, pool-wins (LaTeX), pool means; (5) optional whole-surface sensitivity.

Outputs under ``outputs/<run>/``:

* ``artifacts/prompt_pools/`` — ``<pool>.prompt_only.jsonl``, ``<pool>.filtered.jsonl``,
  ``manifest.json``, ``pool_overlap.tsv``
* ``artifacts/prompt_support/prompt_support.tsv`` (§3.2 columns), ``direction_summary.csv``,
  ``pool_means.tsv``, ``sensitivity.tsv``, ``prompt_pools.json`` (records / n-grams per pool),
  ``run.json`` (parameters, inputs, seed rule)
* ``tables/prompt_pool_wins.tex``, ``tables/prompt_pool_overlap.tsv``
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.prompts.io import load_pairs, resolve_location
from capaudit.prompts.ngrams import HASH_BUCKETS, PoolCounts, count_ngrams_multi, load_pool_counts
from capaudit.prompts.pools import (
    MAX_TOKENS,
    MIN_TOKENS,
    OVERLAP_COLUMNS,
    PreparedPools,
    UnionSpec,
    prepare_pools,
    source_from_params,
    write_tsv,
)
from capaudit.prompts.support import (
    ALPHA,
    BLOCK_SIZE,
    BOOTSTRAP_REPS,
    SENSITIVITY_COLUMNS,
    compare_pairs_file,
    direction_notes,
    whole_surface_metrics,
)
from capaudit.io.atomic import atomic_path
from capaudit.prompts.tables import pool_wins_latex, write_text
from capaudit.summaries.prompt_support import (
    DirectionSummaryRow,
    PoolMeans,
    PromptSupportRow,
    direction_summary,
    pool_losses,
    pool_wins,
    rows_to_records,
    seven_pool_means,
    write_direction_summary_csv,
    write_prompt_support_tsv,
)

SECTION = "prompt_support"
SEED_RULE = "np.random.default_rng(uint64_le(blake2b('seed\\x1fcomparison\\x1fpool\\x1fmetric', digest_size=8)))"


@dataclass(frozen=True)
class Comparison:
    """A paired caption file and the two fields compared (§3.2)."""

    name: str
    pairs: Path
    local_field: str = "local_caption"
    reference_field: str = "reference_caption"
    local_surface: str = ""
    reference_surface: str = ""
    block_size: Optional[int] = None
    skip_incomplete: bool = False


@dataclass(frozen=True)
class PoolFileSpec:
    """A ready pool file used as given (no preparation filters)."""

    name: str
    path: Path
    field: Optional[str] = None
    fmt: Optional[str] = None


@dataclass
class StageParams:
    """Typed view of the ``prompt_support:`` section (defaults = the reference's CLI, §12)."""

    budget: Optional[int] = 64
    ngram: int = 2
    hash_buckets: int = HASH_BUCKETS
    alpha: float = ALPHA
    block_size: int = BLOCK_SIZE
    reps: int = BOOTSTRAP_REPS
    seed: int = 0
    max_prompt_records: Optional[int] = 1_000_000
    max_caption_records: Optional[int] = 250_000
    workers: int = 1
    engine: str = "local"  # where pool chunks and caption block runs are counted (local | ray)
    address: Optional[str] = None  # Ray cluster address (else RAY_ADDRESS, else a local cluster)
    cache_dir: Optional[Path] = None
    prepare_sources: List[Any] = field(default_factory=list)
    prepare_unions: List[UnionSpec] = field(default_factory=list)
    min_tokens: int = MIN_TOKENS
    max_tokens: int = MAX_TOKENS
    max_per_source: Optional[int] = None
    use: str = "filtered"
    include: Optional[List[str]] = None
    pool_files: List[PoolFileSpec] = field(default_factory=list)
    paper_pools: Optional[List[str]] = None
    comparisons: List[Comparison] = field(default_factory=list)
    sensitivity_budgets: List[Optional[int]] = field(default_factory=list)
    sensitivity_ngrams: List[int] = field(default_factory=list)


def _budget(value: Any, where: str) -> Optional[int]:
    if value is None or (isinstance(value, str) and value.lower() in ("full", "none", "all")):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: budget must be a positive integer or 'full', got {value!r}")
    return value


def _int(section: Mapping[str, Any], key: str, default: Any, where: str, minimum: int = 0) -> Any:
    value = section.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def parse_params(section: Mapping[str, Any], where: str = SECTION) -> StageParams:
    """Validate the params section; errors name the offending key."""
    known = {"budget", "ngram", "hash_buckets", "alpha", "block_size", "reps", "seed", "max_prompt_records",
             "max_caption_records", "workers", "cache_dir", "pools", "paper_pools", "comparisons", "sensitivity",
             "engine", "address"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (known: {sorted(known)})")
    p = StageParams()
    p.budget = _budget(section.get("budget", 64), f"{where}.budget")
    p.ngram = _int(section, "ngram", 2, where, 1)
    p.hash_buckets = _int(section, "hash_buckets", HASH_BUCKETS, where, 1)
    alpha = section.get("alpha", ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha < 0:
        raise ValueError(f"{where}.alpha: expected a number >= 0, got {alpha!r}")
    p.alpha = float(alpha)
    p.block_size = _int(section, "block_size", BLOCK_SIZE, where, 1)
    p.reps = _int(section, "reps", BOOTSTRAP_REPS, where, 1)
    p.seed = _int(section, "seed", 0, where, 0)
    p.max_prompt_records = _int(section, "max_prompt_records", 1_000_000, where, 1)
    p.max_caption_records = _int(section, "max_caption_records", 250_000, where, 1)
    p.workers = _int(section, "workers", 1, where, 1)
    from capaudit.engine.executors import check_engine

    p.engine = check_engine(section.get("engine", "local"))
    p.address = str(section["address"]) if section.get("address") else None
    if section.get("cache_dir"):
        p.cache_dir = Path(str(section["cache_dir"]))
    pools = section.get("pools") or {}
    if not isinstance(pools, Mapping):
        raise ValueError(f"{where}.pools: expected a mapping")
    prep = pools.get("prepare") or {}
    p.prepare_sources = [source_from_params(s, f"{where}.pools.prepare.sources") for s in prep.get("sources", [])]
    p.prepare_unions = [
        UnionSpec(str(u["name"]), tuple(u["members"])) for u in prep.get("unions", []) if "name" in u and "members" in u
    ]
    if len(p.prepare_unions) != len(prep.get("unions", [])):
        raise ValueError(f"{where}.pools.prepare.unions: each union needs 'name' and 'members'")
    p.min_tokens = _int(prep, "min_tokens", MIN_TOKENS, f"{where}.pools.prepare")
    p.max_tokens = _int(prep, "max_tokens", MAX_TOKENS, f"{where}.pools.prepare")
    p.max_per_source = _int(prep, "max_per_source", None, f"{where}.pools.prepare", 1)
    p.use = str(pools.get("use", "filtered"))
    if p.use not in ("filtered", "prompt_only"):
        raise ValueError(f"{where}.pools.use: expected 'filtered' or 'prompt_only', got {p.use!r}")
    p.include = list(pools["include"]) if pools.get("include") else None
    for i, f in enumerate(pools.get("files", []) or []):
        loc = f"{where}.pools.files[{i}]"
        if not isinstance(f, Mapping) or "name" not in f:
            raise ValueError(f"{loc}: needs 'name' and 'path' (or 'dataset' + 'path')")
        p.pool_files.append(PoolFileSpec(str(f["name"]), resolve_location({k: f[k] for k in ("dataset", "path") if k in f}, loc),
                                         f.get("field"), f.get("format")))
    p.paper_pools = list(section["paper_pools"]) if section.get("paper_pools") else None
    comparisons = section.get("comparisons") or []
    if not comparisons:
        raise ValueError(f"{where}.comparisons: at least one comparison is required")
    for i, c in enumerate(comparisons):
        loc = f"{where}.comparisons[{i}]"
        if not isinstance(c, Mapping) or "name" not in c or "pairs" not in c:
            raise ValueError(f"{loc}: needs 'name' and 'pairs'")
        lf = str(c.get("local_field", "local_caption"))
        rf = str(c.get("reference_field", "reference_caption"))
        p.comparisons.append(
            Comparison(
                name=str(c["name"]),
                pairs=resolve_location(c["pairs"], f"{loc}.pairs"),
                local_field=lf,
                reference_field=rf,
                local_surface=str(c.get("local_surface", lf)),
                reference_surface=str(c.get("reference_surface", rf)),
                block_size=_int(c, "block_size", None, loc, 1),
                skip_incomplete=bool(c.get("skip_incomplete", False)),
            )
        )
    names = [c.name for c in p.comparisons]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}.comparisons: names must be unique, got {names}")
    sens = section.get("sensitivity") or {}
    if sens and sens.get("enabled", True):
        p.sensitivity_budgets = [_budget(b, f"{where}.sensitivity.budgets") for b in sens.get("budgets", [64, 128, "full"])]
        p.sensitivity_ngrams = [int(n) for n in sens.get("ngrams", [1, 2, 3])]
    return p


@dataclass
class StageResult:
    """What :func:`run` produced (paths and in-memory tables)."""

    rows: List[PromptSupportRow]
    direction: List[DirectionSummaryRow]
    wins: Dict[str, int]
    losses: Dict[str, List[str]]
    means: List[PoolMeans]
    pool_counts: Dict[str, Dict[str, Any]]
    prepared: Optional[PreparedPools]
    sensitivity: List[Dict[str, Any]]
    paths: Dict[str, Path]
    pools_in_wins: Optional[List[str]]


def _pool_specs(p: StageParams, prepared: Optional[PreparedPools]) -> List[PoolFileSpec]:
    specs: List[PoolFileSpec] = []
    if prepared is not None:
        for name in prepared.names:
            specs.append(PoolFileSpec(name, prepared.out_dir / f"{name}.{p.use}.jsonl", "prompt", "jsonl"))
    specs += p.pool_files
    if p.include is not None:
        missing = sorted(set(p.include) - {s.name for s in specs})
        if missing:
            raise ValueError(f"{SECTION}.pools.include: unknown pools {missing}")
        specs = [s for s in specs if s.name in set(p.include)]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"{SECTION}.pools: pool names must be unique, got {names}")
    if not specs:
        raise ValueError(f"{SECTION}.pools: no prompt pools (give pools.prepare.sources or pools.files)")
    return sorted(specs, key=lambda s: s.name)


def _load_pools(p: StageParams, specs: Sequence[PoolFileSpec], ngram: int, cache_dir: Path) -> List[PoolCounts]:
    return [
        load_pool_counts(s.name, s.path, ngram, p.hash_buckets, s.field, s.fmt, p.max_prompt_records, cache_dir, p.workers,
                         p.engine, p.address)
        for s in specs
    ]


def sensitivity_rows(
    comparison: Comparison,
    local: Sequence[str],
    reference: Sequence[str],
    pools_by_n: Mapping[int, Sequence[PoolCounts]],
    budgets: Sequence[Optional[int]],
    ngrams: Sequence[int],
    buckets: int,
    alpha: float,
    workers: int = 1,
) -> List[Dict[str, Any]]:
    """Whole-surface variants (§3.2 sensitivity): every pool × role × budget × n."""
    specs = [(n, b) for b in budgets for n in ngrams]
    out: List[Dict[str, Any]] = []
    for role, surface, texts in (("local", comparison.local_surface, local), ("reference", comparison.reference_surface, reference)):
        counts = count_ngrams_multi(texts, specs, buckets, workers=workers)
        for (n, b), cap in zip(specs, counts):
            for pool in pools_by_n[n]:
                row: Dict[str, Any] = {
                    "prompt_pool": pool.name, "comparison": comparison.name, "role": role, "surface": surface,
                    "budget": "full" if b is None else b, "ngram": n, "caption_records": len(texts),
                    "prompt_records": pool.records,
                }
                row.update(whole_surface_metrics(cap, pool.counts, alpha))
                out.append(row)
    out.sort(key=lambda r: (r["prompt_pool"], r["comparison"], r["role"],
                            r["budget"] if isinstance(r["budget"], int) else float("inf"), r["ngram"]))
    return out


def run(cfg) -> StageResult:
    """Run the stage for a loaded params file (:class:`capaudit.config.RunConfig`)."""
    p = parse_params(cfg.section(SECTION))
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "prompt_support"
    art.mkdir(parents=True, exist_ok=True)
    cache_dir = p.cache_dir or (cfg.out_root / "cache" / "prompt_counts")
    paths: Dict[str, Path] = {}

    prepared = None
    if p.prepare_sources:
        prepared = prepare_pools(p.prepare_sources, dirs["artifacts"] / "prompt_pools", p.prepare_unions,
                                 p.min_tokens, p.max_tokens, p.max_per_source)
        paths["manifest"] = prepared.out_dir / "manifest.json"
        paths["overlap"] = write_tsv(prepared.overlap, OVERLAP_COLUMNS, dirs["tables"] / "prompt_pool_overlap.tsv")
    specs = _pool_specs(p, prepared)
    pools = _load_pools(p, specs, p.ngram, cache_dir)

    rows: List[PromptSupportRow] = []
    used: Dict[str, int] = {}
    skipped: Dict[str, int] = {}
    for comp in p.comparisons:  # pairs streamed from disk, block run by block run
        comp_rows, st = compare_pairs_file(
            comp.pairs, pools, comp.name, comp.local_field, comp.reference_field, comp.local_surface,
            comp.reference_surface, p.max_caption_records, comp.skip_incomplete, p.ngram, p.budget,
            comp.block_size or p.block_size, p.reps, p.seed, p.alpha, p.hash_buckets, p.workers, p.engine, p.address,
        )
        rows += comp_rows
        used[comp.name], skipped[comp.name] = st.pairs, st.skipped
    with atomic_path(art / "prompt_support.tsv") as tmp:
        write_prompt_support_tsv(rows, tmp)
    paths["tsv"] = art / "prompt_support.tsv"
    direction = direction_summary(rows)
    with atomic_path(art / "direction_summary.csv") as tmp:
        write_direction_summary_csv(direction, tmp)
    paths["direction"] = art / "direction_summary.csv"
    win_pools = p.paper_pools
    wins, losses = pool_wins(rows, win_pools), pool_losses(rows, win_pools)
    means = seven_pool_means(rows, win_pools)
    means_rows = rows_to_records(means)
    paths["means"] = write_tsv(means_rows, list(means_rows[0]), art / "pool_means.tsv")
    n_pools = len(win_pools) if win_pools else len(pools)
    block_sizes = ", ".join(f"{c.name.replace('_', ' ')} {c.block_size or p.block_size}" for c in p.comparisons)
    paths["wins_tex"] = write_text(
        pool_wins_latex(rows, win_pools, note=f"{n_pools} pools; $B={p.budget or 'full'}$, $n={p.ngram}$, "
                        f"{p.reps} bootstrap replicates; block sizes: {block_sizes}."),
        dirs["tables"] / "prompt_pool_wins.tex",
    )
    pool_info = {pc.name: {"records": pc.records, "total_ngrams": pc.total_ngrams, "source": pc.source,
                           "blake2b_128": pc.digest} for pc in pools}
    paths["pools_json"] = write_text(json.dumps(pool_info, indent=2) + "\n", art / "prompt_pools.json")

    sens: List[Dict[str, Any]] = []
    if p.sensitivity_budgets and p.sensitivity_ngrams:
        pools_by_n = {n: (pools if n == p.ngram else _load_pools(p, specs, n, cache_dir)) for n in p.sensitivity_ngrams}
        for comp in p.comparisons:
            pairs = load_pairs(comp.pairs, comp.local_field, comp.reference_field, p.max_caption_records,
                               comp.skip_incomplete)  # whole surfaces: only the sensitivity variants need them
            local, reference = pairs.local, pairs.reference
            sens += sensitivity_rows(comp, local, reference, pools_by_n, p.sensitivity_budgets,
                                     p.sensitivity_ngrams, p.hash_buckets, p.alpha, p.workers)
        paths["sensitivity"] = write_tsv(sens, SENSITIVITY_COLUMNS, art / "sensitivity.tsv")

    run_info = {
        "spec": "reference-spec §3", "run": cfg.run, "params": {
            "budget": p.budget, "ngram": p.ngram, "hash_buckets": p.hash_buckets, "alpha": p.alpha,
            "block_size": p.block_size, "reps": p.reps, "seed": p.seed, "max_prompt_records": p.max_prompt_records,
            "max_caption_records": p.max_caption_records, "pool_kind": p.use, "paper_pools": win_pools},
        "bootstrap_seed_rule": SEED_RULE,
        "notes": direction_notes(rows),
        "comparisons": [{"name": c.name, "pairs": str(c.pairs), "local_field": c.local_field,
                         "reference_field": c.reference_field, "local_surface": c.local_surface,
                         "reference_surface": c.reference_surface, "block_size": c.block_size or p.block_size,
                         "pairs_used": used[c.name], "incomplete_rows_skipped": skipped[c.name]}
                        for c in p.comparisons],
        "pools": pool_info,
        "outputs": {k: str(v) for k, v in paths.items()},
    }
    paths["run_json"] = write_text(json.dumps(run_info, indent=2, ensure_ascii=False) + "\n", art / "run.json")
    return StageResult(rows, direction, wins, losses, means, pool_info, prepared, sens, paths, win_pools)
