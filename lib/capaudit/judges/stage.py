"""Judges stage (reference-spec §5; §14 G1, G2, G5): judged slices → claims → judge answers → cells.

Params section ``judges``::

    judges:
      extractor: capaudit-heuristic-extractor    # claim extractor (model name); extractor_url: null = in-process
      budget: 64                                 # claim window (whitespace words, §1.2)
      image_mode: file                           # file | data | url (§5.2)
      judges:                                    # cells are per judge; >= 2 for agreement
        - {name: capaudit-offline-annotation-judge}
        - {name: capaudit-offline-refcaption-judge}
        # - {name: Qwen3.5-397B-A17B-FP8, model: Qwen/Qwen3.5-397B-A17B-FP8, url: http://h:8001, revision: ea5b...}
      slices:
        - name: COCO-MINI
          surfaces: [{name, label, role, source, ...}]   # capaudit.judges.slices
      comparisons: [{key, label, slice, ref, ours}]     # headline / excl. tables (ref -> ours)
      agreement_slice: COCO-MINI
      reps: 2000                                  # caption bootstrap (§5.4)
      seed: 0
      concurrency: 4
      timeout: 240
      server_workers: 1
      probe: {...}                                # capaudit.judges.probe

A judge without ``url`` must be an offline backend (served in-process by
:func:`capaudit.llm.server.background_server`, like the extractor); ``model`` defaults to the
name and ``revision`` to the offline judge's rule-set version. Outputs under
``artifacts/judges/``: per slice ``<slice>/{captions.jsonl, claims/{requests,responses}.jsonl,
claimed_cbu_summary.json, <judge>/{requests.jsonl, requests.failures.jsonl,
requests.manifest.json, responses.jsonl, vqa_summary.json}, cells.json, judged_claims.jsonl}``;
``cells.json`` (all slices), ``vqa_layout.json``, ``stage_manifest.json`` (written last);
``numbers/judges.json``; table rows ``tables/judges_summary.json`` (the paper renders them). Every response store is
resumable: answered requests are never asked again.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic, write_text_atomic
from capaudit.io.canonical_json import dumps_line
from capaudit.summaries.cells import format_cells, merge_cells_files
from capaudit.summaries.vqa import format_vqa_summary
from capaudit.summaries.vqa_layout import (Comparison, LayoutJudge, LayoutSlice, LayoutSurface, VqaLayout,
                                          write_vqa_layout)

from .answerers import as_answered
from .slices import SurfaceSpec, surface_rows
from .stage_params import SECTION, JudgeSpec, judge_specs, slice_specs, slug
from .stage_report import agreement_frame, extraction_frame, judges_numbers, summary_rows, write_summary_rows


def _run_store(req: Path, resp: Path, model: str, url: str, section: Mapping[str, Any], dialect: str = "vllm",
               allow_mismatch: bool = False) -> Dict[str, Any]:
    from capaudit.llm.client import run_requests

    stats = run_requests(str(req), str(resp), [url], model, concurrency=int(section.get("concurrency", 4)),
                         timeout=float(section.get("timeout", 240)), retries=int(section.get("retries", 3)),
                         dialect=dialect, resume=True, progress=bool(section.get("progress", False)),
                         handle_signals=False, allow_model_mismatch=allow_mismatch)
    return stats.to_dict()


def unasked(req: Path, resp: Path) -> int:
    """Requests of ``req`` with no row at all in ``resp`` (never asked; a failed row was asked)."""
    from capaudit.llm.requests import iter_request_lines, parse_request_line
    from capaudit.llm.store import scan_ids

    answered, failed = scan_ids(resp) if resp.exists() else (set(), set())
    seen = answered | failed
    return sum(1 for n, line in iter_request_lines(req)
               if parse_request_line(line, f"{req}:{n}")["request_id"] not in seen)


def eligibility(captions: Sequence[str], budget: int) -> float:
    """B-eligibility (§1.3): share of captions whose lex count is at least ``budget``."""
    from capaudit.text.lexical import lex_count

    return sum(1 for c in captions if lex_count(c) >= budget) / len(captions) if captions else 0.0


def run_slice(name: str, specs: Sequence[SurfaceSpec], judges: Sequence[JudgeSpec], section: Mapping[str, Any],
              art: Path, urls: Mapping[str, str], only: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Claims, judge requests and answers, summaries, cells and judged claims of one slice.

    ``only``: ask only these judges (one server at a time); the other judges' stores are read as they
    are and the extraction store is asked only for requests it has no row for. While another judge
    has requests never asked, the slice stops before its cells: ``{"pending": {judge: count}}``."""
    from capaudit.claims.requests import BuildParams, build_requests, write_manifest
    from capaudit.claims.stage import model_revision
    from capaudit.prompt_sets import DEFAULT_PROMPT_SET, REFERENCE_EXTRACTION_MAX_TOKENS
    from capaudit.llm.requests import write_requests
    from capaudit.summaries.claimed import format_claimed_summary

    from .cells import cells_from_answers, check_cells_have_data, extraction_accounting, load_slice
    from .judged_claims import judged_claim_rows, write_judged_claims
    from .requests import JudgeBuildParams, build_judge_requests, manifest_path as request_manifest_path
    from .summarize import degraded_list, summarize_judge

    sdir = art / slug(name)
    (sdir / "claims").mkdir(parents=True, exist_ok=True)
    budget = int(section.get("budget", 64))
    extractor = str(section.get("extractor", "capaudit-heuristic-extractor"))
    prompts = str(section.get("prompts", DEFAULT_PROMPT_SET))
    rows: Dict[str, List[Dict[str, Any]]] = {s.name: surface_rows(s) for s in specs}
    captions_path = sdir / "captions.jsonl"
    with open(captions_path.with_suffix(".jsonl.tmp"), "wb") as fh:
        for s in specs:
            for r in rows[s.name]:
                fh.write(dumps_line(r))
    captions_path.with_suffix(".jsonl.tmp").replace(captions_path)
    # 1. claims
    creq = sdir / "claims" / "requests.jsonl"
    cresp = sdir / "claims" / "responses.jsonl"
    revision = model_revision(extractor, section.get("extractor_revision"), urls["__extractor__"])
    claim_rows: List[Dict[str, Any]] = []
    for s in specs:
        params = BuildParams(surface=s.name, budget=budget, model=extractor, revision=revision,
                             max_tokens=int(section.get("extractor_max_tokens", REFERENCE_EXTRACTION_MAX_TOKENS)),
                             prompts=prompts)
        items = [(i, r["caption"], r["caption_id"], {"image_id": r.get("image_id")}) for i, r in enumerate(rows[s.name])]
        built, _ = build_requests(items, params)
        claim_rows += built
    write_requests(creq, claim_rows)
    write_manifest(creq, BuildParams(surface="+".join(s.name for s in specs), budget=budget, model=extractor,
                                     revision=revision, prompts=prompts), {"emitted": len(claim_rows)},
                   {"input": str(captions_path), "caption_field": "caption", "id_field": "caption_id"})
    if only is None or unasked(creq, cresp):
        run_stats: Dict[str, Any] = {"claims": _run_store(creq, cresp, extractor, urls["__extractor__"], section)}
    else:  # extracted by an earlier run (its server need not be up for this judge's run)
        run_stats = {"claims": {"not_asked": "every request has a row"}}
    ids = {r["request_id"] for r in claim_rows}
    claimed = _claimed_summary(cresp, creq, ids, {"requests": str(creq), "responses": str(cresp),
                                                   "extractor": extractor, "budget": budget, "slice": name,
                                                   "prompt_set": prompts})
    write_text_atomic(sdir / "claimed_cbu_summary.json", format_claimed_summary(claimed))
    extraction = extraction_accounting([cresp], [creq], [s.name for s in specs])
    # 2. judges
    builds: Dict[str, Any] = {}
    req_paths: List[Path] = []
    kinds: Dict[str, List[str]] = {}
    pending: Dict[str, int] = {}
    given = list(judges)
    judges = []
    for j in given:
        jdir = sdir / slug(j.name)
        jdir.mkdir(parents=True, exist_ok=True)
        jreq, jresp = jdir / "requests.jsonl", jdir / "responses.jsonl"
        params = JudgeBuildParams(model=j.model, revision=j.revision, image_mode=str(section.get("image_mode", "file")),
                                  max_tokens=int(section.get("max_tokens", 2048)), evidence=bool(section.get("evidence", False)),
                                  prompts=prompts)
        counts = build_judge_requests([cresp], [creq], captions_path, "caption_id", "image_path", params, jreq)
        builds[j.name] = counts.__dict__ | {"failures": counts.failures}
        if only is None or j.name in only:
            run_stats[j.name] = _run_store(jreq, jresp, j.model, urls.get(j.name) or str(j.url), section, j.dialect)
        else:
            left = unasked(jreq, jresp)
            run_stats[j.name] = {"not_asked": f"not selected ({left} requests never asked)"}
            if left:
                pending[j.name] = left
        req_paths.append(jreq)
        j, kinds[j.name] = as_answered(j, [jresp])  # labelled as the recorded model cards say
        judges.append(j)
    versions = sorted({str(json.loads(request_manifest_path(p).read_text(encoding="utf-8")).get("prompt_version"))
                       for p in req_paths})  # the model-facing text, as the request manifests record it
    if pending:  # no cell from a judge that has not answered yet
        return {"pending": pending, "builds": builds, "run_stats": run_stats, "judges": judges, "kinds": kinds}
    index, answers = load_slice([(j.name, [sdir / slug(j.name) / "responses.jsonl"]) for j in judges], req_paths,
                                keep_examples=20)
    for j, one, rp in zip(judges, answers, req_paths):
        summ = summarize_judge(index, one, [rp], {"judge": j.name, "model": j.model, "revision": j.revision,
                                                  "backend": "offline" if j.offline else "model", "label": j.label,
                                                  "requests": str(rp), "responses": str(sdir / slug(j.name) / "responses.jsonl"),
                                                  "merge": "answered-wins", "degraded": degraded_list(one),
                                                  "degraded_responses": one.degraded_responses})
        write_text_atomic(sdir / slug(j.name) / "vqa_summary.json", format_vqa_summary(summ))
    cells, report = cells_from_answers(name, [j.name for j in judges], index, answers, int(section.get("reps", 2000)),
                                       int(section.get("seed", 0)), extraction, [s.name for s in specs])
    check_cells_have_data(report, [j.name for j in judges], [s.name for s in specs],
                          [str(sdir / slug(j.name) / "responses.jsonl") for j in judges])
    write_text_atomic(sdir / "cells.json", format_cells(cells))
    n_claims = write_judged_claims(sdir / "judged_claims.jsonl", judged_claim_rows(
        name, [j.name for j in judges], index, answers, req_paths, [creq],
        {j.name: ("offline" if j.offline else "model") for j in judges}))
    return {"cells": cells, "claimed": claimed, "rows": rows, "builds": builds, "run_stats": run_stats,
            "judges": judges, "kinds": kinds,
            "prompt_versions": versions,
            "report": report, "judged_claims": n_claims, "extraction": extraction}


def _claimed_summary(resp: Path, req: Path, ids: set, label: Any) -> Any:
    """Claimed summary over the current requests only (a resumed store may hold older answers)."""
    from capaudit.claims.summarize import summarize_responses
    from capaudit.llm.store import merge

    rows = merge(resp)
    if set(rows) <= ids:
        return summarize_responses([resp], [req], input_label=label)
    tmp = resp.with_name(resp.name + ".current.tmp")
    with open(tmp, "wb") as fh:
        for rid in sorted(rows):
            if rid in ids:
                fh.write(dumps_line(rows[rid]))
    try:
        return summarize_responses([tmp], [req], input_label=label)
    finally:
        tmp.unlink()


def build_layout(section: Mapping[str, Any], judges: Sequence[JudgeSpec], slices: Sequence[Tuple[str, Sequence[SurfaceSpec]]],
                 results: Mapping[str, Dict[str, Any]], where: str,
                 kinds: Optional[Mapping[str, Sequence[str]]] = None) -> VqaLayout:
    """The paper layout of this run's judged slices (:mod:`capaudit.summaries.vqa_layout`); ``kinds``:
    the kinds of the model cards that answered each judge."""
    kinds = kinds or {}
    budget = int(section.get("budget", 64))
    lslices = []
    for name, specs in slices:
        res = results[name]
        surfaces = []
        for s in specs:
            claimed = None
            if s.name in res["claimed"].surfaces:
                cs = res["claimed"].surface(s.name)
                claimed = {"captions": float(cs.captions), "cbu_per_cap": cs.cbu_per_cap, "cbu_per_100_lex": cs.cbu_per_100_lex}
            policies = {r.get("policy") for r in res["rows"][s.name]} - {None}
            policy = s.policy or (str(next(iter(policies))) if len(policies) == 1 else None)
            surfaces.append(LayoutSurface(s.name, s.label, s.role, policy, s.corpus if policy else None,
                                          eligibility([r["caption"] for r in res["rows"][s.name]], budget), budget, claimed))
        lslices.append(LayoutSlice(name, surfaces))
    comps = []
    for i, c in enumerate(section.get("comparisons") or []):
        if not isinstance(c, Mapping):
            raise InputError(f"judges.comparisons[{i}] must be a mapping", path=where, field="comparisons")
        missing = [k for k in ("key", "slice", "ours", "ref") if not c.get(k)]
        if missing:
            raise InputError(f"judges.comparisons[{i}] misses {missing}", path=where, field="comparisons")
        comps.append(Comparison(str(c["key"]), str(c.get("label", c["key"])), str(c["slice"]), str(c["ours"]), str(c["ref"])))
    layout = VqaLayout(
        judges=[LayoutJudge(j.name, j.short, j.label, "offline" if j.offline else "model", tuple(kinds.get(j.name, ())))
                for j in judges],
        slices=lslices, comparisons=comps,
        agreement_slice=section.get("agreement_slice", slices[0][0] if len(judges) >= 2 else None),
        denominators_slice=section.get("denominators_slice", slices[0][0]))
    layout.validate(where)
    return layout


def run(cfg: RunConfig, only: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Run the judges stage for the params file (module docstring); returns cells, layout and tables.

    ``only``: ask only these judges (``judges run --judge NAME``: one model's server at a time). The
    cells and tables are written once every judge has answered (or failed) every request; until then
    the result is ``{"pending": {slice: {judge: requests never asked}}}`` and nothing is tabled."""
    import pandas as pd

    from capaudit.summaries.numbers_fragments import write_numbers_fragment

    section = cfg.section(SECTION)
    where = str(cfg.path)
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "judges"
    art.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    judges = judge_specs(section, where)
    if only is not None:
        unknown = sorted(set(only) - {j.name for j in judges})
        if unknown:
            raise InputError(f"--judge {', '.join(unknown)}: no such judge (judges: "
                             f"{', '.join(j.name for j in judges)})", path=where, field="judges")
    slices = slice_specs(section, where, {"run_dir": str(cfg.out_dir), "artifacts": str(dirs["artifacts"])})
    extractor = str(section.get("extractor", "capaudit-heuristic-extractor"))
    ext_url = section.get("extractor_url")
    served = [j.model for j in judges if j.offline and (only is None or j.name in only)]
    if not ext_url:
        served = [extractor] + served
    served = list(dict.fromkeys(served))
    if served:
        from capaudit.llm.server import background_server

        server: Any = background_server(served, workers=int(section.get("server_workers", 1)))
    else:
        server = nullcontext("")
    results: Dict[str, Dict[str, Any]] = {}
    with server as base_url:
        urls = {"__extractor__": str(ext_url or base_url)}
        urls.update({j.name: str(j.url or base_url) for j in judges})
        for name, specs in slices:
            results[name] = run_slice(name, specs, judges, section, art, urls, only)
    pending = {n: r["pending"] for n, r in results.items() if r.get("pending")}
    if pending:
        manifest = {"judges": [j.__dict__ for j in judges], "asked": list(only or ()), "pending": pending,
                    "slices": {n: {"builds": r["builds"], "run_stats": r["run_stats"]} for n, r in results.items()},
                    "elapsed_sec": round(time.monotonic() - t0, 2)}
        write_json_atomic(art / "stage_manifest.json", manifest)
        return {"pending": pending, "manifest": manifest, "artifacts": art}
    # who answered, over every slice's stores (capaudit.judges.answerers)
    answered = [as_answered(j, [art / slug(n) / slug(j.name) / "responses.jsonl" for n, _ in slices]) for j in judges]
    judges = [j for j, _ in answered]
    judge_kinds = {j.name: k for j, k in answered}
    cells = merge_cells_files([results[n]["cells"] for n, _ in slices])
    write_text_atomic(art / "cells.json", format_cells(cells))
    layout = build_layout(section, judges, slices, results, where, judge_kinds)
    write_vqa_layout(layout, art / "vqa_layout.json")
    rows = summary_rows(cells, layout)
    versions = sorted({v for r in results.values() for v in r["prompt_versions"]})
    table_paths = {"rows": write_summary_rows(rows, dirs["artifacts"], judges, inputs=[str(art / "cells.json")],
                                              prompt_versions=versions, kinds=judge_kinds)}
    failures = sum(r["builds"][j.name]["failures"] for r in results.values() for j in judges)
    bad = sum(v["failed"] for r in results.values() for k, v in r["report"].items() if k != "__intersection__")
    captions = sum(r["report"]["__intersection__"]["captions"] for r in results.values())
    questions = sum(c.all_types.questions for c in cells.cells if c.judge == judges[0].name)
    write_numbers_fragment(dirs["artifacts"], "judges", judges_numbers(captions, questions, failures, bad, judges),
                           backend=", ".join(j.label for j in judges))
    manifest = {
        "judges": [j.__dict__ | {"answered_by_kinds": judge_kinds[j.name]} for j in judges], "extractor": extractor, "served_in_process": served,
        "slices": {n: {"surfaces": [s.name for s in specs], "builds": results[n]["builds"],
                       "run_stats": results[n]["run_stats"], "judged_claims": results[n]["judged_claims"],
                       "report": results[n]["report"]} for n, specs in slices},
        "elapsed_sec": round(time.monotonic() - t0, 2),
    }
    write_json_atomic(art / "stage_manifest.json", manifest)
    return {"cells": cells, "layout": layout, "table": pd.DataFrame(rows), "tables": table_paths,
            "agreement": agreement_frame(cells), "extraction": extraction_frame(cells),
            "results": results, "manifest": manifest, "artifacts": art}


__all__ = ["JudgeSpec", "judge_specs", "judges_numbers", "agreement_frame", "extraction_frame", "slice_specs", "run_slice", "build_layout", "summary_rows",
           "write_summary_rows", "eligibility", "run", "slug"]
