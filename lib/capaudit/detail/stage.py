"""Detail stage (issue 13, "Demo and paper"): detailness of caption surfaces and data selection.

Params section ``detail`` (every key optional; defaults shown; read by
:class:`capaudit.detail.params.DetailParams`, which holds the only defaults and refuses an unknown
key or a wrong type in one line naming the file, section and key)::

    detail:
      parser: claims                 # claims (offline, heuristic) | llm (then url, model; revision,
                                     # concurrency: 8, timeout: 240, retries: 3, dialect: vllm, max_tokens: 1024)
      grounding: coco_mini           # coco_mini | [coco:PATH, ...] (things-only ICR) | coco-panoptic:PATH | none
      itm: annotation_precision      # annotation_precision | clip:PATH | open_clip:ARCH[:PRETRAINED] | none
      relation_ends: subject         # AOD/CD relation count: subject (Eq. 3) | both | split
      length_unit: lex               # CD length (Eq. 5): lex | words
      engine: local                  # or ray (address: HEAD:6379 or RAY_ADDRESS; a local cluster otherwise)
      workers: 1                     # processes (local) or concurrent tasks (ray); same score rows for any value
      shards: null                   # slices of each surface (default ~2,048 captions, at least one per worker)
      surfaces:                      # default: [{name: coco_human, source: coco_mini}]
        - {name: coco_human, source: coco_mini, label: COCO human}
        - {name: recap_photorealistic, path: "{artifacts}/recap/recap_coco_mini_photorealistic.jsonl",
           caption_field: caption, image_field: image_path, id_field: image_id, skip_empty: true,
           on_missing: skip}
      bootstrap: {n_resamples: 2000, seed: 1477, confidence: 0.95}
      selection: {surface: coco_human, k: 0.6, t: 0.4, seed: 0, strategies: [...all...]}
      subgraphs: {surface: coco_human, n_captions: 100, seed: 0, fractions: [0.2, 0.4, 0.6, 0.8],
                  tolerance: 0.05, measures: [icr, aod]}
      figures: {bins: 5}

Surfaces: ``source: coco_mini`` is the 159 COCO-MINI images with their five human captions, one
surface whose rows carry ``caption_index`` 0–4 (by caption annotation id); a ``path`` surface is a
JSONL file (``{artifacts}`` and ``{data}`` expand to the run's artifacts folder and
``$CAPAUDIT_DATA_DIR``; ``on_missing: skip`` skips a file that is not there, e.g. another stage's
output not produced yet; ``skip_empty: true`` skips rows without a caption; ``id_field: null``
makes ids ``<surface>:<row>``). Images are matched to the grounding annotations by file name.

Per surface: mean ICR, AOD, CD with image-cluster bootstrap intervals
(:func:`capaudit.stats.bootstrap.cluster_bootstrap`, records = captions, clusters = images; ICR/CD
means over captions whose image has a grounding source). Selection: every strategy on the
``selection.surface`` pool, K and T as proportions of it (the method used K = 30,000 and
T = 20,000 of ShareGPT4V-COCO; the demo default 0.6/0.4 keeps that T/K ratio); each subset is
exported (JSONL + Parquet + WebDataset-style manifest). Controlled subgraphs on a seeded sample of
captions, realised by the template realiser.

Outputs: ``artifacts/detail/`` (``scores_<surface>.jsonl`` + manifests, ``selection/<strategy>.*``,
``subgraphs.jsonl``, ``surface_means.json``, ``stage_manifest.json``), table
rows ``artifacts/tables/detail_{surfaces,selection,subgraphs}.json`` (the paper renders them:
``capaudit.paper.tables_detail``) and the numbers fragment ``numbers/detail.json``. Every output names the parser, grounding and ITM backends, the
ICR the grounding gives (``things-only ICR`` for COCO instance masks: stuff such as sky, grass or
walls is never covered; ``things+stuff ICR`` for COCO panoptic) and the AOD/CD relation count
(``relation_ends``); the fragment carries them as text macros for the paper
(``DetailIcrKind``, ``DetailIcrName``, ``DetailIcrNote``, ``DetailRelationEnds``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import pandas as pd

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic, write_text_atomic
from capaudit.results import StageResult
from capaudit.summaries.numbers_fragments import write_numbers_fragment
from capaudit.summaries.table_rows import write_table_rows

from .backends import backend_names, backend_spec, build_backends, offline_backends
from .definitions import definitions, icr_definition
from .metrics import relation_ends_label
from .params import SECTION, STAGE_RESPONSES, DetailParams
from .quoted_numbers import detail_numbers
from .score import score_records
from .selection import STRATEGIES
from .selection_report import selection_rows
from .sharded import score_records_engine
from .subgraph_report import subgraph_rows, subgraph_table
from .subgraphs import REALISER_LABEL
from .surface_report import surface_means, surface_table
from .surfaces import load_surfaces

STAGE = SECTION
DEFAULT_STRATEGIES = list(STRATEGIES)

Scores = Dict[str, List[Dict[str, Any]]]


@dataclass(frozen=True)
class ScoredSurfaces:
    """What :func:`score_surfaces` wrote: score rows by surface, labels, skipped surfaces, the backends."""

    scores: Scores
    labels: Dict[str, str]
    skipped: List[str]
    backends: Dict[str, str]
    table_meta: Dict[str, Any]
    grounding: Any
    score_files: Dict[str, str]


def _rel(cfg: RunConfig, p: Path) -> str:
    """A path named relative to the run folder (the same for any run name)."""
    return p.relative_to(cfg.out_dir).as_posix()


def score_surfaces(params: DetailParams, cfg: RunConfig, art: Path) -> ScoredSurfaces:
    """Score every surface of the params (``scores_<surface>.jsonl`` + manifests in ``art``); with an
    engine setting, in slices on the engine (the same rows, in input order)."""
    parser, grounding, itm = build_backends(params, art / STAGE_RESPONSES)
    backends = backend_names(parser, grounding, itm)
    spec = backend_spec(params) if params.sharded else None
    surfaces, labels, skipped = load_surfaces(params.surfaces, cfg.dirs()["artifacts"])
    rel_ends, unit, eng = params.relation_ends, params.length_unit, params.engine
    scores: Scores = {}
    for name, recs in surfaces.items():
        if spec is None:
            rows = list(score_records(recs, parser, grounding, itm, rel_ends, unit))
        else:  # slices on the configured engine, rows in input order (the same rows)
            rows = score_records_engine(recs, spec, rel_ends, unit, engine=eng.engine, workers=eng.workers,
                                        address=eng.address, shards=eng.shards, backends=(parser, grounding, itm))
        for r in rows:
            r["surface"] = name
        scores[name] = rows
        write_text_atomic(art / f"scores_{name}.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        write_json_atomic(art / f"scores_{name}.manifest.json", {
            "surface": name, "label": labels[name], "rows": len(rows), "backends": backends,
            "icr": icr_definition(rows)["name"], "relation_ends": rel_ends,
            "relation_ends_label": relation_ends_label(rel_ends), "length_unit": unit})
    table_meta = {"backends": backends, "offline_backends": offline_backends(backends, parser),
                  "parser_kinds": list(getattr(parser, "kinds", ()))}
    return ScoredSurfaces(scores, labels, skipped, backends, table_meta, grounding,
                          {name: _rel(cfg, art / f"scores_{name}.jsonl") for name in scores})


def summarise_surfaces(params: DetailParams, cfg: RunConfig, art: Path, scored: ScoredSurfaces
                       ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, str], List[Dict[str, Any]]]:
    """Bootstrap means per surface (``surface_means.json``) and the ``detail_surfaces`` table rows:
    ``(means, ICR definition over all rows, ICR name by surface, table rows)``."""
    scores, labels, backends, rel_ends = scored.scores, scored.labels, scored.backends, params.relation_ends
    bs = params.bootstrap
    bootstrap = bs.to_dict()
    means = {name: surface_means(rows, bs.n_resamples, bs.seed, bs.confidence) for name, rows in scores.items()}
    icr_all = icr_definition([r for rows in scores.values() for r in rows])
    icr_by_surface = {name: icr_definition(rows)["name"] for name, rows in scores.items()}
    write_json_atomic(art / "surface_means.json", {
        "backends": backends, "surfaces": means, "labels": labels, "icr": icr_all, "icr_by_surface": icr_by_surface,
        "relation_ends": rel_ends, "relation_ends_label": relation_ends_label(rel_ends),
        "bootstrap": {k: bootstrap[k] for k in ("n_resamples", "seed", "unit")}})
    s_rows = surface_table(means, labels, backends, icr_by_surface, rel_ends)
    write_table_rows(cfg.dirs()["artifacts"], "detail_surfaces", STAGE, s_rows,
                     function="capaudit.detail.surface_report.surface_table",
                     inputs=[_rel(cfg, art / "surface_means.json"), *scored.score_files.values()],
                     meta={**scored.table_meta, **definitions([r for rows in scores.values() for r in rows], rel_ends),
                           "length_unit": params.length_unit, "bootstrap": bootstrap})
    return means, icr_all, icr_by_surface, s_rows


def selection_surface(params: DetailParams, scores: Mapping[str, Any], where: str) -> str:
    """The surface whose pool is selected from (``selection.surface``; default: the first loaded)."""
    name = params.selection.surface if params.selection.surface is not None else next(iter(scores))
    if name not in scores:
        raise InputError(f"detail.selection.surface {name!r} is not a loaded surface", path=where,
                         field="selection.surface")
    return name


def run_selection(params: DetailParams, cfg: RunConfig, art: Path, scored: ScoredSurfaces, surface: str
                  ) -> List[Dict[str, Any]]:
    """Every strategy of ``selection`` on the surface's pool (exported to ``art/selection/``); the
    ``detail_selection`` table rows."""
    sp, rows = params.selection, scored.scores[surface]
    sel_rows = selection_rows(rows, list(sp.strategies), sp.k, sp.t, sp.seed, art / "selection", scored.backends)
    write_table_rows(cfg.dirs()["artifacts"], "detail_selection", STAGE, sel_rows,
                     function="capaudit.detail.selection_report.selection_rows", inputs=[scored.score_files[surface]],
                     meta={**scored.table_meta, **definitions(rows, params.relation_ends),
                           "surface": surface, "surface_label": scored.labels[surface],
                           "pool": len(rows), "k": sp.k, "t": sp.t})
    return sel_rows


def run_subgraphs(params: DetailParams, cfg: RunConfig, art: Path, scored: ScoredSurfaces, surface: str
                  ) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Controlled subgraphs of a seeded sample of the surface's captions (``subgraphs.jsonl``) and
    the ``detail_subgraphs`` table rows: ``(subgraph rows, table rows)``."""
    sg, backends, rel_ends = params.subgraphs, scored.backends, params.relation_ends
    rows = scored.scores.get(surface, [])
    sub = subgraph_rows(rows, scored.grounding, sg.n_captions, sg.seed, list(sg.fractions), sg.tolerance,
                        list(sg.measures), rel_ends)
    write_text_atomic(art / "subgraphs.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sub))
    for r in sub:
        r["parser"], r["grounding"] = backends["parser"], backends["grounding"]
    sg_defs = definitions(rows, rel_ends)
    sg_rows = subgraph_table(sub, backends, sg_defs["icr"]["name"], rel_ends)
    write_table_rows(cfg.dirs()["artifacts"], "detail_subgraphs", STAGE, sg_rows,
                     function="capaudit.detail.subgraph_report.subgraph_table",
                     inputs=[_rel(cfg, art / "subgraphs.jsonl")],
                     meta={**scored.table_meta, **sg_defs, "surface": surface, "tolerance": sg.tolerance,
                           "realiser": REALISER_LABEL})
    return sub, sg_rows


@dataclass(frozen=True, eq=False)
class DetailResult(StageResult):
    """What :func:`run` wrote and computed (``result["surface_table"]`` reads a field, as notebooks do)."""

    scores: Scores
    means: Dict[str, Any]
    labels: Dict[str, str]
    backends: Dict[str, str]
    surface_table: pd.DataFrame
    selection_table: pd.DataFrame
    subgraph_table: pd.DataFrame
    subgraphs: List[Dict[str, Any]]
    manifest: Dict[str, Any]
    artifacts: Path
    skipped: List[str]
    figure_bins: int
    definitions: Dict[str, str]
    measure_labels: Dict[str, str]


def run(cfg: RunConfig) -> DetailResult:
    """Run the detail stage for the params file (module docstring); returns tables and score rows."""
    params = DetailParams.from_section(cfg.section(SECTION, required=False), cfg.path)
    where, rel_ends = str(cfg.path), params.relation_ends
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "detail"
    art.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    scored = score_surfaces(params, cfg, art)
    backends, labels = scored.backends, scored.labels
    means, icr_all, icr_by_surface, s_rows = summarise_surfaces(params, cfg, art, scored)
    sel_surface = selection_surface(params, scored.scores, where)
    sel_rows = run_selection(params, cfg, art, scored, sel_surface)
    sg_surface = params.subgraphs.surface if params.subgraphs.surface is not None else sel_surface
    sub, sg_rows = run_subgraphs(params, cfg, art, scored, sg_surface)

    write_numbers_fragment(dirs["artifacts"], STAGE,
                           detail_numbers(means, labels, icr_by_surface, sel_rows, icr_all, rel_ends,
                                          relation_ends_label(rel_ends), backends),
                           backend=f"{backends['parser']}; {backends['grounding']}; ITM {backends['itm']}")
    sp = params.selection
    manifest = {"backends": backends, "icr": icr_all, "relation_ends": rel_ends,
                "relation_ends_label": relation_ends_label(rel_ends), "length_unit": params.length_unit,
                "surfaces": {n: len(r) for n, r in scored.scores.items()}, "skipped_surfaces": scored.skipped,
                "selection": {"surface": sel_surface, "k": sp.k, "t": sp.t, "strategies": list(sp.strategies)},
                "subgraphs": {"surface": sg_surface, "rows": len(sub)},
                "engine": {"engine": params.engine.engine, "workers": params.engine.workers,
                           "shards": params.engine.shards},
                "elapsed_sec": round(time.monotonic() - t0, 2)}
    write_json_atomic(art / "stage_manifest.json", manifest)
    return DetailResult(
        scores=scored.scores, means=means, labels=labels, backends=backends, surface_table=pd.DataFrame(s_rows),
        selection_table=pd.DataFrame(sel_rows), subgraph_table=pd.DataFrame(sg_rows), subgraphs=sub,
        manifest=manifest, artifacts=art, skipped=scored.skipped, figure_bins=params.figure_bins,
        definitions={"ICR": f"{icr_all['name']} ({icr_all['note']})",
                     "AOD/CD relations": relation_ends_label(rel_ends)},
        measure_labels={"icr": f"{icr_all['name']} (Eq. 2)", "aod": f"AOD (Eq. 4; relations: {rel_ends})",
                        "cd": f"CD (Eq. 5; {icr_all['name']}, relations: {rel_ends})"})


__all__ = ["DEFAULT_STRATEGIES", "DetailResult", "STAGE", "ScoredSurfaces", "run", "run_selection", "run_subgraphs",
           "score_surfaces", "selection_surface", "summarise_surfaces"]
