"""The claims of the judges stage's judged slices: a step of the claims stage, run before the judges
stage, which reads what it writes (and refuses, naming the file, when it is not there).

Per judged slice (``judges.slices``) under ``artifacts/judges/<slice>/``: ``captions.jsonl`` (the
slice's captions, one row per caption with its image), ``claims/{requests,responses}.jsonl`` (the
extraction through the production path: :func:`capaudit.llm.client.run_requests` against an
in-process ``capaudit serve`` or ``judges.extractor_url``; resumable), ``claims/extraction_run.json``
(the run's stats) and ``claimed_cbu_summary.json``. The extraction settings are the ``judges:``
section's (:class:`~capaudit.claims.params.JudgedClaimsParams`).
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic, write_text_atomic
from capaudit.io.canonical_json import dumps_line
from capaudit.summaries.claimed import ClaimedSummary

from .params import JudgedClaimsParams

RUN_FILE = "extraction_run.json"


@dataclass(frozen=True)
class SliceClaims:
    """The claims stage's files of one judged slice and its claimed summary (current requests only)."""

    name: str
    captions: Path
    requests: Path
    responses: Path
    claimed: ClaimedSummary
    run_stats: Dict[str, Any]


def slice_dir(artifacts: Path, name: str) -> Path:
    """``artifacts/judges/<slice>`` (the judged slice's folder, shared with the judges stage)."""
    from capaudit.judges.stage_params import slug

    return Path(artifacts) / "judges" / slug(name)


def unasked(req: Path, resp: Path) -> int:
    """Requests of ``req`` with no row at all in ``resp`` (never asked; a failed row was asked)."""
    from capaudit.llm.requests import iter_request_lines, parse_request_line
    from capaudit.llm.store import scan_ids

    answered, failed = scan_ids(resp) if resp.exists() else (set(), set())
    seen = answered | failed
    return sum(1 for n, line in iter_request_lines(req)
               if parse_request_line(line, f"{req}:{n}")["request_id"] not in seen)


def write_captions(path: Path, specs: Sequence[Any], rows: Mapping[str, List[Dict[str, Any]]]) -> Path:
    """The slice's caption rows, surface by surface, as one JSONL file (written whole or not at all)."""
    tmp = path.with_suffix(".jsonl.tmp")
    with open(tmp, "wb") as fh:
        for s in specs:
            for r in rows[s.name]:
                fh.write(dumps_line(r))
    tmp.replace(path)
    return path


def extract_slice(p: JudgedClaimsParams, name: str, specs: Sequence[Any], rows: Mapping[str, List[Dict[str, Any]]],
                  sdir: Path, url: str, only_unasked: bool = False) -> Dict[str, Any]:
    """Build and answer one judged slice's claim requests; writes the files of the module docstring.
    ``only_unasked``: ask the extractor only when some request has no row yet (a judge-at-a-time
    run, whose extractor server need not be up). Returns the run's stats."""
    from capaudit.llm.requests import write_requests
    from capaudit.summaries.claimed import format_claimed_summary

    from .requests import BuildParams, build_requests, write_manifest
    from .stage import answer_requests, model_revision

    (sdir / "claims").mkdir(parents=True, exist_ok=True)
    captions_path = write_captions(sdir / "captions.jsonl", specs, rows)
    creq, cresp = sdir / "claims" / "requests.jsonl", sdir / "claims" / "responses.jsonl"
    revision = model_revision(p.extractor, p.extractor_revision, url)
    claim_rows: List[Dict[str, Any]] = []
    for s in specs:
        build = BuildParams(surface=s.name, budget=p.budget, model=p.extractor, revision=revision,
                            max_tokens=p.extractor_max_tokens, prompts=p.prompts)
        items = [(i, r["caption"], r["caption_id"], {"image_id": r.get("image_id")}) for i, r in enumerate(rows[s.name])]
        built, _ = build_requests(items, build)
        claim_rows += built
    write_requests(creq, claim_rows)
    write_manifest(creq, BuildParams(surface="+".join(s.name for s in specs), budget=p.budget, model=p.extractor,
                                     revision=revision, prompts=p.prompts), {"emitted": len(claim_rows)},
                   {"input": str(captions_path), "caption_field": "caption", "id_field": "caption_id"})
    if not only_unasked or unasked(creq, cresp):
        stats: Dict[str, Any] = answer_requests(creq, cresp, p.extractor, [url], p)
    else:  # extracted by an earlier run (its server need not be up for this judge's run)
        stats = {"not_asked": "every request has a row"}
    write_json_atomic(sdir / "claims" / RUN_FILE, {"run_stats": stats})
    claimed = claimed_summary(p, name, creq, cresp)
    write_text_atomic(sdir / "claimed_cbu_summary.json", format_claimed_summary(claimed))
    return stats


def claimed_summary(p: JudgedClaimsParams, name: str, creq: Path, cresp: Path) -> ClaimedSummary:
    """Claimed summary of a judged slice over its current requests only (a resumed store may hold
    answers to requests no longer built)."""
    from capaudit.claims.summarize import summarize_responses
    from capaudit.llm.requests import iter_request_lines, parse_request_line
    from capaudit.llm.store import restricted_to

    ids = {parse_request_line(line, f"{creq}:{n}")["request_id"] for n, line in iter_request_lines(creq)}
    label = {"requests": str(creq), "responses": str(cresp), "extractor": p.extractor, "budget": p.budget,
             "slice": name, "prompt_set": p.prompts}
    with restricted_to(cresp, ids) as current:
        return summarize_responses([current], [creq], input_label=label)


def read_slice_claims(p: JudgedClaimsParams, name: str, sdir: Path) -> SliceClaims:
    """What :func:`extract_slice` wrote for a judged slice; a missing file is one line naming it."""
    captions, creq, cresp = sdir / "captions.jsonl", sdir / "claims" / "requests.jsonl", sdir / "claims" / "responses.jsonl"
    for f in (captions, creq, cresp, sdir / "claims" / RUN_FILE):
        if not f.is_file():
            raise InputError(f"the claims of judged slice '{name}' are missing: run the claims step of the judged "
                             f"slices first (capaudit claims judged --params ..., or notebook 05_judges)", path=f)
    stats = json.loads((sdir / "claims" / RUN_FILE).read_text(encoding="utf-8")).get("run_stats", {})
    return SliceClaims(name, captions, creq, cresp, claimed_summary(p, name, creq, cresp), stats)


def run_judged(cfg: RunConfig, only_unasked: bool = False) -> Dict[str, Dict[str, Any]]:
    """Extract the claims of every judged slice of the run (``judges.slices``); run stats by slice.
    The extractor is ``judges.extractor`` at ``judges.extractor_url``, else served in this process."""
    from capaudit.judges.slices import surface_rows
    from capaudit.judges.stage_params import SECTION, slice_specs

    section = cfg.section(SECTION)
    p = JudgedClaimsParams.from_section(section, cfg.path)
    art = cfg.dirs()["artifacts"]
    slices = slice_specs(section, str(cfg.path), {"run_dir": str(cfg.out_dir), "artifacts": str(art)})
    if p.extractor_url:
        server: Any = nullcontext(p.extractor_url)
    else:
        from capaudit.llm.server import background_server

        server = background_server([p.extractor], workers=p.server_workers)
    out: Dict[str, Dict[str, Any]] = {}
    with server as base_url:
        for name, specs in slices:
            rows = {s.name: surface_rows(s) for s in specs}
            out[name] = extract_slice(p, name, specs, rows, slice_dir(art, name), str(base_url), only_unasked)
    return out


__all__ = ["RUN_FILE", "SliceClaims", "claimed_summary", "extract_slice", "read_slice_claims", "run_judged",
           "slice_dir", "unasked", "write_captions"]
