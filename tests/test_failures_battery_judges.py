"""Every ``capaudit judges …`` and ``capaudit recap …`` command fails loudly and cleanly (issue 19).

Bad inputs through the real CLI (:mod:`_battery`): a missing file, an empty file, malformed or
truncated JSONL, Latin-1 bytes, a missing field, zero or negative numeric options, an output path
that is a folder or lies under a file. Each case must exit non-zero with exactly one stderr line
``capaudit …`` naming the file (and line or field) or the option, no traceback, and leave every
file as it was (nothing created, changed or removed — no store folder, lock or run log either).

Subcommands covered: ``judges build|summarize|cells|run|probe`` and ``recap run|export|policies``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from _battery import Case, assert_fails_cleanly, jsonl, run_cases, run_cli, with_options

CUT = '{"request_id": "cut", "ok": tr'  # a write cut short: no newline, not JSON


def _png(path: Path, color: tuple) -> None:
    from PIL import Image

    Image.new("RGB", (24, 16), color).save(path)


def _judge_files(i: Path) -> None:
    """Claims requests/responses, captions, two judges' requests and responses (all valid)."""
    from capaudit.claims.requests import BuildParams, build_requests
    from capaudit.judges.questions import Question, question_text
    from capaudit.judges.requests import JudgeBuildParams, build_request
    from capaudit.llm.requests import write_requests

    caps = [{"cid": "c1", "caption": "Two dogs on a red sofa.", "image": "img.png"},
            {"cid": "c2", "caption": "A cat on a mat.", "image": "img.png"}]
    _png(i / "img.png", (200, 30, 30))
    (i / "captions.jsonl").write_text(jsonl(caps))
    rows, _ = build_requests([(k, c["caption"], c["cid"], None) for k, c in enumerate(caps)],
                             BuildParams(surface="s", model="m", max_tokens=50))
    write_requests(i / "cq.jsonl", rows)
    units = [{"category": "object", "unit": "dog", "target": "dog", "span": "dogs"}]
    cr = [{"request_id": r["request_id"], "ok": True, "started_at": "2026-01-01T00:00:00.000Z",
           "parsed": {"caption_id": r["input"]["caption_id"], "claimed_units": units}} for r in rows]
    (i / "cr.jsonl").write_text(jsonl(cr))
    (i / "cr_cut.jsonl").write_text(jsonl(cr[:1]) + CUT)
    (i / "caps_latin1.jsonl").write_bytes(jsonl(caps[:1]).encode() + b'{"cid": "c2", "caption": "caf\xe9"}\n')
    (i / "caps_noid.jsonl").write_text(jsonl([caps[0], {"caption": "no id", "image": "img.png"}]))
    (i / "caps_noimage.jsonl").write_text(jsonl([caps[0], {k: v for k, v in caps[1].items() if k != "image"}]))
    (i / "caps_image_gone.jsonl").write_text(jsonl([caps[0], {**caps[1], "image": "gone.png"}]))
    for judge in ("J1", "J2"):
        reqs = []
        for cid, surface in (("c1", "s"), ("c2", "s"), ("c3", "t")):
            q = [Question(f"{cid}:u0000", "object", question_text("object", "dog", "dog"), "dog", "dog", "dogs", 0)]
            reqs.append(build_request(cid, surface, q, "file:///x.png", "sha256:00", JudgeBuildParams(model=judge)))
        write_requests(i / f"req_{judge}.jsonl", reqs)
        resp = [{"request_id": r["request_id"], "ok": True, "started_at": "2026-01-01T00:00:01.000Z",
                 "parsed": {"caption_id": r["input"]["caption_id"], "question_results": [
                     {"question_id": r["input"]["questions"][0]["question_id"], "answer": "yes", "confidence": 0.9}]}}
                for r in reqs]
        (i / f"resp_{judge}.jsonl").write_text(jsonl(resp))
    good = (i / "resp_J2.jsonl").read_text()
    (i / "resp_cut.jsonl").write_text(good + CUT)
    lines = good.splitlines(keepends=True)
    (i / "resp_bad_mid.jsonl").write_text(lines[0] + "{not json\n" + lines[1])
    (i / "resp_latin1.jsonl").write_bytes(lines[0].encode() + lines[1].encode().replace(b'"yes"', b'"y\xe9s"'))
    (i / "resp_no_parsed.jsonl").write_text(lines[0] + jsonl([{k: v for k, v in json.loads(lines[1]).items()
                                                                if k != "parsed"}]) + lines[2])
    (i / "resp_no_ok.jsonl").write_text(jsonl([{k: v for k, v in json.loads(lines[0]).items() if k != "ok"}]))
    (i / "resp_failed.jsonl").write_text(jsonl([{"request_id": json.loads(x)["request_id"], "ok": False,
                                                 "started_at": "2026-01-01T00:00:02.000Z", "error": "HTTP 500",
                                                 "error_kind": "http"} for x in lines]))
    req = json.loads((i / "req_J2.jsonl").read_text().splitlines()[0])
    del req["input"]["questions"]
    (i / "req_noq.jsonl").write_text(jsonl([req]))


def _recap_files(i: Path) -> None:
    """Images, manifests and recap stores, good and bad."""
    imgs = i / "images"
    imgs.mkdir()
    _png(imgs / "a.png", (1, 2, 3))
    _png(imgs / "b.png", (4, 5, 6))
    (i / "noimages").mkdir()
    (i / "noimages" / "readme.txt").write_text("no image here\n")
    first = json.dumps({"image_path": "images/a.png", "image_id": "a"}) + "\n"
    (i / "manifest_bad.jsonl").write_text(first + "{oops\n")
    (i / "manifest_cut.jsonl").write_text(first + '{"image_path": "images/b.pn')
    (i / "manifest_nopath.jsonl").write_text(jsonl([{"image_id": "a"}]))
    (i / "manifest_latin1.jsonl").write_bytes(first.encode() + b'{"image_path": "images/b.png", "id": "caf\xe9"}\n')
    row = {"request_id": "r1", "ok": True, "started_at": "2026-01-01T00:00:00.000Z", "model": "m",
           "caption": "A flat colour.", "recap": {"image_id": "a", "image_path": "images/a.png", "policy": "naive"}}
    row2 = {**row, "request_id": "r2", "recap": {**row["recap"], "image_id": "b"}}
    for name, text in (("store", jsonl([row, row2])), ("store_cut", jsonl([row]) + CUT),
                       ("store_bad", jsonl([row]) + "{nope\n" + jsonl([row2])), ("store_empty", "")):
        (i / name / "responses").mkdir(parents=True)
        (i / name / "responses" / "part-1.jsonl").write_text(text)
    (i / "store_latin1" / "responses").mkdir(parents=True)
    (i / "store_latin1" / "responses" / "part-1.jsonl").write_bytes(
        jsonl([row]).encode() + json.dumps(row2).encode().replace(b"flat", b"fl\xe2t") + b"\n")
    (i / "policies_bad").mkdir()
    (i / "policies_bad" / "p.yaml").write_text("name: [unclosed\n")


def make_inputs(root: Path) -> None:
    i = root / "in"
    i.mkdir()
    (i / "empty.jsonl").write_text("")
    (i / "malformed.jsonl").write_text('{"request_id": "a", "input": {"caption_id": "c"}}\n{oops}\n')
    (i / "params_bad_utf8.yaml").write_bytes(b"run: x\nnotebooks: []\n# caf\xe9\n")
    _judge_files(i)
    _recap_files(i)
    o = root / "out"
    o.mkdir()
    (o / "adir").mkdir()
    (o / "afile").write_text("x\n")


BUILD = ["judges", "build", "--claims-responses", "in/cr.jsonl", "--claims-requests", "in/cq.jsonl", "--input",
         "in/captions.jsonl", "--id-field", "cid", "--image-field", "image", "--model", "J", "--out", "out/req.jsonl"]
SUMMARIZE = ["judges", "summarize", "--responses", "in/resp_J2.jsonl", "--requests", "in/req_J2.jsonl",
             "--out", "out/sum.json"]
CELLS = ["judges", "cells", "--slice", "S", "--judge", "J1=in/resp_J1.jsonl", "--judge", "J2=in/resp_J2.jsonl",
         "--requests", "in/req_J1.jsonl", "--requests", "in/req_J2.jsonl", "--reps", "20", "--out", "out/cells.json"]
RUN = ["recap", "run", "--images", "in/images", "--policy", "naive", "--url", "http://127.0.0.1:9", "--model", "m",
       "--out", "out/store", "--no-progress", "--workers", "0"]
EXPORT = ["recap", "export", "--store", "in/store", "--out", "out/s.jsonl"]


def _with(base: List[str], **opts: Any) -> List[str]:
    """``base`` with options replaced (``opt_name=value``) or added (``--judge``/``--requests`` always added)."""
    return with_options(base, repeatable=("--judge", "--requests"), **opts)


def _judge(base: List[str], j2: str) -> List[str]:
    out = list(base)
    out[out.index("J2=in/resp_J2.jsonl")] = f"J2={j2}"
    return out


CASES = [
    # --- judges build
    Case("build-unknown-prompt-set", _with(BUILD, prompts="mine"), ["--prompts", "invalid choice", "reference"]),
    Case("build-reference-folder-without-prompts", BUILD, ["in/noref/prompts/cbu_vqa_v1.json", "missing"],
         env={"CAPAUDIT_REFERENCE_DIR": "in/noref"}),
    Case("recap-run-unknown-reference-policy", _with(RUN, policy="reference-watercolour"),
         ["reference-watercolour", "unknown reference policy"]),
    Case("build-missing-claims-responses", _with(BUILD, claims_responses="in/nope.jsonl"),
         ["in/nope.jsonl", "claims response file not found"]),
    Case("build-empty-claims-responses", _with(BUILD, claims_responses="in/empty.jsonl"),
         ["in/empty.jsonl", "no claims response row"]),
    Case("build-cut-claims-responses", _with(BUILD, claims_responses="in/cr_cut.jsonl"),
         ["in/cr_cut.jsonl:2", "last line is cut"]),
    Case("build-malformed-claims-requests", _with(BUILD, claims_requests="in/malformed.jsonl"),
         ["in/malformed.jsonl:2", "invalid JSON"]),
    Case("build-latin1-captions", _with(BUILD, input="in/caps_latin1.jsonl"), ["in/caps_latin1.jsonl:2", "not valid UTF-8", "0xe9"]),
    Case("build-caption-without-id", _with(BUILD, input="in/caps_noid.jsonl"), ["in/caps_noid.jsonl:2", "'cid'"]),
    Case("build-caption-without-image-field", _with(BUILD, input="in/caps_noimage.jsonl"),
         ["in/caps_noimage.jsonl:2", "'image'", "'c2'", "--image-failures record"]),
    Case("build-caption-image-file-missing", _with(BUILD, input="in/caps_image_gone.jsonl"),
         ["in/caps_image_gone.jsonl:2", "'image'", "image_missing"]),
    Case("build-image-failures-unknown", _with(BUILD, image_failures="skip"), ["--image-failures", "invalid choice"]),
    Case("build-max-tokens-negative", _with(BUILD, max_tokens=-5), ["--max-tokens", "positive"]),
    Case("build-max-tokens-zero", _with(BUILD, max_tokens=0), ["--max-tokens", "positive"]),
    Case("build-temperature-negative", _with(BUILD, temperature=-1), ["--temperature", ">= 0"]),
    Case("build-out-is-directory", _with(BUILD, out="out/adir"), ["out/adir", "directory"]),
    Case("build-out-under-a-file", _with(BUILD, out="out/afile/req.jsonl"), ["out/afile", "is a file"]),
    # --- judges summarize
    Case("summarize-missing-responses", _with(SUMMARIZE, responses="in/nope.jsonl"), ["in/nope.jsonl", "not found"]),
    Case("summarize-empty-responses", _with(SUMMARIZE, responses="in/empty.jsonl"),
         ["in/empty.jsonl", "no response row"]),
    Case("summarize-cut-responses", _with(SUMMARIZE, responses="in/resp_cut.jsonl"),
         ["in/resp_cut.jsonl:4", "last line is cut"]),
    Case("summarize-malformed-responses", _with(SUMMARIZE, responses="in/resp_bad_mid.jsonl"),
         ["in/resp_bad_mid.jsonl:2", "unreadable response row"]),
    Case("summarize-latin1-responses", _with(SUMMARIZE, responses="in/resp_latin1.jsonl"),
         ["in/resp_latin1.jsonl:2", "not valid UTF-8", "0xe9"]),
    Case("summarize-row-without-ok", _with(SUMMARIZE, responses="in/resp_no_ok.jsonl"),
         ["in/resp_no_ok.jsonl:1", "'ok'"]),
    Case("summarize-answered-row-without-parsed", _with(SUMMARIZE, responses="in/resp_no_parsed.jsonl"),
         ["in/resp_no_parsed.jsonl:2", "'parsed'", "ok: true"]),
    Case("summarize-all-failed", _with(SUMMARIZE, responses="in/resp_failed.jsonl"),
         ["in/resp_failed.jsonl:1", "none of the 3 responses is a valid answer", "HTTP 500"]),
    Case("summarize-missing-requests", _with(SUMMARIZE, requests="in/nope.jsonl"), ["in/nope.jsonl", "not found"]),
    Case("summarize-out-is-directory", _with(SUMMARIZE, out="out/adir"), ["out/adir", "directory"]),
    # --- judges cells
    Case("cells-empty-judge", _judge(CELLS, "in/empty.jsonl"), ["in/empty.jsonl", "no response row"]),
    Case("cells-cut-judge", _judge(CELLS, "in/resp_cut.jsonl"), ["in/resp_cut.jsonl:4", "last line is cut"]),
    Case("cells-answered-row-without-parsed", _judge(CELLS, "in/resp_no_parsed.jsonl"),
         ["in/resp_no_parsed.jsonl:2", "'parsed'", "ok: true"]),
    Case("cells-no-caption-answered-by-all", _judge(CELLS, "in/resp_failed.jsonl"),
         ["no caption is answered by every judge", "J2: 0 answered, 3 failed"]),
    Case("cells-request-without-questions", _with(CELLS, requests="in/req_noq.jsonl"),
         ["in/req_noq.jsonl:1", "questions"]),
    Case("cells-reps-zero", _with(CELLS, reps=0), ["--reps"]),
    Case("cells-reps-negative", _with(CELLS, reps=-1), ["--reps"]),
    Case("cells-reps-one", _with(CELLS, reps=1), ["--reps", ">= 2"]),
    Case("cells-seed-negative", _with(CELLS, seed=-3), ["--seed"]),
    Case("cells-judged-claims-under-a-file", _with(CELLS, claims_requests="in/cq.jsonl", claims_responses="in/cr.jsonl",
                                                   judged_claims="out/afile/jc.jsonl"), ["out/afile", "is a file"]),
    Case("cells-out-is-directory", _with(CELLS, out="out/adir"), ["out/adir", "directory"]),
    # --- judges run / probe
    Case("run-missing-params", ["judges", "run", "--params", "in/nope.yaml"], ["in/nope.yaml"]),
    Case("probe-params-not-utf8", ["judges", "probe", "--params", "in/params_bad_utf8.yaml"],
         ["in/params_bad_utf8.yaml:3", "UTF-8"]),
    # --- recap run (nothing may contact the URL or create out/store)
    Case("recap-run-missing-images", _with(RUN, images="in/nope"), ["in/nope", "no such file"]),
    Case("recap-run-malformed-manifest", _with(RUN, images="in/manifest_bad.jsonl"),
         ["in/manifest_bad.jsonl:2", "invalid JSON"]),
    Case("recap-run-cut-manifest", _with(RUN, images="in/manifest_cut.jsonl"), ["in/manifest_cut.jsonl:2"]),
    Case("recap-run-latin1-manifest", _with(RUN, images="in/manifest_latin1.jsonl"), ["in/manifest_latin1.jsonl:2", "not valid UTF-8", "0xe9"]),
    Case("recap-run-manifest-without-path", _with(RUN, images="in/manifest_nopath.jsonl"),
         ["in/manifest_nopath.jsonl:1", "image_path"]),
    Case("recap-run-empty-manifest", _with(RUN, images="in/empty.jsonl"), ["in/empty.jsonl", "no image"]),
    Case("recap-run-folder-without-images", _with(RUN, images="in/noimages"), ["in/noimages", "no image file"]),
    Case("recap-run-workers-negative", _with(RUN, workers=-1), ["--workers"]),
    Case("recap-run-limit-zero", _with(RUN, limit=0), ["--limit"]),
    Case("recap-run-concurrency-zero", _with(RUN, concurrency=0), ["--concurrency"]),
    Case("recap-run-backoff-negative", _with(RUN, backoff=-1), ["--backoff", ">= 0"]),
    Case("recap-run-out-is-a-file", _with(RUN, out="out/afile"), ["out/afile", "file"]),
    Case("recap-run-out-under-a-file", _with(RUN, out="out/afile/store"), ["out/afile", "is a file"]),
    Case("recap-run-stats-json-is-directory", _with(RUN, stats_json="out/adir"), ["out/adir", "directory"]),
    # --- recap export
    Case("export-missing-store", _with(EXPORT, store="in/nope"), ["in/nope", "not a recap store"]),
    Case("export-empty-store", _with(EXPORT, store="in/store_empty"), ["in/store_empty", "no captioned image"]),
    Case("export-cut-part", _with(EXPORT, store="in/store_cut"),
         ["in/store_cut/responses/part-1.jsonl:2", "last line is cut"]),
    Case("export-malformed-part", _with(EXPORT, store="in/store_bad"),
         ["in/store_bad/responses/part-1.jsonl:2", "unreadable response row"]),
    Case("export-latin1-part", _with(EXPORT, store="in/store_latin1"), ["in/store_latin1/responses/part-1.jsonl:2"]),
    Case("export-out-is-directory", _with(EXPORT, out="out/adir"), ["out/adir", "directory"]),
    Case("export-out-under-a-file", _with(EXPORT, out="out/afile/s.jsonl"), ["out/afile", "is a file"]),
    # --- recap policies
    Case("policies-missing-dir", ["recap", "policies", "--policies-dir", "in/nope"], ["in/nope"]),
    Case("policies-bad-yaml", ["recap", "policies", "--policies-dir", "in/policies_bad"], ["in/policies_bad/p.yaml"]),
]


@pytest.fixture(scope="module")
def battery(tmp_path_factory) -> Dict[str, Any]:
    return run_cases(CASES, tmp_path_factory.mktemp("battery_judges"), make_inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fails_loudly_and_cleanly(case: Case, battery) -> None:
    assert_fails_cleanly(case, battery[case.id])


def test_every_subcommand_is_in_the_battery(tmp_path: Path) -> None:
    """A new subcommand of ``judges`` or ``recap`` (as ``--help`` lists them) must get its cases here."""
    import re

    from test_failures_battery_releases import CASES as RELEASE_CASES

    covered = {tuple(c.args[:2]) for c in [*CASES, *RELEASE_CASES]}
    for group in ("judges", "recap"):
        p = run_cli([group, "--help"], tmp_path)
        names = re.findall(r"^    ([a-z][a-z-]*)\s", p.stdout, flags=re.M)
        assert len(names) >= 3, p.stdout
        for name in names:
            assert (group, name) in covered, f"capaudit {group} {name} has no battery case"
