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
``subgraphs.jsonl``, ``surface_means.json``, ``stage_manifest.json``), tables
``detail_surfaces``, ``detail_selection``, ``detail_subgraphs`` (CSV + LaTeX body) and the numbers
fragment ``numbers/detail.json``. Every output names the parser, grounding and ITM backends, the
ICR the grounding gives (``things-only ICR`` for COCO instance masks: stuff such as sky, grass or
walls is never covered; ``things+stuff ICR`` for COCO panoptic) and the AOD/CD relation count
(``relation_ends``); the fragment carries them as text macros for the paper
(``DetailIcrKind``, ``DetailIcrName``, ``DetailIcrNote``, ``DetailRelationEnds``).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.config import RunConfig
from capaudit.engine.executors import engine_from_params
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic, write_text_atomic

from .export import export_subset
from .graph import SceneGraph
from .grounding import ICR_KIND_NOTES, icr_name
from .metrics import DEFAULT_LENGTH_UNIT, DEFAULT_RELATION_ENDS, LENGTH_UNITS, RELATION_ENDS, relation_ends_label
from .score import CaptionRecord, read_caption_records, score_records
from .sharded import score_records_engine
from .selection import STRATEGIES, STRATEGY_LABELS, select, subset_stats
from .subgraphs import FRACTIONS, MEASURES, REALISER_LABEL, TOLERANCE, TemplateRealiser, controlled_subgraphs, derived_seed

DEFAULT_SURFACES = [{"name": "coco_human", "source": "coco_mini", "label": "COCO human"}]
DEFAULT_STRATEGIES = list(STRATEGIES)


# -- surfaces ---------------------------------------------------------------------------------------
def coco_mini_records() -> List[CaptionRecord]:
    """The five human captions of each COCO-MINI image (ids ``coco:<annotation id>``)."""
    from capaudit.data.coco import coco_mini

    out = []
    for img in coco_mini():
        for ci, ann in enumerate(sorted(img.captions, key=lambda a: a["id"])):
            out.append(CaptionRecord(f"coco:{ann['id']}", str(img.path) if img.path else img.file_name,
                                     str(ann["caption"]).strip(), len(out) + 1,
                                     {"image_id": img.id, "caption_index": ci}))
    return out


def _expand(path: str, artifacts: Path) -> Path:
    return Path(path.replace("{artifacts}", str(artifacts)).replace(
        "{data}", os.environ.get("CAPAUDIT_DATA_DIR", "../shared/data")))


def load_surfaces(section: Mapping[str, Any], artifacts: Path, where: str = "params") -> Tuple[
        Dict[str, List[CaptionRecord]], Dict[str, str], List[str]]:
    """``(records by surface, labels, skipped surfaces)`` for ``detail.surfaces``."""
    items = section.get("surfaces") or DEFAULT_SURFACES
    out: Dict[str, List[CaptionRecord]] = {}
    labels: Dict[str, str] = {}
    skipped: List[str] = []
    for i, item in enumerate(items, start=1):
        if isinstance(item, str):
            item = {"name": item, "source": "coco_mini"} if item == "coco_human" else {"name": item}
        if not isinstance(item, Mapping) or not item.get("name"):
            raise InputError(f"detail.surfaces item {i} must be a mapping with 'name'", path=where, field="surfaces")
        name = str(item["name"])
        labels[name] = str(item.get("label", name))
        if item.get("source") == "coco_mini":
            out[name] = coco_mini_records()
            continue
        if not item.get("path"):
            raise InputError(f"detail surface {name!r} needs 'source: coco_mini' or a 'path'", path=where,
                             field="surfaces")
        p = _expand(str(item["path"]), artifacts)
        if not p.is_file():
            if item.get("on_missing", "error") == "skip":
                skipped.append(name)
                continue
            raise InputError(f"detail surface {name!r}: file not found", path=p)
        id_field = item.get("id_field", "id")
        recs = read_caption_records(p, str(item.get("caption_field", "caption")), str(item.get("image_field", "image")),
                                    id_field, skip_empty=bool(item.get("skip_empty", False)))
        if not id_field:
            recs = [CaptionRecord(f"{name}:{r.id[3:]}", r.image, r.caption, r.line, r.extra) for r in recs]
        out[name] = recs
    return out, labels, skipped


# -- backends -----------------------------------------------------------------------------------------
def build_backends(section: Mapping[str, Any], artifacts: Path) -> Tuple[Any, Any, Any]:
    """``(parser, grounding, itm scorer)`` from the params section."""
    from .grounding import CocoGrounding, parse_grounding_specs
    from .itm import make_itm_scorer
    from .parsers import LLMSceneGraphParser, OfflineSceneGraphParser

    kind = section.get("parser", "claims")
    if kind == "llm":
        urls = section.get("url")
        if not urls or not section.get("model"):
            raise InputError("detail.parser llm needs 'url' and 'model'", field="detail.url")
        parser: Any = LLMSceneGraphParser([urls] if isinstance(urls, str) else list(urls), str(section["model"]),
                                          artifacts / "scene_graph_responses.jsonl", revision=section.get("revision"),
                                          concurrency=int(section.get("concurrency", 8)))
    elif kind in ("claims", "offline"):
        parser = OfflineSceneGraphParser()
    else:
        raise InputError(f"detail.parser must be 'claims' or 'llm', got {kind!r}", field="detail.parser")
    g = section.get("grounding", "coco_mini")
    if g == "coco_mini":
        grounding: Any = CocoGrounding.coco_mini()
    else:
        grounding = parse_grounding_specs([g] if isinstance(g, str) else list(g or []))
    itm = make_itm_scorer(section.get("itm", "annotation_precision"), grounding, parser)
    return parser, grounding, itm


def backend_spec(section: Mapping[str, Any]) -> Any:
    """The :class:`~capaudit.detail.sharded.BackendSpec` of the params section (what engine workers
    build once each: the offline parser, the grounding and the ITM scorer)."""
    from .sharded import BackendSpec

    kind = section.get("parser", "claims")
    if kind not in ("claims", "offline"):
        raise InputError("detail.parser llm is not sharded (its model calls already run `concurrency` at a time): "
                         "set detail.engine: local and detail.workers: 1", field="detail.engine")
    g = section.get("grounding", "coco_mini")
    grounding = (g,) if isinstance(g, str) else tuple(str(x) for x in (g or []))
    spec = BackendSpec("claims", grounding, section.get("itm", "annotation_precision"))
    spec.validate()
    return spec


def backend_names(parser: Any, grounding: Any, itm: Any) -> Dict[str, str]:
    return {"parser": getattr(parser, "label", parser.name),
            "grounding": grounding.label if grounding is not None else "none (ICR unavailable)",
            "itm": itm.label if itm is not None else "none"}


# -- definitions -----------------------------------------------------------------------------------------
def icr_definition(rows: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """``{"kind", "name", "note"}`` of the ICR behind score rows (their ``icr_kind``; see
    :data:`ICR_KIND_NOTES`); ``kind`` is ``mixed`` for several, ``none`` without grounding."""
    kinds = sorted({str(r["icr_kind"]) for r in rows if r.get("icr_kind")})
    note = "; ".join(ICR_KIND_NOTES.get(k, k) for k in kinds) or "no grounding source"
    kind = kinds[0] if len(kinds) == 1 else ("mixed" if kinds else "none")
    return {"kind": kind, "name": icr_name(kinds), "note": note}


def definition_notes(icr: Mapping[str, str], relation_ends: str, length_unit: Optional[str] = None) -> List[str]:
    """Table header lines naming the ICR and the AOD/CD relation count."""
    rel = f"AOD and CD relation count: {relation_ends_label(relation_ends)}"
    head = f"ICR = {icr['name']} ({icr['note']})" if icr["kind"] != "none" else "ICR: not computed (no grounding source)"
    return [head, rel + (f"; length unit: {length_unit}" if length_unit else "")]


# -- summaries ------------------------------------------------------------------------------------------
def _cluster(row: Mapping[str, Any]) -> str:
    img = row.get("image")
    return str(img).replace("\\", "/").rsplit("/", 1)[-1] if img is not None else f"id:{row.get('id')}"


def surface_means(rows: Sequence[Mapping[str, Any]], n_resamples: int = 2000, seed: int = 1477,
                  confidence: float = 0.95) -> Dict[str, Any]:
    """Mean ICR, AOD, CD of one surface with image-cluster bootstrap intervals (nulls left out)."""
    from capaudit.stats.bootstrap import cluster_bootstrap

    out: Dict[str, Any] = {"captions": len(rows), "images": len({_cluster(r) for r in rows})}
    for key in ("icr", "aod", "cd", "length"):
        vals = [(float(r[key]), _cluster(r)) for r in rows if isinstance(r.get(key), (int, float))]
        out[f"n_{key}"] = len(vals)
        if len(vals) < 2:
            out[key] = {"estimate": vals[0][0] if vals else None, "lower": None, "upper": None}
            continue
        cb = cluster_bootstrap([v for v, _ in vals], [c for _, c in vals], lambda xs: sum(xs) / len(xs),
                               n_resamples=n_resamples, seed=seed, confidence=confidence)
        out[key] = {"estimate": cb.estimate, "lower": cb.lower, "upper": cb.upper, "n_clusters": cb.n_clusters}
    return out


def surface_table(means: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str],
                  backends: Mapping[str, str], icr_names: Optional[Mapping[str, str]] = None,
                  relation_ends: Optional[str] = None) -> List[Dict[str, Any]]:
    """One row per surface; ``icr_names`` (surface → ICR name) and ``relation_ends`` name the definitions."""
    rows = []
    for name, m in means.items():
        row: Dict[str, Any] = {"surface": name, "label": labels.get(name, name), "captions": m["captions"],
                               "images": m["images"], "captions_with_icr": m["n_icr"]}
        for key in ("icr", "aod", "cd", "length"):
            row[f"{key}_mean"] = m[key]["estimate"]
            row[f"{key}_lower"] = m[key]["lower"]
            row[f"{key}_upper"] = m[key]["upper"]
        row.update({"icr_definition": (icr_names or {}).get(name), "relation_ends": relation_ends,
                    "parser": backends["parser"], "grounding": backends["grounding"]})
        rows.append(row)
    return rows


def _f(x: Optional[float], d: int) -> str:
    return "--" if x is None else f"{x:.{d}f}"


def _ci(est: Optional[float], lo: Optional[float], hi: Optional[float], d: int) -> str:
    if est is None:
        return "--"
    if lo is None or hi is None:
        return f"${est:.{d}f}$"
    return f"${est:.{d}f}$ {{\\scriptsize [{lo:.{d}f}, {hi:.{d}f}]}}"


def _tex_escape(s: str) -> str:
    return re.sub(r"([_&%#$])", r"\\\1", str(s))


def write_table(rows: Sequence[Mapping[str, Any]], tables: Path, stem: str, header: Sequence[str],
                lines: Sequence[str]) -> Dict[str, Path]:
    """``<stem>.csv`` (all columns) and ``<stem>.tex`` (a tabular body with comment header lines)."""
    import pandas as pd

    csv = tables / f"{stem}.csv"
    write_text_atomic(csv, pd.DataFrame(list(rows)).to_csv(index=False))
    tex = tables / f"{stem}.tex"
    write_text_atomic(tex, "\n".join([f"% {h}" for h in header] + list(lines)) + "\n")
    return {"csv": csv, "tex": tex}


def selection_rows(rows: Sequence[Mapping[str, Any]], strategies: Sequence[str], k: Any, t: Any, seed: int,
                   out_dir: Path, backends: Mapping[str, str]) -> List[Dict[str, Any]]:
    """Run and export every strategy; one table row each (avg ICR, AOD, length, ITM, CD, and the ICR
    name and relation count of the rows)."""
    icr = icr_definition(rows)["name"]
    rel = ",".join(sorted({str(r["relation_ends"]) for r in rows if r.get("relation_ends")})) or None
    table = []
    for s in strategies:
        sel = select(rows, s, k if STRATEGIES[s][0] is not None else None, t if s != "full" else None, seed=seed)
        export_subset(rows, sel, out_dir / f"{s}.jsonl", backends=backends)
        st = subset_stats(rows, sel)
        table.append({"strategy": s, "label": STRATEGY_LABELS[s], "pool": st["pool"], "k": st["k"], "t": st["t"],
                      "selected": st["selected"], "avg_icr": st["avg_icr"], "avg_aod": st["avg_aod"],
                      "avg_length": st["avg_length"], "avg_itm": st["avg_itm"], "avg_cd": st["avg_cd"],
                      "icr_definition": icr, "relation_ends": rel, "itm_scorer": backends["itm"], "parser": backends["parser"], "grounding": backends["grounding"]})
    return table


def subgraph_rows(rows: Sequence[Mapping[str, Any]], grounding: Any, n_captions: int, seed: int,
                  fractions: Sequence[float], tolerance: float, measures: Sequence[str], relation_ends: str
                  ) -> List[Dict[str, Any]]:
    """Controlled subgraphs of a seeded sample of ``n_captions`` captions (with a graph), realised by
    the template realiser."""
    cands = [r for r in rows if r.get("scene_graph") is not None]
    cands = sorted(cands, key=lambda r: derived_seed(seed, "sample", r["id"]))[:n_captions]
    cands = sorted(cands, key=lambda r: str(r["id"]))
    realiser = TemplateRealiser()
    out = []
    for r in cands:
        g = SceneGraph.from_json(r["scene_graph"])
        grounded = grounding.ground(r.get("image")) if grounding is not None else None
        for item in controlled_subgraphs(g, grounded, measures, fractions, seed, r["id"], tolerance, relation_ends):
            s = item.pop("sample")
            rec: Dict[str, Any] = {"id": r["id"], "image": r.get("image"), "caption": r.get("caption"), **item,
                                   "icr_kind": grounded.icr_kind if grounded is not None else None,
                                   "relation_ends": relation_ends}
            if s is not None:
                rec.update({k: v for k, v in s.to_dict().items() if k not in ("measure", "fraction")})
                rec["realised_caption"] = realiser.realise(s.graph)
                rec["realiser"] = REALISER_LABEL
            out.append(rec)
    return out


def subgraph_table(sub: Sequence[Mapping[str, Any]], backends: Optional[Mapping[str, str]] = None,
                   icr_name_: Optional[str] = None, relation_ends: Optional[str] = None) -> List[Dict[str, Any]]:
    """Reach rate and mean achieved ratio per measure and fraction (``icr_name_`` / ``relation_ends``
    name the definitions of the ICR and AOD measures)."""
    table = []
    for m in dict.fromkeys(r["measure"] for r in sub):
        for f in dict.fromkeys(r["fraction"] for r in sub if r["measure"] == m):
            cell = [r for r in sub if r["measure"] == m and r["fraction"] == f]
            ok = [r for r in cell if r["status"] == "ok"]
            table.append({"measure": m, "fraction": f, "captions": len(cell), "reached": len(ok),
                          "reach_rate": len(ok) / len(cell) if cell else None,
                          "mean_ratio": sum(r["ratio"] for r in ok) / len(ok) if ok else None,
                          "max_abs_error": max(abs(r["ratio"] - f) for r in ok) if ok else None,
                          "definition": icr_name_ if m == "icr" else (relation_ends if m == "aod" else None),
                          "realiser": REALISER_LABEL, "parser": (backends or {}).get("parser"),
                          "grounding": (backends or {}).get("grounding")})
    return table


def _number_name(*parts: str) -> str:
    return "".join(p[:1].upper() + p[1:] for part in parts for p in re.split(r"[^A-Za-z]+", part) if p)


# -- run --------------------------------------------------------------------------------------------------
def run(cfg: RunConfig) -> Dict[str, Any]:
    """Run the detail stage for the params file (module docstring); returns tables and score rows."""
    import pandas as pd

    from capaudit.summaries.numbers_fragments import write_numbers_fragment

    section = cfg.section("detail", required=False)
    relation_ends = str(section.get("relation_ends", DEFAULT_RELATION_ENDS))
    if relation_ends not in RELATION_ENDS:
        raise InputError(f"detail.relation_ends must be one of {', '.join(RELATION_ENDS)}, got {relation_ends!r}",
                         path=str(cfg.path), field="detail.relation_ends")
    length_unit = str(section.get("length_unit", DEFAULT_LENGTH_UNIT))
    if length_unit not in LENGTH_UNITS:
        raise InputError(f"detail.length_unit must be one of {', '.join(LENGTH_UNITS)}, got {length_unit!r}",
                         path=str(cfg.path), field="detail.length_unit")
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "detail"
    art.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    eng = engine_from_params(section, f"{cfg.path}: detail")
    parser, grounding, itm = build_backends(section, art)
    backends = backend_names(parser, grounding, itm)
    spec = backend_spec(section) if (eng["engine"], eng["workers"], eng["shards"]) != ("local", 1, None) else None
    surfaces, labels, skipped = load_surfaces(section, dirs["artifacts"], str(cfg.path))

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
        path = art / f"scores_{name}.jsonl"
        write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        write_json_atomic(art / f"scores_{name}.manifest.json", {
            "surface": name, "label": labels[name], "rows": len(rows), "backends": backends,
            "icr": icr_definition(rows)["name"], "relation_ends": relation_ends,
            "relation_ends_label": relation_ends_label(relation_ends), "length_unit": length_unit})

    bs = section.get("bootstrap") or {}
    means = {name: surface_means(rows, int(bs.get("n_resamples", 2000)), int(bs.get("seed", 1477)),
                                 float(bs.get("confidence", 0.95))) for name, rows in scores.items()}
    icr_all = icr_definition([r for rows in scores.values() for r in rows])
    icr_by_surface = {name: icr_definition(rows)["name"] for name, rows in scores.items()}
    notes = definition_notes(icr_all, relation_ends, length_unit)
    write_json_atomic(art / "surface_means.json", {"backends": backends, "surfaces": means, "labels": labels,
                                                  "icr": icr_all, "icr_by_surface": icr_by_surface,
                                                  "relation_ends": relation_ends,
                                                  "relation_ends_label": relation_ends_label(relation_ends),
                                                  "bootstrap": {"n_resamples": int(bs.get("n_resamples", 2000)),
                                                                "seed": int(bs.get("seed", 1477)),
                                                                "unit": "image clusters"}})
    s_rows = surface_table(means, labels, backends, icr_by_surface, relation_ends)
    s_lines = [" & ".join([_tex_escape(r["label"]), f"${r['captions']}$", _ci(r["icr_mean"], r["icr_lower"], r["icr_upper"], 3),
                           _ci(r["aod_mean"], r["aod_lower"], r["aod_upper"], 2),
                           _ci(r["cd_mean"], r["cd_lower"], r["cd_upper"], 4),
                           f"${_f(r['length_mean'], 1)}$"]) + r" \\" for r in s_rows]
    write_table(s_rows, dirs["tables"], "detail_surfaces",
                [f"per-surface mean {icr_all['name']} (Eq. 2), AOD (Eq. 4), CD (Eq. 5) with 95% image-cluster "
                 "bootstrap intervals", *notes,
                 f"parser: {backends['parser']}", f"grounding: {backends['grounding']}",
                 f"columns: surface & captions & {icr_all['name']} & AOD & CD & length"], s_lines)

    sel_cfg = section.get("selection") or {}
    sel_surface = str(sel_cfg.get("surface", next(iter(scores))))
    if sel_surface not in scores:
        raise InputError(f"detail.selection.surface {sel_surface!r} is not a loaded surface", path=str(cfg.path),
                         field="selection.surface")
    k, t = sel_cfg.get("k", 0.6), sel_cfg.get("t", 0.4)
    strategies = list(sel_cfg.get("strategies") or DEFAULT_STRATEGIES)
    sel_rows = selection_rows(scores[sel_surface], strategies, k, t, int(sel_cfg.get("seed", 0)), art / "selection",
                              backends)
    sel_lines = [" & ".join([_tex_escape(r["label"]).replace("→", r"$\to$"), f"${r['selected']}$", f"${_f(r['avg_icr'], 3)}$",
                             f"${_f(r['avg_aod'], 2)}$", f"${_f(r['avg_length'], 1)}$", f"${_f(r['avg_itm'], 3)}$"])
                 + r" \\" for r in sel_rows]
    write_table(sel_rows, dirs["tables"], "detail_selection",
                [f"selection strategies on {labels[sel_surface]} (pool {len(scores[sel_surface])}; K={k}, T={t})",
                 *definition_notes(icr_definition(scores[sel_surface]), relation_ends),
                 f"ITM: {backends['itm']}", f"parser: {backends['parser']}", f"grounding: {backends['grounding']}",
                 f"columns: strategy & selected & avg {icr_by_surface[sel_surface]} & avg AOD & avg length & avg ITM"],
                sel_lines)

    sg_cfg = section.get("subgraphs") or {}
    sg_surface = str(sg_cfg.get("surface", sel_surface))
    sub = subgraph_rows(scores.get(sg_surface, []), grounding, int(sg_cfg.get("n_captions", 100)),
                        int(sg_cfg.get("seed", 0)), [float(x) for x in sg_cfg.get("fractions", FRACTIONS)],
                        float(sg_cfg.get("tolerance", TOLERANCE)), list(sg_cfg.get("measures", MEASURES)),
                        relation_ends)
    write_text_atomic(art / "subgraphs.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sub))
    for r in sub:
        r["parser"], r["grounding"] = backends["parser"], backends["grounding"]
    sg_icr = icr_definition(scores.get(sg_surface, []))
    sg_rows = subgraph_table(sub, backends, sg_icr["name"], relation_ends)
    sg_lines = [" & ".join([r["measure"].upper(), f"${100 * r['fraction']:.0f}\\%$", f"${r['reached']}/{r['captions']}$",
                            f"${_f(r['mean_ratio'], 3)}$"]) + r" \\" for r in sg_rows]
    write_table(sg_rows, dirs["tables"], "detail_subgraphs",
                [f"controlled subgraphs (tolerance ±{float(sg_cfg.get('tolerance', TOLERANCE))}); realiser: {REALISER_LABEL}",
                 *definition_notes(sg_icr, relation_ends),
                 f"parser: {backends['parser']}; grounding: {backends['grounding']}",
                 "columns: measure & target & reached & mean achieved ratio"], sg_lines)

    numbers: Dict[str, Dict[str, Any]] = {}
    for name, m in means.items():
        for key, d in (("icr", 3), ("aod", 2), ("cd", 4)):
            est = m[key]["estimate"]
            if est is not None:
                what = {"icr": icr_by_surface[name], "aod": f"AOD (relations: {relation_ends})",
                        "cd": f"CD ({icr_by_surface[name]}; relations: {relation_ends})"}[key]
                numbers[_number_name("detail", name, key.upper())] = {
                    "value": est, "text": f"{est:.{d}f}",
                    "description": f"mean {what} of surface {labels[name]} ({backends['parser']})"}
    for r in sel_rows:
        for key, d in (("avg_icr", 3), ("avg_aod", 2), ("avg_length", 1)):
            if r[key] is not None:
                numbers[_number_name("detail", "sel", r["strategy"], key)] = {
                    "value": r[key], "text": f"{r[key]:.{d}f}",
                    "description": f"{key} of the {r['label']} subset (ITM: {backends['itm']})"}
    for key, text, what in (("IcrKind", icr_all["kind"], "kind of the ICR the grounding gives (table headers)"),
                            ("IcrName", icr_all["name"], "name of the ICR the grounding gives"),
                            ("IcrNote", icr_all["note"], "what the ICR's grounding covers"),
                            ("RelationEnds", relation_ends_label(relation_ends), "AOD/CD relation count")):
        numbers[_number_name("detail", key)] = {"value": text, "text": _tex_escape(text), "description": what}
    write_numbers_fragment(dirs["artifacts"], "detail", numbers,
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


__all__ = ["coco_mini_records", "load_surfaces", "build_backends", "backend_spec", "backend_names", "icr_definition",
           "definition_notes", "surface_means", "surface_table",
           "selection_rows", "subgraph_rows", "subgraph_table", "run"]
