"""Detail stage (issue 13, "Demo and paper"): detailness of caption surfaces and data selection.

Params section ``detail`` (every key optional; defaults shown)::

    detail:
      parser: claims                 # claims (offline, heuristic) | llm (then url, model)
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
from pathlib import Path
from typing import Any, Dict, List

from capaudit.config import RunConfig
from capaudit.engine.executors import engine_from_params
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic, write_text_atomic
from capaudit.summaries.numbers_fragments import write_numbers_fragment
from capaudit.summaries.table_rows import write_table_rows

from .backends import backend_names, backend_spec, build_backends, offline_backends
from .definitions import definitions, icr_definition
from .metrics import DEFAULT_LENGTH_UNIT, DEFAULT_RELATION_ENDS, LENGTH_UNITS, RELATION_ENDS, relation_ends_label
from .quoted_numbers import detail_numbers
from .score import score_records
from .selection import STRATEGIES
from .selection_report import selection_rows
from .sharded import score_records_engine
from .subgraph_report import subgraph_rows, subgraph_table
from .subgraphs import FRACTIONS, MEASURES, REALISER_LABEL, TOLERANCE
from .surface_report import surface_means, surface_table
from .surfaces import load_surfaces

STAGE = "detail"
DEFAULT_STRATEGIES = list(STRATEGIES)


def _checked(section: Dict[str, Any], key: str, default: str, allowed: Any, where: str) -> str:
    value = str(section.get(key, default))
    if value not in allowed:
        raise InputError(f"detail.{key} must be one of {', '.join(allowed)}, got {value!r}", path=where,
                         field=f"detail.{key}")
    return value


def run(cfg: RunConfig) -> Dict[str, Any]:
    """Run the detail stage for the params file (module docstring); returns tables and score rows."""
    import pandas as pd

    section = cfg.section("detail", required=False)
    where = str(cfg.path)
    relation_ends = _checked(section, "relation_ends", DEFAULT_RELATION_ENDS, RELATION_ENDS, where)
    length_unit = _checked(section, "length_unit", DEFAULT_LENGTH_UNIT, LENGTH_UNITS, where)
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "detail"
    art.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    eng = engine_from_params(section, f"{cfg.path}: detail")
    parser, grounding, itm = build_backends(section, art)
    backends = backend_names(parser, grounding, itm)
    spec = backend_spec(section) if (eng["engine"], eng["workers"], eng["shards"]) != ("local", 1, None) else None
    surfaces, labels, skipped = load_surfaces(section, dirs["artifacts"], where)

    def rel(p: Path) -> str:  # inputs named relative to the run folder (the same for any run name)
        return p.relative_to(cfg.out_dir).as_posix()

    scores: Dict[str, List[Dict[str, Any]]] = {}
    for name, recs in surfaces.items():
        if spec is None:
            rows = list(score_records(recs, parser, grounding, itm, relation_ends, length_unit))
        else:  # slices on the configured engine, rows in input order (the same rows)
            rows = score_records_engine(recs, spec, relation_ends, length_unit, engine=eng["engine"],
                                        workers=eng["workers"], address=eng["address"], shards=eng["shards"],
                                        backends=(parser, grounding, itm))
        for r in rows:
            r["surface"] = name
        scores[name] = rows
        write_text_atomic(art / f"scores_{name}.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        write_json_atomic(art / f"scores_{name}.manifest.json", {
            "surface": name, "label": labels[name], "rows": len(rows), "backends": backends,
            "icr": icr_definition(rows)["name"], "relation_ends": relation_ends,
            "relation_ends_label": relation_ends_label(relation_ends), "length_unit": length_unit})
    score_files = {name: rel(art / f"scores_{name}.jsonl") for name in scores}
    table_meta = {"backends": backends, "offline_backends": offline_backends(backends, parser),
                  "parser_kinds": list(getattr(parser, "kinds", ()))}

    bs = section.get("bootstrap") or {}
    bootstrap = {"n_resamples": int(bs.get("n_resamples", 2000)), "seed": int(bs.get("seed", 1477)),
                 "confidence": float(bs.get("confidence", 0.95)), "unit": "image clusters"}
    means = {name: surface_means(rows, bootstrap["n_resamples"], bootstrap["seed"], bootstrap["confidence"])
             for name, rows in scores.items()}
    icr_all = icr_definition([r for rows in scores.values() for r in rows])
    icr_by_surface = {name: icr_definition(rows)["name"] for name, rows in scores.items()}
    write_json_atomic(art / "surface_means.json", {"backends": backends, "surfaces": means, "labels": labels,
                                                  "icr": icr_all, "icr_by_surface": icr_by_surface,
                                                  "relation_ends": relation_ends,
                                                  "relation_ends_label": relation_ends_label(relation_ends),
                                                  "bootstrap": {k: bootstrap[k] for k in ("n_resamples", "seed", "unit")}})
    s_rows = surface_table(means, labels, backends, icr_by_surface, relation_ends)
    write_table_rows(dirs["artifacts"], "detail_surfaces", STAGE, s_rows,
                     function="capaudit.detail.surface_report.surface_table",
                     inputs=[rel(art / "surface_means.json"), *score_files.values()],
                     meta={**table_meta, **definitions([r for rows in scores.values() for r in rows], relation_ends),
                           "length_unit": length_unit, "bootstrap": bootstrap})

    sel_cfg = section.get("selection") or {}
    sel_surface = str(sel_cfg.get("surface", next(iter(scores))))
    if sel_surface not in scores:
        raise InputError(f"detail.selection.surface {sel_surface!r} is not a loaded surface", path=where,
                         field="selection.surface")
    k, t = sel_cfg.get("k", 0.6), sel_cfg.get("t", 0.4)
    strategies = list(sel_cfg.get("strategies") or DEFAULT_STRATEGIES)
    sel_rows = selection_rows(scores[sel_surface], strategies, k, t, int(sel_cfg.get("seed", 0)), art / "selection",
                              backends)
    write_table_rows(dirs["artifacts"], "detail_selection", STAGE, sel_rows,
                     function="capaudit.detail.selection_report.selection_rows", inputs=[score_files[sel_surface]],
                     meta={**table_meta, **definitions(scores[sel_surface], relation_ends),
                           "surface": sel_surface, "surface_label": labels[sel_surface],
                           "pool": len(scores[sel_surface]), "k": k, "t": t})

    sg_cfg = section.get("subgraphs") or {}
    sg_surface = str(sg_cfg.get("surface", sel_surface))
    tolerance = float(sg_cfg.get("tolerance", TOLERANCE))
    sub = subgraph_rows(scores.get(sg_surface, []), grounding, int(sg_cfg.get("n_captions", 100)),
                        int(sg_cfg.get("seed", 0)), [float(x) for x in sg_cfg.get("fractions", FRACTIONS)],
                        tolerance, list(sg_cfg.get("measures", MEASURES)), relation_ends)
    write_text_atomic(art / "subgraphs.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sub))
    for r in sub:
        r["parser"], r["grounding"] = backends["parser"], backends["grounding"]
    sg_defs = definitions(scores.get(sg_surface, []), relation_ends)
    sg_rows = subgraph_table(sub, backends, sg_defs["icr"]["name"], relation_ends)
    write_table_rows(dirs["artifacts"], "detail_subgraphs", STAGE, sg_rows,
                     function="capaudit.detail.subgraph_report.subgraph_table", inputs=[rel(art / "subgraphs.jsonl")],
                     meta={**table_meta, **sg_defs, "surface": sg_surface, "tolerance": tolerance,
                           "realiser": REALISER_LABEL})

    write_numbers_fragment(dirs["artifacts"], STAGE,
                           detail_numbers(means, labels, icr_by_surface, sel_rows, icr_all, relation_ends,
                                          relation_ends_label(relation_ends), backends),
                           backend=f"{backends['parser']}; {backends['grounding']}; ITM {backends['itm']}")
    manifest = {"backends": backends, "icr": icr_all, "relation_ends": relation_ends,
                "relation_ends_label": relation_ends_label(relation_ends), "length_unit": length_unit,
                "surfaces": {n: len(r) for n, r in scores.items()}, "skipped_surfaces": skipped,
                "selection": {"surface": sel_surface, "k": k, "t": t, "strategies": strategies},
                "subgraphs": {"surface": sg_surface, "rows": len(sub)},
                "engine": {k: eng[k] for k in ("engine", "workers", "shards")},
                "elapsed_sec": round(time.monotonic() - t0, 2)}
    write_json_atomic(art / "stage_manifest.json", manifest)
    return {"scores": scores, "means": means, "labels": labels, "backends": backends,
            "surface_table": pd.DataFrame(s_rows), "selection_table": pd.DataFrame(sel_rows),
            "subgraph_table": pd.DataFrame(sg_rows), "subgraphs": sub, "manifest": manifest, "artifacts": art,
            "skipped": skipped, "figure_bins": int((section.get("figures") or {}).get("bins", 5)),
            "definitions": {"ICR": f"{icr_all['name']} ({icr_all['note']})",
                            "AOD/CD relations": relation_ends_label(relation_ends)},
            "measure_labels": {"icr": f"{icr_all['name']} (Eq. 2)",
                               "aod": f"AOD (Eq. 4; relations: {relation_ends})",
                               "cd": f"CD (Eq. 5; {icr_all['name']}, relations: {relation_ends})"}}


__all__ = ["DEFAULT_STRATEGIES", "STAGE", "run"]
