"""Judges stage (reference-spec §5; §14 G1, G2, G5): judged slices' claims → judge answers → cells.

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
name and ``revision`` to the offline judge's rule-set version. The claims of each judged slice
(``<slice>/{captions.jsonl, claims/, claimed_cbu_summary.json}``) are the claims stage's
(:mod:`capaudit.claims.judged`, run before this stage: ``capaudit judges run`` and notebook
``05_judges`` do); this stage reads them and refuses, naming the file, when they are missing.
Outputs under ``artifacts/judges/``: per slice ``<slice>/{<judge>/{requests.jsonl, requests.failures.jsonl,
requests.manifest.json, responses.jsonl, vqa_summary.json}, cells.json, judged_claims.jsonl}``;
``cells.json`` (all slices), ``vqa_layout.json``, ``stage_manifest.json`` (written last);
``numbers/judges.json``; table rows ``tables/judges_summary.json`` (the paper renders them). Every response store is
resumable: answered requests are never asked again.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic, write_text_atomic
from capaudit.summaries.cells import format_cells, merge_cells_files
from capaudit.summaries.vqa import format_vqa_summary
from capaudit.summaries.vqa_layout import (Comparison, LayoutJudge, LayoutSlice, LayoutSurface, VqaLayout,
                                          write_vqa_layout)

from capaudit.claims.judged import read_slice_claims, unasked  # noqa: F401  (unasked: public re-export)
from capaudit.results import StageResult

from .answerers import as_answered
from .params import JudgesParams
from .slices import SurfaceSpec, surface_rows
from .stage_params import JudgeSpec, judge_specs, slice_specs, slug
from .stage_report import agreement_frame, extraction_frame, judges_numbers, summary_rows, write_summary_rows


def answer_judge(req: Path, resp: Path, model: str, url: str, params: JudgesParams, dialect: str = "vllm",
                 allow_mismatch: bool = False) -> Dict[str, Any]:
    """Run one judge's requests through ``capaudit.llm.client.run_requests`` (resumable); its stats."""
    from capaudit.llm.client import run_requests

    c = params.claims  # concurrency, timeout, retries and progress are the section's, shared with the extractor
    stats = run_requests(str(req), str(resp), [url], model, concurrency=c.concurrency, timeout=c.timeout,
                         retries=c.retries, dialect=dialect, resume=True, progress=c.progress,
                         handle_signals=False, allow_model_mismatch=allow_mismatch)
    return stats.to_dict()


def eligibility(captions: Sequence[str], budget: int) -> float:
    """B-eligibility (§1.3): share of captions whose lex count is at least ``budget``."""
    from capaudit.text.lexical import lex_count

    return sum(1 for c in captions if lex_count(c) >= budget) / len(captions) if captions else 0.0


def run_slice(name: str, specs: Sequence[SurfaceSpec], judges: Sequence[JudgeSpec], params: JudgesParams,
              art: Path, urls: Mapping[str, str], only: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Judge requests and answers, summaries, cells and judged claims of one slice, from the claims the
    claims stage extracted for it (:func:`capaudit.claims.judged.read_slice_claims`; missing: one line).

    ``only``: ask only these judges (one server at a time); the other judges' stores are read as they
    are. While another judge has requests never asked, the slice stops before its cells:
    ``{"pending": {judge: count}}``."""
    from .cells import cells_from_answers, check_cells_have_data, extraction_accounting, load_slice
    from .judged_claims import judged_claim_rows, write_judged_claims
    from .requests import JudgeBuildParams, build_judge_requests, manifest_path as request_manifest_path
    from .summarize import degraded_list, summarize_judge

    sdir = art / slug(name)
    claims = read_slice_claims(params.claims, name, sdir)
    creq, cresp, captions_path, claimed = claims.requests, claims.responses, claims.captions, claims.claimed
    rows: Dict[str, List[Dict[str, Any]]] = {s.name: surface_rows(s) for s in specs}
    prompts = params.claims.prompts
    run_stats: Dict[str, Any] = {"claims": claims.run_stats}
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
        build = JudgeBuildParams(model=j.model, revision=j.revision, image_mode=params.image_mode,
                                 max_tokens=params.max_tokens, evidence=params.evidence, prompts=prompts)
        counts = build_judge_requests([cresp], [creq], captions_path, "caption_id", "image_path", build, jreq)
        builds[j.name] = counts.__dict__ | {"failures": counts.failures}
        if only is None or j.name in only:
            run_stats[j.name] = answer_judge(jreq, jresp, j.model, urls.get(j.name) or str(j.url), params, j.dialect)
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
    cells, report = cells_from_answers(name, [j.name for j in judges], index, answers, params.reps, params.seed,
                                       extraction, [s.name for s in specs])
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


def build_layout(params: JudgesParams, judges: Sequence[JudgeSpec], slices: Sequence[Tuple[str, Sequence[SurfaceSpec]]],
                 results: Mapping[str, Dict[str, Any]], where: str,
                 kinds: Optional[Mapping[str, Sequence[str]]] = None) -> VqaLayout:
    """The paper layout of this run's judged slices (:mod:`capaudit.summaries.vqa_layout`); ``kinds``:
    the kinds of the model cards that answered each judge."""
    kinds = kinds or {}
    budget = params.claims.budget
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
    for i, c in enumerate(params.comparisons):
        missing = [k for k in ("key", "slice", "ours", "ref") if not c.get(k)]
        if missing:
            raise InputError(f"judges.comparisons[{i}] misses {missing}", path=where, field="comparisons")
        comps.append(Comparison(str(c["key"]), str(c.get("label", c["key"])), str(c["slice"]), str(c["ours"]), str(c["ref"])))
    layout = VqaLayout(
        judges=[LayoutJudge(j.name, j.short, j.label, "offline" if j.offline else "model", tuple(kinds.get(j.name, ())))
                for j in judges],
        slices=lslices, comparisons=comps,
        agreement_slice=params.agreement_slice, denominators_slice=params.denominators_slice)
    layout.validate(where)
    return layout


@dataclass(frozen=True, eq=False)
class JudgesResult(StageResult):
    """What :func:`run` wrote. ``pending`` (slice -> judge -> requests never asked) is non-empty while
    a judge has not answered yet: then only ``manifest`` and ``artifacts`` are set."""

    pending: Dict[str, Dict[str, int]]
    manifest: Dict[str, Any]
    artifacts: Path
    cells: Any = None
    layout: Optional[VqaLayout] = None
    table: Any = None
    tables: Optional[Dict[str, Any]] = None
    agreement: Any = None
    extraction: Any = None
    results: Optional[Dict[str, Dict[str, Any]]] = None


def remove_tabled_outputs(artifacts: Path, slices: Sequence[str], judges: Sequence[JudgeSpec]) -> List[str]:
    """Delete what an earlier complete run tabled (cells, layout, summaries, judged claims, table rows,
    quoted numbers), so that a run left pending is not rendered with an earlier run's numbers; the
    stores stay, and the run that completes every judge writes these again. Returns what it removed."""
    from capaudit.summaries.numbers_fragments import fragment_path
    from capaudit.summaries.table_rows import rows_path

    art = artifacts / "judges"
    paths = [art / "cells.json", art / "vqa_layout.json", rows_path(artifacts, "judges_summary"),
             fragment_path(artifacts, "judges")]
    for n in slices:
        paths += [art / slug(n) / "cells.json", art / slug(n) / "judged_claims.jsonl"]
        paths += [art / slug(n) / slug(j.name) / "vqa_summary.json" for j in judges]
    removed = []
    for p in paths:
        if p.exists():
            p.unlink()
            removed.append(str(p))
    return removed


def run(cfg: RunConfig, only: Optional[Sequence[str]] = None) -> JudgesResult:
    """Run the judges stage for the params file (module docstring) on the claims the claims stage
    extracted for its judged slices (:func:`capaudit.claims.judged.run_judged`, run first); returns
    cells, layout and tables.

    ``only``: ask only these judges (``judges run --judge NAME``: one model's server at a time). The
    cells and tables are written once every judge has answered (or failed) every request; until then
    ``pending`` names the requests never asked and nothing is tabled."""
    import pandas as pd

    from capaudit.summaries.numbers_fragments import write_numbers_fragment

    params = JudgesParams.from_config(cfg)
    where = str(cfg.path)
    params.check_only(only, where)  # before any folder is made
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "judges"
    art.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    judges = list(params.judges)
    slices = [(name, list(specs)) for name, specs in params.slices]
    extractor = params.claims.extractor
    served = list(dict.fromkeys(j.model for j in judges if j.offline and (only is None or j.name in only)))
    if served:
        from capaudit.llm.server import background_server

        server: Any = background_server(served, workers=params.claims.server_workers)
    else:
        server = nullcontext("")
    results: Dict[str, Dict[str, Any]] = {}
    with server as base_url:
        urls = {j.name: str(j.url or base_url) for j in judges}
        for name, specs in slices:
            results[name] = run_slice(name, specs, judges, params, art, urls, only)
    pending = {n: r["pending"] for n, r in results.items() if r.get("pending")}
    if pending:
        removed = remove_tabled_outputs(dirs["artifacts"], [n for n, _ in slices], judges)
        manifest = {"judges": [j.__dict__ for j in judges], "asked": list(only or ()), "pending": pending,
                    "slices": {n: {"builds": r["builds"], "run_stats": r["run_stats"]} for n, r in results.items()},
                    "removed_stale_outputs": removed, "elapsed_sec": round(time.monotonic() - t0, 2)}
        write_json_atomic(art / "stage_manifest.json", manifest)
        return JudgesResult(pending, manifest, art)
    # who answered, over every slice's stores (capaudit.judges.answerers)
    answered = [as_answered(j, [art / slug(n) / slug(j.name) / "responses.jsonl" for n, _ in slices]) for j in judges]
    judges = [j for j, _ in answered]
    judge_kinds = {j.name: k for j, k in answered}
    cells = merge_cells_files([results[n]["cells"] for n, _ in slices])
    write_text_atomic(art / "cells.json", format_cells(cells))
    layout = build_layout(params, judges, slices, results, where, judge_kinds)
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
    return JudgesResult({}, manifest, art, cells, layout, pd.DataFrame(rows), table_paths, agreement_frame(cells),
                        extraction_frame(cells), results)


__all__ = ["JudgeSpec", "JudgesParams", "JudgesResult", "answer_judge", "remove_tabled_outputs", "unasked", "judge_specs", "judges_numbers", "agreement_frame", "extraction_frame", "slice_specs", "run_slice", "build_layout", "summary_rows",
           "write_summary_rows", "eligibility", "run", "slug"]
