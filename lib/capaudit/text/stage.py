"""Text-budget stage: survey every configured surface, paired deltas, table and figure data.

Reads the params section ``text_stats`` (budgets, top_k, workers, surfaces to survey and the
pairs to compare) and writes ``artifacts/text_stats/<surface>.json`` and the rows of the tables
``text_stats`` and ``text_paired_deltas`` (``artifacts/tables/<table>.json``; the paper layer,
``paper.tables_text``, renders them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pandas as pd

from ..budgets import DEFAULT_BUDGET
from ..config import RunConfig
from ..io.atomic import write_json_atomic
from ..results import StageResult
from ..summaries.table_rows import write_table_rows
from .paired_deltas import paired_deltas
from .params import SECTION, TextStatsParams, headline_k  # noqa: F401  (headline_k: public re-export)
from .sharding import spec_shards
from .survey import WINDOW_DEFINITION, SurveyConfig, survey_captions
from .survey_rows import prefix_mass_by_construction, surface_row


def load_counts(stats: Any) -> Dict[str, int]:
    """Rows read and rows skipped while loading (a :class:`capaudit.surfaces.LoadStats`)."""
    return {"rows": stats.rows, "rows_skipped": stats.rows_without_caption,
            "rows_missing_caption_field": stats.rows_missing_field, "rows_empty_caption": stats.rows_empty_caption}


def survey_notes(result: Dict[str, object], budgets: Sequence[int], top_k: int) -> List[str]:
    """Warnings about values that carry no information (shown next to the numbers)."""
    notes = []
    for b in budgets:
        blk = result["budgets"][str(b)]
        flags = prefix_mass_by_construction(blk, top_k)
        kinds = [k for k, v in flags.items() if v]
        if kinds:
            distinct = ", ".join(f"{k} {blk[f'prefix_{k}']['distinct']}" for k in kinds)
            notes.append(f"B={b}: prefix_top_mass ({'/'.join(kinds)}) is 1.0 by construction: top-{top_k} covers "
                         f"every distinct prefix ({distinct} distinct, {result['captions_with_units']} captions); "
                         f"not a concentration finding")
    return notes


def contract_view(result: Dict[str, object], budgets: Sequence[int], top_k: int = 100,
                  top_ks: Sequence[int] = ()) -> Dict[str, object]:
    """The ``capaudit text-stats`` output shape: records, avg_lex and per-budget metrics; with
    ``top_ks`` (more than one k asked) also ``prefix_top_mass_by_k`` (raw and content, each k).

    ``prefix_top_mass_by_construction[B]`` flags (per prefix kind) a top-k prefix mass that is
    1.0 only because k covers every distinct prefix; ``notes`` says so in words, and ``input`` (when
    present) counts rows read and skipped.
    """
    out: Dict[str, object] = {"records": result["records"], "avg_lex": result["avg_lex"], "budgets": {}}
    for b in budgets:
        blk = result["budgets"][str(b)]
        out["budgets"][str(b)] = {
            "eligibility": blk["eligibility"],
            "truncation_rate": blk["truncation_rate"],
            "opener_rate": blk["opener_rate"],
            "distinct": blk["distinct"],
            "rep": blk["rep"],
            "prefix_top_mass": blk["prefix_top_mass"],
        }
        if top_ks:
            view = out["budgets"][str(b)]
            view["prefix_top_mass_by_k"] = {str(k): {kind: blk[f"prefix_{kind}"]["top_k_mass"][str(k)]
                                                     for kind in ("raw", "content")} for k in top_ks}
    out["prefix_top_mass_by_construction"] = {
        str(b): prefix_mass_by_construction(result["budgets"][str(b)], top_k) for b in budgets}
    if "input" in result:
        out["input"] = result["input"]
    out["notes"] = result.get("notes", survey_notes(result, budgets, top_k))
    out["definitions"] = {"window": WINDOW_DEFINITION}  # what opener_rate and the windows are computed on
    return out


def survey_input(inputs, config: SurveyConfig, engine: str = "local", workers: int = 1,
                 address: Optional[str] = None, shards: Optional[int] = None, caption_field: Optional[str] = None,
                 on_missing: str = "error", spill_dir: Optional[str] = None, max_keys: int = 8_000_000):
    """:func:`capaudit.text.survey.survey_files` with the loader's "no caption at all" errors."""
    from ..engine.shards import expand_inputs
    from ..surfaces.surface import LoadStats, SourceFile, no_records_error as _no_records
    from .survey import survey_files

    summary = survey_files(inputs, config, engine=engine, workers=workers, address=address, shards=shards,
                           caption_field=caption_field, spill_dir=spill_dir, max_keys=max_keys, on_missing=on_missing)
    load = summary.load
    if int(load.get("records", 0)) == 0:
        stats = LoadStats(**{k: int(load.get(k, 0)) for k in
                             ("rows", "rows_without_caption", "records", "rows_missing_field", "rows_empty_caption")})
        spec = {"file": str(inputs), "caption_field": caption_field, "on_missing": on_missing}
        raise _no_records(spec, [SourceFile(path=p) for p in expand_inputs(inputs)], stats, list(load.get("fields", [])))
    return summary

def survey_source(params: TextStatsParams, spec: Any, shard_inputs: Any = None, *, surface: Optional[str] = None,
                  caption_field: Optional[str] = None, on_missing: str = "error", max_records: Optional[int] = None,
                  local_only_formats: bool = False) -> Tuple[Dict[str, object], Any]:
    """Survey one caption source: ``(result, load stats)``.

    ``shard_inputs`` (JSONL / Parquet files) are sharded on the params' engine; anything else, or
    input the sharded reader refuses, streams through the surfaces loader on this machine (whose
    error is the canonical one). ``local_only_formats``: a non-local engine refuses such input
    instead (the CLI's contract). ``surface`` names the result (``result["surface"]``).
    """
    from ..errors import InputError
    from ..surfaces import LoadStats, iter_captions

    scfg, eng = params.survey_config(), params.engine
    summary = None
    if shard_inputs is not None:
        try:
            summary = survey_input(shard_inputs, scfg, engine=eng.engine, workers=eng.workers, address=eng.address,
                                   shards=eng.shards, caption_field=caption_field, on_missing=on_missing,
                                   spill_dir=params.spill_dir, max_keys=params.max_keys)
        except Exception:  # noqa: BLE001 - locally, the loader below reports bad input canonically
            if eng.engine != "local":
                raise
            summary = None
        else:
            stats = LoadStats(**{k: int(summary.load.get(k, 0)) for k in (
                "rows", "rows_without_caption", "records", "rows_missing_field", "rows_empty_caption")})
    if summary is None:
        if local_only_formats and eng.engine != "local":
            raise InputError("--engine ray needs JSONL or Parquet input (files, a folder, a glob or an fsspec URL) "
                             "and no --max-records", path=spec.get("file") if isinstance(spec, dict) else spec)
        stats = LoadStats()
        caps = (r.caption for r in iter_captions(spec, caption_field=caption_field, max_records=max_records,
                                                 stats=stats))
        summary = survey_captions(caps, scfg, workers=eng.workers, spill_dir=params.spill_dir,
                                  max_keys=params.max_keys)
    result = summary.finalize()
    if surface is not None:
        result["surface"] = surface
    result["input"] = load_counts(stats)
    result["notes"] = survey_notes(result, scfg.budgets, scfg.top_k)
    result["definitions"] = {"window": WINDOW_DEFINITION}
    return result, stats


def survey_file(params: TextStatsParams, path: str, *, caption_field: Optional[str] = None,
                on_missing: str = "error", max_records: Optional[int] = None) -> Tuple[Dict[str, object], Any]:
    """``capaudit text-stats``: survey one caption file; ``(result, load stats)``."""
    from .sharding import shardable

    shard = path if shardable(path) and max_records is None else None
    return survey_source(params, {"file": path, "on_missing": on_missing}, shard, caption_field=caption_field,
                         on_missing=on_missing, max_records=max_records, local_only_formats=True)


def survey_surfaces(params: TextStatsParams, cfg: RunConfig) -> Dict[str, Dict[str, object]]:
    """Survey the params' surfaces (all those of the run by default), streamed; results by name."""
    from ..surfaces.stage import surface_specs
    from ..surfaces.surface import resolve_sources

    scfg = params.survey_config()
    specs = surface_specs(cfg)
    results: Dict[str, Dict[str, object]] = {}
    for name in params.surfaces if params.surfaces is not None else list(specs):
        if name not in specs:
            raise KeyError(f"{cfg.path}: text_stats surface '{name}' is not declared under 'surfaces'")
        spec = specs[name]
        # a capped survey reads the first max_records rows in order, so it is streamed, not sharded
        files = (spec_shards(spec, resolve_sources(spec)) if isinstance(spec, dict) and params.max_records is None
                 else None)
        cf, om = (spec.get("caption_field"), spec.get("on_missing", "error")) if files is not None else (None, "error")
        r, _ = survey_source(params, spec, files, surface=name, caption_field=cf, on_missing=om,
                             max_records=params.max_records)
        r["config"] = {"budgets": list(scfg.budgets), "ngram_orders": list(scfg.ngram_orders),
                       "repeat_orders": list(scfg.repeat_orders), "top_k": scfg.top_k,
                       "prefix_tokens": scfg.prefix_tokens, "opener": vars(scfg.opener),
                       "marginal_gain_from_rounded": scfg.marginal_gain_from_rounded}
        if params.max_records is not None:  # a capped survey says so (the first N rows read)
            r["config"]["max_records"] = params.max_records
        results[name] = r
    return results


def paired_delta_rows(params: TextStatsParams, cfg: RunConfig) -> Tuple[pd.DataFrame, List[str]]:
    """Paired deltas of the params' fair slices (all of the run's by default) and the pairs files read."""
    from ..surfaces.slices import SliceManifest
    from ..surfaces.stage import slice_dirs

    deltas, inputs = [], []
    slices = slice_dirs(cfg)
    for name in params.slices if params.slices is not None else list(slices):
        if name not in slices:
            raise KeyError(f"{cfg.path}: text_stats slice '{name}' is not declared under 'slices' "
                           f"(declared: {', '.join(slices) or 'none'})")
        path = slices[name] / "pairs.parquet"
        if not path.exists():
            raise FileNotFoundError(f"{path}: slice '{name}' not built; run the surfaces stage (make surfaces) first")
        SliceManifest.load(slices[name]).verify("pairs.parquet")
        pairs = pd.read_parquet(path, columns=["local_caption", "reference_caption"])
        d = paired_deltas(pairs["local_caption"].tolist(), pairs["reference_caption"].tolist())
        d.insert(0, "comparison", name)
        deltas.append(d)
        inputs.append(str(path))
    return (pd.concat(deltas, ignore_index=True) if deltas else pd.DataFrame()), inputs


@dataclass(frozen=True, eq=False)
class TextStatsResult(StageResult):
    """What :func:`run` wrote: survey results by surface, the table rows, the paired deltas, the budgets."""

    results: Dict[str, Dict[str, object]]
    table: pd.DataFrame
    deltas: pd.DataFrame
    budgets: List[int]


def run(cfg: RunConfig) -> TextStatsResult:
    """Survey all surfaces of the run and the paired deltas of its fair slices.

    Surfaces are streamed (``iter_captions``); paired deltas read the slices written by the
    surfaces stage (``outputs/<run>/artifacts/slices/<name>/.../pairs.parquet``).
    """
    params = TextStatsParams.from_section(cfg.section(SECTION), cfg.path)
    scfg = params.survey_config()
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "text_stats"
    art.mkdir(parents=True, exist_ok=True)
    results = survey_surfaces(params, cfg)
    for name, r in results.items():  # written only once every surface was surveyed
        write_json_atomic(art / f"{name}.json", r)
    budget_col = DEFAULT_BUDGET if DEFAULT_BUDGET in scfg.budgets else scfg.budgets[0]
    rows = [surface_row(n, r, budget_col, scfg.top_k) for n, r in results.items()]
    write_table_rows(dirs["artifacts"], "text_stats", "text_stats", rows, function=f"{surface_row.__module__}.surface_row",
                     inputs=[str(art / f"{n}.json") for n in results],
                     meta={"budget": budget_col, "top_k": scfg.top_k, "window_definition": WINDOW_DEFINITION})
    deltas_df, pair_files = paired_delta_rows(params, cfg)
    write_table_rows(dirs["artifacts"], "text_paired_deltas", "text_stats", deltas_df.to_dict("records"),
                     function=f"{paired_deltas.__module__}.paired_deltas", inputs=pair_files)
    return TextStatsResult(results, pd.DataFrame(rows), deltas_df, list(scfg.budgets))
