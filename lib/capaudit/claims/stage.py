"""Claims stage (reference-spec §4; §14 G3, G6, G7): requests → answers → claimed summaries.

Params section ``claims``::

    claims:
      model: capaudit-heuristic-extractor   # backend served in-process (or the model at `url`)
      revision: null                        # hashed into ids; default: the version the server declares (a stand-in's rules)
      url: null                             # an OpenAI-compatible server; null = in-process capaudit serve
      budget: 64                            # main claim window (whitespace words)
      budgets: [16, 32, 48, 64]             # budget sweep → frontier CSV
      lexical_window: true                  # B=budget lexical-window sensitivity (§1.2, G7)
      surfaces: [iiw400_human, {name: coco_karpathy_test, sample_records: 1000}, ...]
      labels: {iiw400_human: IIW human, ...}   # display labels (default: the surface name)
      sample_seed: 0
      max_caption_chars: 1800
      concurrency: 8
      server_workers: 1
      timeout: 240
      bootstrap_reps: 2000                  # caption-level bootstrap intervals (0: none, said so)
      bootstrap_seed: 0

For each window (``b16`` … ``b64``, ``lexical_b64``) one request file holds every configured
surface (so ``bad_json`` of the frontier is shared by the surfaces of a budget, as in the
reference), answered through the production path: ``capaudit.llm.client.run_requests`` against an
in-process ``capaudit serve`` (:func:`capaudit.llm.server.background_server`) or the configured ``url``. Responses
are resumable (answered ids are not asked again). Outputs under ``artifacts/claims/``:
``<window>/{requests.jsonl, requests.manifest.json, responses.jsonl, claimed_cbu_summary.json,
claimed_cbu_summary.intervals.json, responses.models.json}``, ``claimed_cbu_summary{,.intervals}.json`` (the main budget),
``budget_frontier.csv`` (+ ``.manifest.json`` naming the backend, which the fixed CSV schema cannot
carry), ``lexical_window_claimed_cbu_summary{,.intervals}.json``, ``stage_manifest.json``; the summary
table's rows ``artifacts/tables/claims_summary.json`` (:mod:`.summary_rows`; the paper renders them).
The intervals files hold each surface's caption-level 95 % percentile bootstrap intervals of CBU/cap,
CBU/100 lex and per-type CBU/cap (:class:`.summarize.ClaimIntervals`; ``bootstrap_reps`` 0: none).

Who extracted is what the server declared: the model card (:mod:`capaudit.llm.cards`) read before
the requests are built gives the revision (a stand-in's rule-set version) and the label written
into the request manifests; the cards the client recorded beside each response store
(:func:`capaudit.llm.store.answered_by`) give the extractor label, the offline flag and the
caveat of every summary and table. No model name is recognised here.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.config import RunConfig
from capaudit.results import StageResult
from capaudit.llm.cards import any_stand_in, card_kinds, cards_label
from capaudit.llm.requests import write_requests
from capaudit.summaries.claimed import ClaimedSummary, write_claimed_summary
from capaudit.summaries.frontier import rows_from_claimed, with_pareto_flags, write_frontier_csv

from .params import SECTION, ClaimsParams
from .requests import BuildParams, build_requests, write_manifest
from .summarize import ClaimIntervals, intervals_path, summarize_with_intervals, write_claim_intervals
from .summary_rows import summary_rows, write_summary_rows



@dataclass(frozen=True)
class SurfacePlan:
    """One surface of the stage: its spec and sampling."""

    name: str
    spec: Dict[str, Any]
    sample_records: Optional[int] = None
    max_records: Optional[int] = None


def plan_surfaces(cfg: RunConfig, params: ClaimsParams) -> List[SurfacePlan]:
    """Resolve ``claims.surfaces`` against the run's ``surfaces:`` declarations."""
    from capaudit.surfaces.stage import surface_specs

    specs = surface_specs(cfg)
    items = list(params.surfaces) if params.surfaces else list(specs)
    out = []
    for i, item in enumerate(items, start=1):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping) or not item.get("name"):
            raise ValueError(f"{cfg.path}: claims.surfaces item {i} must be a name or a mapping with 'name'")
        name = str(item["name"])
        if name not in specs:
            raise KeyError(f"{cfg.path}: claims surface '{name}' is not declared under 'surfaces'")
        out.append(SurfacePlan(name, specs[name], item.get("sample_records"), item.get("max_records")))
    return out


def surface_items(plan: SurfacePlan) -> List[Tuple[int, str, Optional[str], Dict[str, Any]]]:
    """``(source_row, caption, caption_id=None, meta)`` per record (source_row = record ordinal)."""
    from capaudit.surfaces import iter_captions

    return [(i, r.caption, None, {"key": r.key, "caption_index": r.caption_index})
            for i, r in enumerate(iter_captions(plan.spec))]


def model_revision(model: str, revision: Optional[str], url: Optional[str] = None) -> Optional[str]:
    """``revision`` (``claims.revision``); else the version the server at ``url`` declares for
    ``model`` (a stand-in's rule set: changed rules never reuse old answers, the revision is hashed
    into every request id); else ``None``."""
    if revision is not None:
        return str(revision)
    if url:
        from capaudit.llm.cards import model_revision as declared_revision

        return declared_revision(url, model)
    return None


def build_window_requests(plans: Sequence[SurfacePlan], captions: Mapping[str, list], budget: int, window: str,
                          params: ClaimsParams, model: str, revision: Optional[str] = None
                          ) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """All surfaces' requests for one window; returns rows and per-surface counts."""
    rows: List[Dict[str, Any]] = []
    counts: Dict[str, Any] = {}
    for p in plans:
        build = BuildParams(
            surface=p.name, budget=budget, window=window, model=model, revision=revision,
            max_caption_chars=params.max_caption_chars, max_tokens=params.max_tokens, prompts=params.prompts,
            sample_records=p.sample_records, sample_seed=params.sample_seed, max_records=p.max_records,
        )
        r, c = build_requests(captions[p.name], build)
        rows += r
        counts[p.name] = c
    return rows, counts


def answer_requests(requests_path: Path, responses_path: Path, model: str, urls: Sequence[str],
                    params: Any) -> Dict[str, Any]:
    """Run the requests through ``capaudit.llm.client.run_requests`` (resumable); ``params`` a
    :class:`ClaimsParams` or :class:`JudgedClaimsParams` (concurrency, timeout, retries, progress)."""
    from capaudit.llm.client import run_requests

    stats = run_requests(
        str(requests_path), str(responses_path), list(urls), model,
        concurrency=params.concurrency, timeout=params.timeout, retries=params.retries,
        dialect=getattr(params, "dialect", "vllm"), resume=True, progress=params.progress, handle_signals=False,
    )
    return stats.to_dict()


def window_names(params: ClaimsParams) -> List[Tuple[str, int, str]]:
    """``(directory name, budget, window mode)`` of every window the stage runs."""
    return list(params.windows())


@dataclass(frozen=True, eq=False)
class ClaimsResult(StageResult):
    """What :func:`run` wrote: claimed summaries and intervals by window, the main and lexical
    summaries, the frontier, the tables, the extractor label and the stage manifest."""

    summaries: Dict[str, ClaimedSummary]
    intervals: Dict[str, ClaimIntervals]
    main: ClaimedSummary
    lexical: Optional[ClaimedSummary]
    frontier: List[Any]
    table: Any
    frontier_table: Any
    extractor: str
    manifest: Dict[str, Any]
    artifacts: Path


def run(cfg: RunConfig) -> ClaimsResult:
    """Run the claims stage for the params file (module docstring); returns summaries and tables."""
    params = ClaimsParams.from_section(cfg.section(SECTION), cfg.path)
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "claims"
    art.mkdir(parents=True, exist_ok=True)
    model = params.model
    plans = plan_surfaces(cfg, params)
    labels = {p.name: str(params.labels.get(p.name, p.name)) for p in plans}
    main_budget = params.budget
    boot = (params.bootstrap_reps, params.bootstrap_seed)
    t0 = time.monotonic()
    captions = {p.name: surface_items(p) for p in plans}
    url = params.url
    if url:
        server = nullcontext(str(url))
    else:
        from capaudit.llm.server import background_server

        server = background_server([model], workers=params.server_workers)
    summaries: Dict[str, ClaimedSummary] = {}
    intervals: Dict[str, ClaimIntervals] = {}
    run_stats: Dict[str, Any] = {}
    versions: Dict[str, List[str]] = {}
    answered: List[Dict[str, Any]] = []
    with server as base_url:
        from capaudit.llm.cards import fetch_card
        from capaudit.llm.store import answered_by

        declared = fetch_card(str(base_url), model)
        revision = model_revision(model, params.revision, str(base_url))
        extractor = cards_label([declared], model)
        for name, budget, window in window_names(params):
            wdir = art / name
            wdir.mkdir(parents=True, exist_ok=True)
            rows, counts = build_window_requests(plans, captions, budget, window, params, model, revision)
            req_path = wdir / "requests.jsonl"
            write_requests(req_path, rows)
            write_manifest(req_path, BuildParams(surface="+".join(p.name for p in plans), budget=budget, window=window,
                                                 model=model, revision=revision,
                                                 prompts=params.prompts, extra={"backend": extractor}),
                           {"per_surface": counts, "emitted": len(rows)})  # type: ignore[dict-item]
            resp_path = wdir / "responses.jsonl"
            versions[name] = sorted({str(r.get("prompt_version")) for r in rows})
            run_stats[name] = answer_requests(req_path, resp_path, model, [base_url], params)
            answered += [c for c in answered_by(resp_path) if c not in answered]
            extractor = cards_label(answered, model)
            ids = {r["request_id"] for r in rows}
            label = {"requests": str(req_path), "responses": str(resp_path), "backend": extractor,
                     "budget": budget, "window": window, "prompt_set": params.prompts}
            # a resumed store may hold answers to requests no longer built (changed params, or another
            # extractor revision, whose request ids differ): they stay in the store, left out here
            stale = len(set(stored_ids(resp_path)) - ids)
            if stale:
                print(f"claims {name}: {stale} stored answers belong to requests no longer built (other params or "
                      f"extractor revision); kept in {resp_path}, left out of the summary", file=sys.stderr)
                summary, ivs = _restrict(resp_path, req_path, ids, label, boot)
            else:
                summary, ivs = summarize_with_intervals([resp_path], [req_path], label, *boot)
            run_stats[name]["stale_answers_left_out"] = stale
            write_claimed_summary(summary, wdir / "claimed_cbu_summary.json")
            write_claim_intervals(ivs, intervals_path(wdir / "claimed_cbu_summary.json"))
            summaries[name] = summary
            intervals[name] = ivs
    main = summaries[f"b{main_budget}"]
    for src, dst in ((f"b{main_budget}", "claimed_cbu_summary.json"),
                     (f"lexical_b{main_budget}", "lexical_window_claimed_cbu_summary.json")):
        if src in summaries:
            shutil.copyfile(art / src / "claimed_cbu_summary.json", art / dst)
            shutil.copyfile(intervals_path(art / src / "claimed_cbu_summary.json"), intervals_path(art / dst))
    lexical = summaries.get(f"lexical_b{main_budget}")
    frontier = []
    for name, budget, window in window_names(params):
        if window == "whitespace":
            frontier += rows_from_claimed(budget, summaries[name], labels,
                                          [p.name for p in plans if p.name in summaries[name].surfaces])
    frontier = with_pareto_flags(frontier)
    write_frontier_csv(frontier, art / "budget_frontier.csv")
    (art / "budget_frontier.manifest.json").write_text(json.dumps(
        {"backend": extractor, "budgets": sorted({b for _, b, w in window_names(params) if w == "whitespace"}),
         "labels": labels, "csv": "budget_frontier.csv"}, indent=2) + "\n", encoding="utf-8")
    main_ci, lexical_ci = intervals[f"b{main_budget}"], intervals.get(f"lexical_b{main_budget}")
    table_rows = summary_rows(main, lexical, [p.name for p in plans], labels, extractor, main_budget,
                              intervals=main_ci, lexical_intervals=lexical_ci)
    inputs = [art / "claimed_cbu_summary.json", *([art / "lexical_window_claimed_cbu_summary.json"] if lexical is not None else [])]
    write_summary_rows(table_rows, dirs["artifacts"], extractor, main_budget, offline=any_stand_in(answered), kinds=card_kinds(answered),
                       inputs=[str(p) for q in inputs for p in (q, intervals_path(q))], bootstrap=main_ci.method(),
                       prompt_versions=versions.get(f"b{main_budget}", []))
    manifest = {"backend": extractor, "model": model, "revision": revision, "answered_by": answered,
                "url": url or "in-process capaudit serve",
                "windows": [n for n, _, _ in window_names(params)], "surfaces": [p.name for p in plans],
                "bootstrap": {"reps": boot[0], "seed": boot[1]}, "run_stats": run_stats, "elapsed_sec": round(time.monotonic() - t0, 2)}
    (art / "stage_manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    import pandas as pd

    return ClaimsResult(summaries, intervals, main, lexical, frontier, pd.DataFrame(table_rows),
                        pd.DataFrame([r.to_row() for r in frontier]), extractor, manifest, art)


def stored_ids(resp_path: Path) -> List[str]:
    """Request ids answered in a response store (latest row per id)."""
    from capaudit.llm.store import merge

    return list(merge(resp_path))


def _restrict(resp_path: Path, req_path: Path, ids: set, label: Any,
              boot: Tuple[int, int]) -> Tuple[ClaimedSummary, ClaimIntervals]:
    """Summary and intervals over the responses whose ids are among the current requests only."""
    from capaudit.llm.store import restricted_to

    with restricted_to(resp_path, ids) as current:
        return summarize_with_intervals([current], [req_path], label, *boot)


@dataclass(frozen=True, eq=False)
class DsgEvalResult(StageResult):
    """What :func:`run_dsg_eval` wrote: the evaluation, its table, the files, the category mapping."""

    result: Any
    table: Any
    paths: Dict[str, Any]
    mapping: Any


def run_dsg_eval(cfg: RunConfig) -> DsgEvalResult:
    """Notebook 04b: evaluate the heuristic extractor on DSG-1k → table rows
    ``artifacts/tables/extractor_eval_dsg.json`` (the paper renders them) and
    ``artifacts/claims/extractor_eval_dsg.json`` (mapping, per source)."""
    import pandas as pd

    from .dsg_eval import run_dsg_eval as _run

    dirs = cfg.dirs()
    result, paths = _run(dirs["artifacts"], dirs["artifacts"] / "claims")
    return DsgEvalResult(result, pd.DataFrame(result.rows()), paths, result.mapping)


__all__ = ["ClaimsParams", "ClaimsResult", "DsgEvalResult", "SurfacePlan", "model_revision", "plan_surfaces", "window_names", "build_window_requests",
           "answer_requests", "run", "run_dsg_eval"]
