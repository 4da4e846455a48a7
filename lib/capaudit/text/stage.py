"""Text-budget stage: survey every configured surface, paired deltas, table and figure data.

Reads the params section ``text_stats`` (budgets, top_k, workers, surfaces to survey and the
pairs to compare) and writes ``artifacts/text_stats/<surface>.json`` and the rows of the tables
``text_stats`` and ``text_paired_deltas`` (``artifacts/tables/<table>.json``; the paper layer,
``paper.tables_text``, renders them).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import pandas as pd

from ..config import RunConfig
from ..io.atomic import write_json_atomic
from ..summaries.table_rows import write_table_rows
from .paired_deltas import paired_deltas
from .sharding import spec_shards as _spec_shards
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


def headline_k(ks: Sequence[int]) -> int:
    """The k of ``prefix_top_mass`` among the asked ``ks``: 100 (the reference's) when listed, else the first."""
    return 100 if 100 in ks else int(ks[0])


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


def survey_config(section: Dict[str, object], where: str = "text_stats") -> SurveyConfig:
    """The survey settings of the ``text_stats`` params section; bad values name the key."""
    def ints(key: str, default: Sequence[int]) -> tuple:
        value = section.get(key, default)
        if not isinstance(value, (list, tuple)) or not value or \
                any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value):
            raise ValueError(f"{where}.{key}: expected a non-empty list of positive integers, got {value!r}")
        return tuple(value)

    top_k = section.get("top_k", 100)
    ks = top_k if isinstance(top_k, (list, tuple)) and top_k else [top_k]
    if any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in ks):
        raise ValueError(f"{where}.top_k: expected a positive integer or a list of them, got {top_k!r}")
    budgets = ints("budgets", (16, 32, 64, 128, 256))
    return SurveyConfig(
        budgets=tuple(sorted(set(budgets))),
        ngram_orders=ints("ngram_orders", (1, 2, 3)),
        repeat_orders=ints("repeat_orders", (3, 4, 5, 6)),
        top_k=headline_k(ks),
        top_ks=tuple(sorted(set(ks) | {10, 100, 1000})),
        marginal_gain_from_rounded=bool(section.get("marginal_gain_from_rounded", True)),
        distinct=str(section.get("distinct", "exact")),
        hll_precision=int(section.get("hll_precision", 14)),
    )


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

def run(cfg: RunConfig) -> Dict[str, object]:
    """Survey all surfaces of the run and the paired deltas of its fair slices.

    Surfaces are streamed (``iter_captions``); paired deltas read the slices written by the
    surfaces stage (``outputs/<run>/artifacts/slices/<name>/.../pairs.parquet``).
    """
    from ..surfaces import LoadStats, iter_captions
    from ..surfaces.slices import SliceManifest
    from ..surfaces.stage import slice_dirs, surface_specs

    from ..engine.executors import engine_from_params
    from ..surfaces.surface import resolve_sources

    section = cfg.section("text_stats")
    scfg = survey_config(section, f"{cfg.path}: text_stats")
    eng = engine_from_params(section, f"{cfg.path}: text_stats")
    workers = eng["workers"]
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "text_stats"
    art.mkdir(parents=True, exist_ok=True)
    specs = surface_specs(cfg)
    results: Dict[str, Dict[str, object]] = {}
    for name in section.get("surfaces", list(specs)):
        if name not in specs:
            raise KeyError(f"{cfg.path}: text_stats surface '{name}' is not declared under 'surfaces'")
        spec = specs[name]
        files = _spec_shards(spec, resolve_sources(spec)) if isinstance(spec, dict) else None
        r = None
        if files is not None:  # JSONL / Parquet: shards on the configured engine
            try:
                summary = survey_input(files, scfg, engine=eng["engine"], workers=workers, address=eng["address"],
                                       shards=eng["shards"], caption_field=spec.get("caption_field"),
                                       on_missing=spec.get("on_missing", "error"), spill_dir=section.get("spill_dir"),
                                       max_keys=int(section.get("max_keys", 8_000_000)))
            except Exception:  # noqa: BLE001 - locally, the loader below reports bad input canonically
                if eng["engine"] != "local":
                    raise
            else:
                stats = LoadStats(**{k: int(summary.load.get(k, 0)) for k in (
                    "rows", "rows_without_caption", "records", "rows_missing_field", "rows_empty_caption")})
                r = summary.finalize()
        if r is None:  # other formats (or bad input) stream through the surfaces loader on this machine
            stats = LoadStats()
            r = survey_captions((rec.caption for rec in iter_captions(spec, stats=stats)), scfg,
                                workers=workers, spill_dir=section.get("spill_dir"),
                                max_keys=int(section.get("max_keys", 8_000_000))).finalize()
        r["surface"] = name
        r["input"] = load_counts(stats)
        r["notes"] = survey_notes(r, scfg.budgets, scfg.top_k)
        r["definitions"] = {"window": WINDOW_DEFINITION}
        r["config"] = {"budgets": list(scfg.budgets), "ngram_orders": list(scfg.ngram_orders),
                       "repeat_orders": list(scfg.repeat_orders), "top_k": scfg.top_k,
                       "prefix_tokens": scfg.prefix_tokens, "opener": vars(scfg.opener),
                       "marginal_gain_from_rounded": scfg.marginal_gain_from_rounded}
        results[name] = r
    for name, r in results.items():  # written only once every surface was surveyed
        write_json_atomic(art / f"{name}.json", r)
    budget_col = 64 if 64 in scfg.budgets else scfg.budgets[0]
    rows = [surface_row(n, r, budget_col, scfg.top_k) for n, r in results.items()]
    write_table_rows(dirs["artifacts"], "text_stats", "text_stats", rows, function=f"{surface_row.__module__}.surface_row",
                     inputs=[str(art / f"{n}.json") for n in results],
                     meta={"budget": budget_col, "top_k": scfg.top_k, "window_definition": WINDOW_DEFINITION})
    deltas = []
    slices = slice_dirs(cfg)
    for name in section.get("slices", list(slices)):
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
    deltas_df = pd.concat(deltas, ignore_index=True) if deltas else pd.DataFrame()
    write_table_rows(dirs["artifacts"], "text_paired_deltas", "text_stats", deltas_df.to_dict("records"),
                     function=f"{paired_deltas.__module__}.paired_deltas",
                     inputs=[str(slices[n] / "pairs.parquet") for n in section.get("slices", list(slices))])
    return {"results": results, "table": pd.DataFrame(rows), "deltas": deltas_df, "budgets": list(scfg.budgets)}
