"""The prompt-support stage: ``run(cfg)`` for the ``prompt_support:`` params section (spec §3).

Steps: (1) prepare pools from raw sources (§3.1) and/or take ready pool files as given;
(2) count each pool's hashed n-grams (cached ``.npy`` keyed by file content, n and buckets);
(3) per comparison, block metrics and the block-delta bootstrap (§3.2) → the TSV;
(4) direction summary, pool-wins, pool means; (5) optional whole-surface sensitivity.
Params: :mod:`capaudit.prompts.params`; sensitivity rows: :mod:`capaudit.prompts.sensitivity`.

Outputs under ``outputs/<run>/``:

* ``artifacts/prompt_pools/`` — ``<pool>.prompt_only.jsonl``, ``<pool>.filtered.jsonl``,
  ``manifest.json``, ``pool_overlap.tsv``
* ``artifacts/prompt_support/prompt_support.tsv`` (§3.2 columns), ``direction_summary.csv``,
  ``pool_means.tsv``, ``sensitivity.tsv``, ``prompt_pools.json`` (records / n-grams per pool),
  ``run.json`` (parameters, inputs, seed rule)
* table rows ``artifacts/tables/prompt_pool_wins.json`` and ``prompt_pool_overlap.json`` (the paper
  layer, ``paper.tables_prompts``, renders them to ``tables/``)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from capaudit.config import ParamsSection
from capaudit.io.atomic import atomic_path
from capaudit.results import StageResult
from capaudit.prompts.io import load_pairs
from capaudit.prompts.ngrams import PoolCounts, load_pool_counts
from capaudit.prompts.pools import PreparedPools, prepare_pools, write_tsv
from capaudit.prompts.sensitivity import sensitivity_rows
from capaudit.prompts.params import SECTION, Comparison, PoolFileSpec, PromptSupportParams
from capaudit.prompts.support import SENSITIVITY_COLUMNS, compare_pairs_file, direction_notes
from capaudit.prompts.tables import pool_wins_rows, write_text
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
from capaudit.summaries.table_rows import write_table_rows

SEED_RULE = "np.random.default_rng(uint64_le(blake2b('seed\\x1fcomparison\\x1fpool\\x1fmetric', digest_size=8)))"


@dataclass(frozen=True, eq=False)
class PromptSupportResult(StageResult):
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


def pool_specs(p: PromptSupportParams, prepared: Optional[PreparedPools]) -> List[PoolFileSpec]:
    """The pools compared, by name: the prepared ones (``pools.use`` variant), then the ready files."""
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


def load_pools(p: PromptSupportParams, specs: Sequence[PoolFileSpec], ngram: int,
               cache_dir: Optional[Path]) -> List[PoolCounts]:
    """Each pool's hashed n-gram counts (``cache_dir``: reused ``.npy`` counts; ``None``: no cache)."""
    return [
        load_pool_counts(s.name, s.path, ngram, p.hash_buckets, s.field, s.fmt, p.max_prompt_records, cache_dir, p.workers,
                         p.engine, p.address)
        for s in specs
    ]


def compare(p: PromptSupportParams, comp: Comparison, pools: Sequence[PoolCounts]) -> Tuple[List[PromptSupportRow], Any]:
    """One comparison's block metrics and bootstrap rows (pairs streamed block run by block run) and
    the pairs read (``.pairs`` used, ``.skipped`` incomplete)."""
    return compare_pairs_file(
        comp.pairs, list(pools), comp.name, comp.local_field, comp.reference_field, comp.local_surface,
        comp.reference_surface, p.max_caption_records, comp.skip_incomplete, p.ngram, p.budget,
        comp.block_size or p.block_size, p.reps, p.seed, p.alpha, p.hash_buckets, p.workers, p.engine, p.address,
    )


def run(cfg) -> PromptSupportResult:
    """Run the stage for a loaded params file (:class:`capaudit.config.RunConfig`)."""
    section = cfg.section(SECTION)
    slices = None
    comparisons = ParamsSection.of(section, SECTION, cfg.path).raw("comparisons")
    if isinstance(comparisons, list) and any(isinstance(c, dict) and "slice" in c for c in comparisons):
        from capaudit.surfaces.stage import slice_pairs

        slices = slice_pairs(cfg)
    p = PromptSupportParams.from_section(section, cfg.path, slices)
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
        paths["overlap_rows"] = write_table_rows(dirs["artifacts"], "prompt_pool_overlap", SECTION, prepared.overlap,
                                                 function="capaudit.prompts.pools.overlap_table",
                                                 inputs=[str(paths["manifest"])])
    specs = pool_specs(p, prepared)
    pools = load_pools(p, specs, p.ngram, cache_dir)

    rows: List[PromptSupportRow] = []
    used: Dict[str, int] = {}
    skipped: Dict[str, int] = {}
    for comp in p.comparisons:  # pairs streamed from disk, block run by block run
        comp_rows, st = compare(p, comp, pools)
        rows += comp_rows
        used[comp.name], skipped[comp.name] = st.pairs, st.skipped
    with atomic_path(art / "prompt_support.tsv") as tmp:
        write_prompt_support_tsv(rows, tmp)
    paths["tsv"] = art / "prompt_support.tsv"
    direction = direction_summary(rows)
    with atomic_path(art / "direction_summary.csv") as tmp:
        write_direction_summary_csv(direction, tmp)
    paths["direction"] = art / "direction_summary.csv"
    win_pools = list(p.paper_pools) if p.paper_pools else None
    wins, losses = pool_wins(rows, win_pools), pool_losses(rows, win_pools)
    means = seven_pool_means(rows, win_pools)
    means_rows = rows_to_records(means)
    paths["means"] = write_tsv(means_rows, list(means_rows[0]), art / "pool_means.tsv")
    n_pools = len(win_pools) if win_pools else len(pools)
    paths["wins_rows"] = write_table_rows(
        dirs["artifacts"], "prompt_pool_wins", SECTION, pool_wins_rows(rows, win_pools),
        function=f"{pool_wins_rows.__module__}.pool_wins_rows", inputs=[str(paths["tsv"])],
        meta={"pools": n_pools, "budget": p.budget, "ngram": p.ngram, "reps": p.reps,
              "block_sizes": {c.name: c.block_size or p.block_size for c in p.comparisons}})
    pool_info = {pc.name: {"records": pc.records, "total_ngrams": pc.total_ngrams, "source": pc.source,
                           "blake2b_128": pc.digest} for pc in pools}
    paths["pools_json"] = write_text(json.dumps(pool_info, indent=2) + "\n", art / "prompt_pools.json")

    sens: List[Dict[str, Any]] = []
    if p.sensitivity_budgets and p.sensitivity_ngrams:
        pools_by_n = {n: (pools if n == p.ngram else load_pools(p, specs, n, cache_dir)) for n in p.sensitivity_ngrams}
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
    return PromptSupportResult(rows, direction, wins, losses, means, pool_info, prepared, sens, paths, win_pools)
