"""Judges stage core (reference-spec §5.1–5.4): questions, requests, validation, summaries, cells.

Every expected number below is computed by hand from the tiny inputs written in the test.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pytest

from capaudit.claims.requests import BuildParams, build_requests
from capaudit.errors import InputError
from capaudit.judges import cli as jcli
from capaudit.judges.answers import RequestIndex, load_answers
from capaudit.judges.cells import bootstrap_stds, build_cells, extraction_accounting, load_slice
from capaudit.judges.judged_claims import FIELDS, judged_claim_rows
from capaudit.judges.questions import parse_question_text, question_text, questions_from_units, span_offsets
from capaudit.judges.answer_schema import vqa_schema
from capaudit.judges.requests import JudgeBuildParams, build_judge_requests, failures_path, manifest_path
from capaudit.judges.rules import answer_errors, judge_answer_rule
from capaudit.judges.summarize import summarize_files
from capaudit.llm.requests import write_requests
from capaudit.stats.bootstrap import caption_bootstrap
from capaudit.summaries.cells import read_cells


# --- §5.1 questions ----------------------------------------------------------------------------
def test_question_templates_verbatim_and_raw_indices() -> None:
    units = [
        {"category": "object", "unit": " dog ", "target": "", "span": "dog"},
        {"category": "bogus", "unit": "x"},  # no question, keeps index 1
        {"category": "attribute", "unit": "brown dog", "target": "dog", "span": "brown dogs"},
        {"category": "text_rendering", "unit": "text \"stop\"", "target": "sign"},
        {"category": "object", "unit": "   "},  # empty unit: no question
    ]
    qs = questions_from_units("c1", units)
    assert [(q.question_id, q.category, q.question) for q in qs] == [
        ("c1:u0000", "object", "Is the visual claim 'dog' supported by the image?"),
        ("c1:u0002", "attribute", "Is the visual claim 'dog: brown dog' supported by the image?"),
        ("c1:u0003", "text_rendering", "Is the rendered text claim 'text \"stop\"' visibly supported by the image?"),
    ]
    assert questions_from_units("c1", None) == [] and questions_from_units("c1", []) == []
    for cat, unit, target in (("object", "dog", ""), ("relation", "cat on table", "cat"), ("text_rendering", "x: y", "")):
        assert parse_question_text(cat, question_text(cat, unit, target)) == (unit, target)
    assert span_offsets("Two Brown dogs run", "brown dogs", "brown dog") == [4, 14]
    assert span_offsets("Two dogs", "", "dog") == [4, 7] and span_offsets("Two dogs", "cat", "cat") is None


# --- §5.2 schema, ids, images --------------------------------------------------------------------
def test_schema_min_max_items_and_id_enum() -> None:
    s = vqa_schema(["a:u0000", "a:u0003"])
    qr = s["properties"]["question_results"]
    assert qr["minItems"] == qr["maxItems"] == 2
    assert qr["items"]["properties"]["question_id"]["enum"] == ["a:u0000", "a:u0003"]
    assert qr["items"]["required"] == ["question_id", "answer", "confidence"]
    assert qr["items"]["properties"]["answer"]["enum"] == ["yes", "no", "uncertain"]
    assert vqa_schema(["a:u0000"], evidence=True)["properties"]["question_results"]["items"]["properties"]["evidence"][
        "maxLength"] == 160


def _png(path: Path, color=(200, 30, 30), size=(24, 16)) -> Path:
    from PIL import Image

    Image.new("RGB", size, color).save(path)
    return path


def _claims(tmp: Path, captions: Sequence[Dict[str, Any]], units: Dict[str, Any], failed: Sequence[str] = (),
            surface: str = "s") -> Dict[str, Path]:
    """Caption JSONL, claims requests (our builder) and hand-written claims responses."""
    cap = tmp / "captions.jsonl"
    cap.write_text("".join(json.dumps(c) + "\n" for c in captions))
    items = [(i, c["caption"], c["cid"], None) for i, c in enumerate(captions)]
    rows, _ = build_requests(items, BuildParams(surface=surface, model="m", max_tokens=50))
    write_requests(tmp / "cq.jsonl", rows)
    with open(tmp / "cr.jsonl", "w") as fh:
        for r in rows:
            cid = r["input"]["caption_id"]
            if cid in failed:
                fh.write(json.dumps({"request_id": r["request_id"], "ok": False, "started_at": "2026-01-01T00:00:00.000Z",
                                     "error_kind": "parse", "usage": {"completion_tokens": 50}}) + "\n")
            elif cid in units:
                fh.write(json.dumps({"request_id": r["request_id"], "ok": True, "started_at": "2026-01-01T00:00:00.000Z",
                                     "parsed": {"caption_id": cid, "claimed_units": units[cid]}}) + "\n")
    return {"captions": cap, "cq": tmp / "cq.jsonl", "cr": tmp / "cr.jsonl"}


U_OBJ = {"category": "object", "unit": "dog", "span": "dog", "target": "dog"}
U_CNT = {"category": "count", "unit": "two dogs", "span": "Two dogs", "target": "dog"}
U_REL = {"category": "relation", "unit": "dog on sofa", "span": "dogs on a sofa", "target": "dog"}
U_ATT = {"category": "attribute", "unit": "red sofa", "span": "red sofa", "target": "sofa"}


def test_build_requests_modes_failures_and_order(tmp_path: Path) -> None:
    img = _png(tmp_path / "a.png")
    caps = [
        {"cid": "c1", "caption": "Two dogs on a red sofa", "image": "a.png"},  # relative to the caption file
        {"cid": "c2", "caption": "A dog", "image": str(tmp_path / "missing.png")},
        {"cid": "c3", "caption": "A cat", "image": None},
        {"cid": "c4", "caption": "Nothing", "image": "a.png"},
        {"cid": "c5", "caption": "Failed", "image": "a.png"},
        {"cid": "c6", "caption": "Unanswered", "image": "a.png"},
        {"cid": "c7", "caption": "A red sofa", "image": str(img)},
    ]
    f = _claims(tmp_path, caps, {"c1": [U_CNT, U_REL, U_ATT], "c2": [U_OBJ], "c3": [U_OBJ], "c4": [], "c7": [U_ATT]},
                failed=["c5"])
    out = tmp_path / "vq.jsonl"
    counts = build_judge_requests([f["cr"]], [f["cq"]], f["captions"], "cid", "image", JudgeBuildParams(model="J1", prompts="capaudit"), out)
    assert (counts.claims_requests, counts.claims_not_answered, counts.claims_failed, counts.claims_zero_units) == (7, 1, 1, 1)
    assert (counts.no_image, counts.image_missing, counts.image_unreadable, counts.requests, counts.questions) == (1, 1, 0, 2, 4)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["input"]["caption_id"] for r in rows] == ["c1", "c7"]  # claims request order
    r0 = rows[0]
    assert [q["question_id"] for q in r0["input"]["questions"]] == ["c1:u0000", "c1:u0001", "c1:u0002"]
    assert r0["messages"][1]["content"][1]["image_url"]["url"] == img.resolve().as_uri()
    import hashlib

    assert r0["input"]["image_key"] == "sha256:" + hashlib.sha256(img.read_bytes()).hexdigest()
    assert r0["meta"]["units"][2] == ["red sofa", "sofa", "red sofa"] and r0["meta"]["image_path"] == str(img.resolve())
    assert r0["decoding"] == {"temperature": 0.0, "max_tokens": 2048, "chat_template_kwargs": {"enable_thinking": False}}
    text = r0["messages"][1]["content"][0]["text"]
    assert "caption_id=c1" in text and text.splitlines()[-1].startswith('questions=[{"question_id":"c1:u0000"')
    fails = [json.loads(x) for x in failures_path(out).read_text().splitlines()]
    assert [(x["caption_id"], x["reason"], x["row"]) for x in fails] == [("c2", "image_missing", 2), ("c3", "no_image", 3)]
    assert all(x["file"] == str(f["captions"]) for x in fails)
    man = json.loads(manifest_path(out).read_text())
    assert man["counts"]["failures"] == 2 and man["model"] == "J1"
    # a second judge: identical question ids, different request ids; data and url modes
    out2 = tmp_path / "vq2.jsonl"
    build_judge_requests([f["cr"]], [f["cq"]], f["captions"], "cid", "image", JudgeBuildParams(model="J2", image_mode="data"), out2)
    rows2 = [json.loads(x) for x in out2.read_text().splitlines()]
    assert [q["question_id"] for q in rows2[0]["input"]["questions"]] == [q["question_id"] for q in r0["input"]["questions"]]
    assert rows2[0]["request_id"] != r0["request_id"]
    url = rows2[0]["messages"][1]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    from PIL import Image

    with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
        assert (im.format, im.mode, im.size) == ("JPEG", "RGB", (24, 16))  # re-encoded, not resized
    # the revision is hashed into the id
    out3 = tmp_path / "vq3.jsonl"
    build_judge_requests([f["cr"]], [f["cq"]], f["captions"], "cid", "image", JudgeBuildParams(model="J1", revision="r2"), out3)
    assert json.loads(out3.read_text().splitlines()[0])["request_id"] != r0["request_id"]


def test_build_url_mode_and_bad_input(tmp_path: Path) -> None:
    caps = [{"cid": "c1", "caption": "A dog", "image": "https://example.org/a.jpg"}]
    f = _claims(tmp_path, caps, {"c1": [U_OBJ]})
    out = tmp_path / "vq.jsonl"
    build_judge_requests([f["cr"]], [f["cq"]], f["captions"], "cid", "image", JudgeBuildParams(model="J", image_mode="url"), out)
    r = json.loads(out.read_text())
    assert r["messages"][1]["content"][1]["image_url"]["url"] == "https://example.org/a.jpg"
    assert r["input"]["image_key"] == "url:https://example.org/a.jpg"
    (tmp_path / "dup.jsonl").write_text('{"cid": "c1", "caption": "a"}\n{"cid": "c1", "caption": "b"}\n')
    with pytest.raises(InputError, match=r"dup\.jsonl:2 field 'cid': caption id 'c1' also on line 1"):
        build_judge_requests([f["cr"]], [f["cq"]], tmp_path / "dup.jsonl", "cid", "image", JudgeBuildParams(model="J"), out)
    with pytest.raises(InputError, match="image mode must be one of file, data, url"):
        JudgeBuildParams(model="J", image_mode="jpeg")


# --- validation rule -----------------------------------------------------------------------------
def _ans(cid: str, items: Sequence[tuple]) -> Dict[str, Any]:
    return {"caption_id": cid, "question_results": [{"question_id": q, "answer": a, "confidence": 0.9} for q, a in items]}


def test_answer_rule() -> None:
    want = ["c:u0000", "c:u0001"]
    assert answer_errors(_ans("c", [("c:u0001", "no"), ("c:u0000", "yes")]), want, "c") == []
    errs = answer_errors(_ans("c", [("c:u0000", "yes"), ("c:u0000", "no")]), want, "c")
    assert any("duplicate 'c:u0000'" in e for e in errs) and any("missing ['c:u0001']" in e for e in errs)
    assert any("unexpected ['c:u0009']" in e for e in answer_errors(_ans("c", [("c:u0000", "yes"), ("c:u0009", "no")]), want, "c"))
    assert any("'maybe' not in" in e for e in answer_errors(_ans("c", [("c:u0000", "maybe"), ("c:u0001", "no")]), want, "c"))
    assert any("caption_id: answer has 'x'" in e for e in answer_errors(_ans("x", [("c:u0000", "yes"), ("c:u0001", "no")]), want, "c"))
    bad_conf = {"caption_id": "c", "question_results": [{"question_id": "c:u0000", "answer": "yes", "confidence": "high"},
                                                        {"question_id": "c:u0001", "answer": "no", "confidence": True}]}
    assert sum("not a number" in e for e in answer_errors(bad_conf, want, "c")) == 2
    req = {"input": {"caption_id": "c", "questions": [{"question_id": q} for q in want]}, "schema": vqa_schema(want, True)}
    assert any("evidence: missing" in e for e in judge_answer_rule(_ans("c", [("c:u0000", "yes"), ("c:u0001", "no")]), req))


# --- §5.3 / §5.4 on hand-written answers ----------------------------------------------------------
def _judge_requests(tmp: Path, judge: str, spec: Dict[str, List[str]], surface: Dict[str, str]) -> Path:
    """Requests of one judge: ``spec[cid]`` = categories of its questions (ids u0000, u0001, ...)."""
    from capaudit.judges.questions import Question
    from capaudit.judges.requests import build_request

    rows = []
    for cid, cats in spec.items():
        qs = [Question(f"{cid}:u{i:04d}", c, question_text(c, f"unit{i}", "t"), f"unit{i}", "t", f"span{i}", i)
              for i, c in enumerate(cats)]
        rows.append(build_request(cid, surface[cid], qs, "file:///x.png", "sha256:00", JudgeBuildParams(model=judge),
                                  meta={"claims_request_id": f"cq-{cid}", "image_path": "/x.png"}))
    p = tmp / f"{judge}.req.jsonl"
    write_requests(p, rows)
    return p


def _responses(path: Path, req: Path, answers: Dict[str, Any], started: str = "2026-01-01T00:00:01.000Z") -> Path:
    """Response rows: ``answers[cid]`` = list of answers (ok row), or an error string (failed row)."""
    rows = [json.loads(x) for x in req.read_text().splitlines()]
    with open(path, "a") as fh:
        for r in rows:
            cid = r["input"]["caption_id"]
            if cid not in answers:
                continue
            a = answers[cid]
            if isinstance(a, str):
                fh.write(json.dumps({"request_id": r["request_id"], "ok": False, "started_at": started, "error": a,
                                     "error_kind": "http"}) + "\n")
            else:
                qids = [q["question_id"] for q in r["input"]["questions"]]
                fh.write(json.dumps({"request_id": r["request_id"], "ok": True, "started_at": started,
                                     "parsed": _ans(cid, list(zip(qids, a)))}) + "\n")
    return path


@pytest.fixture()
def slice_files(tmp_path: Path) -> Dict[str, Path]:
    surface = {"a1": "ours", "a2": "ours", "a3": "ours", "b1": "ref", "b2": "ref"}
    spec = {"a1": ["object", "count", "relation"], "a2": ["object", "attribute"], "a3": ["object"],
            "b1": ["object", "object"], "b2": ["relation", "style"]}
    r1, r2 = _judge_requests(tmp_path, "J1", spec, surface), _judge_requests(tmp_path, "J2", spec, surface)
    p1, p2 = tmp_path / "J1.resp.jsonl", tmp_path / "J2.resp.jsonl"
    # J1: a2 fails first, then is answered (answered wins); a3 answered, then a later failure (never replaces it)
    _responses(p1, r1, {"a2": "HTTP 500"}, started="2026-01-01T00:00:00.000Z")
    _responses(p1, r1, {"a1": ["yes", "no", "uncertain"], "a2": ["yes", "yes"], "a3": ["no"],
                        "b1": ["yes", "yes"], "b2": ["no", "uncertain"]})
    _responses(p1, r1, {"a3": "timeout"}, started="2026-01-01T00:00:09.000Z")
    # J2: no answer for b2 (failed) -> b2 leaves the intersection
    _responses(p2, r2, {"a1": ["yes", "yes", "uncertain"], "a2": ["no", "yes"], "a3": ["no"], "b1": ["yes", "uncertain"],
                        "b2": "HTTP 503"})
    return {"r1": r1, "r2": r2, "p1": p1, "p2": p2}


def test_per_judge_summary_hand_computed(slice_files, tmp_path: Path) -> None:
    s = summarize_files([slice_files["p1"]], [slice_files["r1"]], tmp_path / "sum.json", judge="J1")
    # J1: 5 merged requests, all answered; ours: a1 (y,n,u) a2 (y,y) a3 (n) -> 6 questions, 3 yes, 2 no, 1 uncertain
    assert (s.responses, s.ok, s.bad) == (5, 5, 0)
    o, r = s.surface("ours"), s.surface("ref")
    assert (o.responses, o.ok, o.counts.questions, o.counts.yes, o.counts.no, o.counts.uncertain) == (3, 3, 6, 3, 2, 1)
    assert (r.responses, r.counts.questions, r.counts.yes, r.counts.no, r.counts.uncertain) == (2, 4, 2, 1, 1)
    assert o.counts.support_rate == 0.5 and o.counts.risk_rate == pytest.approx(2 / 6)
    assert s.categories["object"].yes == 4 and s.categories["object"].no == 1 and s.categories["style"].uncertain == 1
    assert {e["caption_id"] for e in s.examples["no"]} == {"a1", "a3", "b2"}
    data = json.loads((tmp_path / "sum.json").read_text())
    assert data["surfaces"]["ours"]["risk_rate"] == pytest.approx(1 / 3) and data["input"]["judge"] == "J1"
    s2 = summarize_files([slice_files["p2"]], [slice_files["r2"]])
    assert (s2.responses, s2.ok, s2.bad) == (5, 4, 1)
    assert s2.examples["bad_response"][0]["caption_id"] == "b2" and "HTTP 503" in s2.examples["bad_response"][0]["error"]


def test_cells_intersection_answered_wins_and_exclusion(slice_files) -> None:
    cells, report = build_cells("S", [("J1", [slice_files["p1"]]), ("J2", [slice_files["p2"]])],
                                [slice_files["r1"], slice_files["r2"]], reps=50)
    assert report["__intersection__"]["captions"] == 4  # b2 failed for J2
    c = cells.get("S", "J1", "ours").all_types
    # a1 (y,n,u) + a2 (y,y) + a3 (n): responses 3, questions 6, yes 3, no 2, uncertain 1
    assert (c.responses, c.questions, c.yes, c.no, c.uncertain) == (3, 6, 3, 2, 1)
    assert c.supported_cap == 1.0 and c.risk == pytest.approx(1 / 3) and c.uncertain_rate == pytest.approx(1 / 6)
    e = cells.get("S", "J1", "ours").excluding_count_relation
    # drop a1's count (no) and relation (uncertain): questions 4, yes 3, no 1; responses unchanged
    assert (e.responses, e.questions, e.yes, e.no, e.uncertain) == (3, 4, 3, 1, 0)
    ref1 = cells.get("S", "J1", "ref").all_types
    assert (ref1.responses, ref1.questions, ref1.yes) == (1, 2, 2)  # b1 only
    bt = cells.get("S", "J2", "ours").by_type
    assert {t: (k.yes, k.no, k.uncertain) for t, k in bt.items()} == {
        "attribute": (1, 0, 0), "count": (1, 0, 0), "object": (1, 2, 0), "relation": (0, 0, 1)}
    assert list(bt) == sorted(bt)
    ag = cells.judge_agreement["S"]
    assert ag.judges == ("J1", "J2")
    # joined over a1,a2,a3,b1: object a1 y/y, a2 y/n, a3 n/n, b1 y/y, b1 y/u -> 5 joined, 3 exact
    assert (ag.by_type["object"].joined, ag.by_type["object"].exact) == (5, 3)
    assert (ag.by_type["count"].joined, ag.by_type["count"].exact) == (1, 0)
    assert (ag.by_type["__all__"].joined, ag.by_type["__all__"].exact) == (8, 5)
    assert list(ag.by_type) == ["__all__", "attribute", "count", "object", "relation"]


def test_bootstrap_matches_caption_bootstrap_and_an_independent_loop() -> None:
    rng = np.random.default_rng(7)
    q = rng.integers(1, 12, size=37)
    y = np.array([rng.integers(0, k + 1) for k in q])
    n = np.array([rng.integers(0, k - a + 1) for k, a in zip(q, y)])
    ye, ne = y // 2, n // 2
    qe = ye + ne + (q - y - n) // 2
    cols = np.stack([y, n, q, ye, ne, qe], axis=1)
    got = bootstrap_stds(cols, [(0, 1, 2), (3, 4, 5)], reps=2000, seed=0)
    for view, (sup_std, risk_std) in zip(((y, n, q), (ye, ne, qe)), got):
        ref = caption_bootstrap(np.stack(view, axis=1)[:, [0, 1, 2]], reps=2000, seed=0)
        assert (sup_std, risk_std) == (ref.supported_cap_std, ref.risk_std)  # bit for bit
        # independent computation: a fresh generator per view, plain Python sums
        g = np.random.default_rng(0)
        sups, risks = [], []
        for _ in range(2000):
            idx = g.integers(0, len(q), size=len(q))
            sups.append(sum(int(view[0][i]) for i in idx) / len(q))
            qs = sum(int(view[2][i]) for i in idx)
            risks.append(sum(int(view[1][i]) for i in idx) / qs if qs else 0.0)
        assert sup_std == pytest.approx(float(np.std(sups, ddof=1)), rel=1e-12)
        assert risk_std == pytest.approx(float(np.std(risks, ddof=1)), rel=1e-12)
    assert bootstrap_stds(np.zeros((0, 3), dtype=int), [(0, 1, 2)]) == [(0.0, 0.0)]
    one = bootstrap_stds(np.array([[2, 1, 4]]), [(0, 1, 2)], reps=10)
    assert one == [(0.0, 0.0)]


def test_cells_bootstrap_uses_fresh_seed_per_cell(slice_files) -> None:
    cells, _ = build_cells("S", [("J1", [slice_files["p1"]]), ("J2", [slice_files["p2"]])],
                           [slice_files["r1"], slice_files["r2"]], reps=2000, seed=0)
    # ours rows in request order a1, a2, a3: J1 triples (1,1,3), (2,0,2), (0,1,1)
    ref = caption_bootstrap([(1, 1, 3), (2, 0, 2), (0, 1, 1)], reps=2000, seed=0)
    c = cells.get("S", "J1", "ours").all_types
    assert (c.supported_cap_std, c.risk_std) == (ref.supported_cap_std, ref.risk_std)
    ex = caption_bootstrap([(1, 0, 1), (2, 0, 2), (0, 1, 1)], reps=2000, seed=0)
    e = cells.get("S", "J1", "ours").excluding_count_relation
    assert (e.supported_cap_std, e.risk_std) == (ex.supported_cap_std, ex.risk_std)


def test_ids_not_matching_questions_are_counted_bad(slice_files, tmp_path: Path) -> None:
    rows = [json.loads(x) for x in slice_files["r1"].read_text().splitlines()]
    bad = tmp_path / "bad.jsonl"
    r = rows[0]  # a1: three questions; answer only two, one with a foreign id, marked ok by another tool
    bad.write_text(json.dumps({"request_id": r["request_id"], "ok": True, "started_at": "2026-01-01T00:00:00.000Z",
                               "parsed": _ans("a1", [("a1:u0000", "yes"), ("zz:u0001", "no")])}) + "\n")
    index = RequestIndex.from_files([slice_files["r1"]])
    ans = load_answers(index, [bad])
    assert ans.answered == {} and len(ans.failures) == 1
    f = ans.failures[0]
    assert (f.caption_id, f.file, f.line, f.kind) == ("a1", str(bad), 1, "ids")
    assert "unexpected ['zz:u0001']" in f.error
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"request_id": "nope", "ok": True}) + "\n")
    with pytest.raises(InputError, match="none of the 1 responses belongs to the given judge requests"):
        load_answers(index, [other])
    torn = tmp_path / "torn.jsonl"
    torn.write_text(bad.read_text() + '{"request_id": "x", "ok": tr')  # torn last line: not read, recorded
    torn_ans = load_answers(index, [torn])
    assert len(torn_ans.failures) == 1
    assert [(c.file, c.line, c.store) for c in torn_ans.cut_lines] == [(str(torn), 2, str(torn))]
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"request_id": 1, "ok": true}\n')
    with pytest.raises(InputError, match=r"broken\.jsonl:1: response row needs a string field 'request_id'"):
        load_answers(index, [broken])


def test_extraction_accounting_and_judged_claims(tmp_path: Path) -> None:
    caps = [{"cid": c, "caption": f"caption {c}", "image": "x.png"} for c in ("c1", "c2", "c3", "c4")]
    f = _claims(tmp_path, caps, {"c1": [U_OBJ], "c2": []}, failed=["c3"])
    ext = extraction_accounting([f["cr"]], [f["cq"]])
    e = ext["s"]
    # 4 requests: c1 valid, c2 valid with zero claims, c3 failed at the token cap (50), c4 never answered
    assert (e.requests, e.valid, e.valid_zero_claims, e.invalid, e.invalid_at_token_cap) == (4, 2, 1, 2, 1)


def test_judged_claims_rows(slice_files, tmp_path: Path) -> None:
    cq = tmp_path / "cq.jsonl"
    cq.write_text("".join(json.dumps({"request_id": f"cq-{c}", "input": {"caption_id": c, "caption": "Unit1 and unit0 here"}}) + "\n"
                          for c in ("a1", "a2", "a3", "b1", "b2")))
    index, answers = load_slice([("J1", [slice_files["p1"]]), ("J2", [slice_files["p2"]])], [slice_files["r1"], slice_files["r2"]])
    rows = list(judged_claim_rows("S", ["J1", "J2"], index, answers, [slice_files["r1"], slice_files["r2"]], [cq],
                                  {"J1": "offline"}))
    assert len(rows) == 8 and tuple(rows[0]) == FIELDS
    r = rows[1]
    assert (r["question_id"], r["caption_id"], r["surface"], r["category"], r["unit"], r["target"], r["span"]) == (
        "a1:u0001", "a1", "ours", "count", "unit1", "t", "span1")
    assert r["span_offsets"] == [0, 5] and r["caption_window"] == "Unit1 and unit0 here"
    assert r["answers"] == {"J1": "no", "J2": "yes"} and r["backend"] == {"J1": "offline", "J2": "model"}
    assert r["image_key"] == "sha256:00" and r["image_path"] == "/x.png" and r["judges"] == ["J1", "J2"]
    assert {x["caption_id"] for x in rows} == {"a1", "a2", "a3", "b1"}


# --- command line ----------------------------------------------------------------------------------
def _cli(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="capaudit")
    jcli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_contract(slice_files, tmp_path: Path, capsys) -> None:
    caps = [{"cid": "c1", "caption": "Two dogs", "image": str(_png(tmp_path / "a.png"))}]
    f = _claims(tmp_path, caps, {"c1": [U_OBJ, U_CNT]})
    req = tmp_path / "VQA_REQ.jsonl"
    assert _cli(["judges", "build", "--claims-responses", str(f["cr"]), "--claims-requests", str(f["cq"]), "--input",
                 str(f["captions"]), "--id-field", "cid", "--image-field", "image", "--model", "M", "--revision", "R",
                 "--image-mode", "file", "--out", str(req)]) == 0
    assert "1 requests, 2 questions" in capsys.readouterr().err
    assert _cli(["judges", "summarize", "--responses", str(slice_files["p1"]), "--requests", str(slice_files["r1"]),
                 "--out", str(tmp_path / "judge_summary.json")]) == 0
    js = json.loads((tmp_path / "judge_summary.json").read_text())
    assert set(js["surfaces"]["ours"]) >= {"responses", "ok", "bad", "questions", "yes", "no", "uncertain",
                                           "support_rate", "risk_rate", "uncertainty_rate"}
    assert "categories" in js
    out = tmp_path / "cells.json"
    assert _cli(["judges", "cells", "--slice", "S", "--judge", f"J1={slice_files['p1']}", "--judge", f"J2={slice_files['p2']}",
                 "--requests", str(slice_files["r1"]), "--requests", str(slice_files["r2"]), "--reps", "20", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data) == {"cells", "judge_agreement", "judges_agreement"}  # judges_agreement: >= 2 judges
    assert data["judges_agreement"]["S"]["judges"] == ["J1", "J2"]
    cell = data["cells"][0]
    assert set(cell["all_types"]) == {"responses", "questions", "yes", "no", "uncertain", "supported_cap", "risk",
                                      "uncertain_rate", "supported_cap_std", "risk_std"}
    assert set(cell) == {"slice", "judge", "surface", "all_types", "excluding_count_relation", "by_type"}
    assert read_cells(out).get("S", "J2", "ref").all_types.responses == 1
    with pytest.raises(InputError, match="expected NAME=RESPONSES"):
        _cli(["judges", "cells", "--slice", "S", "--judge", "J1", "--requests", str(slice_files["r1"]), "--out", str(out)])


# --- issue 19: never a number from missing data ----------------------------------------------------
def _one_error_line(capsys) -> str:
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1, lines
    return lines[0]


def _cells_argv(f: Dict[str, Path], p2: Path, out: Path, *extra: str) -> List[str]:
    return ["judges", "cells", "--slice", "S", "--judge", f"J1={f['p1']}", "--judge", f"J2={p2}", "--requests",
            str(f["r1"]), "--requests", str(f["r2"]), "--reps", "20", "--out", str(out), *extra]


def test_cells_refuse_missing_data(slice_files, tmp_path: Path, capsys) -> None:
    from capaudit.cli import main

    out = tmp_path / "cells.json"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(_cells_argv(slice_files, empty, out)) == 1
    line = _one_error_line(capsys)
    assert f"{empty}: no response row (empty file)" in line and "0.0" not in line
    cut = tmp_path / "cut.jsonl"
    cut.write_text(slice_files["p2"].read_text() + '{"request_id": "x", "ok": tr')
    assert main(_cells_argv(slice_files, cut, out)) == 1
    assert f"{cut}:6: last line is cut" in _one_error_line(capsys)
    from capaudit.io.lock import ExclusiveLock, lock_path_for

    with ExclusiveLock(lock_path_for(cut)):  # a run still writing it: cells stay refused
        assert main(_cells_argv(slice_files, cut, out)) == 1
        assert "still being written" in _one_error_line(capsys)
    failed = _responses(tmp_path / "failed.jsonl", slice_files["r2"], {c: "HTTP 500" for c in ("a1", "a2", "a3", "b1", "b2")})
    assert main(_cells_argv(slice_files, failed, out)) == 1
    assert "no caption is answered by every judge (J1: 5 answered, 0 failed, J2: 0 answered, 5 failed)" in _one_error_line(capsys)
    no_ref = _responses(tmp_path / "no_ref.jsonl", slice_files["r2"], {"a1": ["yes"] * 3, "b1": "HTTP 500"})
    assert main(_cells_argv(slice_files, no_ref, out)) == 1
    assert "surface(s) 'ref' have no caption answered by every judge" in _one_error_line(capsys)
    assert main(_cells_argv(slice_files, no_ref, out, "--surface", "ours")) == 0  # asked for what has data
    assert not (tmp_path / "empty.jsonl.lock").exists()


def test_summarize_refuses_a_cut_line_or_counts_it_while_the_store_is_written(slice_files, tmp_path: Path,
                                                                             capsys) -> None:
    from capaudit.cli import main
    from capaudit.io.lock import ExclusiveLock, lock_path_for

    out = tmp_path / "judge_summary.json"
    cut = tmp_path / "cut.jsonl"
    cut.write_text(slice_files["p2"].read_text() + '{"request_id": "x", "ok": tr')
    argv = ["judges", "summarize", "--responses", str(cut), "--requests", str(slice_files["r2"]), "--out", str(out)]
    assert main(argv) == 1
    line = _one_error_line(capsys)
    assert f"{cut}:6: last line is cut" in line and "resume the run" in line and not out.exists()
    with ExclusiveLock(lock_path_for(cut)):  # what 'capaudit llm run' holds while it writes
        assert main(argv) == 0
    assert "IN PROGRESS: 1 cut last line(s) of stores still being written not counted" in capsys.readouterr().err
    got = json.loads(out.read_text())
    assert got["input"]["cut_last_lines"] == [{"file": str(cut), "line": 6, "store": str(cut), "being_written": True}]
    whole = summarize_files([slice_files["p2"]], [slice_files["r2"]])
    assert (got["responses"], got["ok"], got["bad"]) == (whole.responses, whole.ok, whole.bad) == (5, 4, 1)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["judges", "summarize", "--responses", str(empty), "--requests", str(slice_files["r2"]),
                 "--out", str(tmp_path / "e.json")]) == 1
    assert f"{empty}: no response row (empty file)" in _one_error_line(capsys)
    failed = _responses(tmp_path / "failed.jsonl", slice_files["r2"], {"a1": "HTTP 500", "b1": "timeout"})
    assert main(["judges", "summarize", "--responses", str(failed), "--requests", str(slice_files["r2"]),
                 "--out", str(tmp_path / "f.json")]) == 1
    line = _one_error_line(capsys)
    assert f"{failed}:1: none of the 2 responses is a valid answer" in line and "HTTP 500" in line
    assert not (tmp_path / "e.json").exists() and not (tmp_path / "f.json").exists()


def test_build_counts_the_cut_line_of_a_claims_store_still_being_written(tmp_path: Path, capsys) -> None:
    from capaudit.cli import main
    from capaudit.io.lock import ExclusiveLock, lock_path_for

    caps = [{"cid": c, "caption": f"A dog {c}", "image": str(_png(tmp_path / "a.png"))} for c in ("c1", "c2")]
    f = _claims(tmp_path, caps, {"c1": [U_OBJ]})
    with open(f["cr"], "a") as fh:
        fh.write('{"request_id": "c2-half", "ok": tr')
    argv = ["judges", "build", "--claims-responses", str(f["cr"]), "--claims-requests", str(f["cq"]), "--input",
            str(f["captions"]), "--id-field", "cid", "--image-field", "image", "--model", "M",
            "--out", str(tmp_path / "req.jsonl")]
    assert main(argv) == 1 and f"{f['cr']}:2: last line is cut" in _one_error_line(capsys)
    with ExclusiveLock(lock_path_for(f["cr"])):
        assert main(argv) == 0
    err = capsys.readouterr().err
    assert "1 requests" in err and "(1 not answered" in err
    assert "1 cut last line(s) of claims stores still being written not counted" in err


def test_build_sends_the_judged_caption_only_to_judges_that_leave_it_out(tmp_path: Path) -> None:
    from capaudit.standins.judges import REFCAPTION_JUDGE
    from capaudit.judges.prompts import parse_judged_caption

    caps = [{"cid": "c1", "caption": "Two dogs on a red sofa.", "image": str(_png(tmp_path / "a.png"))}]
    f = _claims(tmp_path, caps, {"c1": [U_OBJ, U_CNT]})
    texts = {}
    for model in ("J1", REFCAPTION_JUDGE):
        out = tmp_path / f"{model}.jsonl"
        build_judge_requests([f["cr"]], [f["cq"]], f["captions"], "cid", "image", JudgeBuildParams(model=model), out)
        row = json.loads(out.read_text())
        texts[model] = (row["input"].get("judged_caption"), parse_judged_caption(row["messages"][1]["content"][0]["text"]))
    assert texts["J1"] == (None, None)  # a VLM judge answers from the image alone
    assert texts[REFCAPTION_JUDGE] == ("Two dogs on a red sofa.", "Two dogs on a red sofa.")
    assert JudgeBuildParams(model="J1", judged_caption=True).judged_caption is True
    with pytest.raises(InputError, match="max_tokens must be a positive integer"):
        JudgeBuildParams(model="J1", max_tokens=-5)


# --- judged-slice surfaces -------------------------------------------------------------------------
def test_recap_runner_jsonl_is_a_surface(tmp_path: Path) -> None:
    from capaudit.judges.slices import SurfaceSpec, surface_rows

    _png(tmp_path / "img.png")
    (tmp_path / "recap.jsonl").write_text(
        json.dumps({"image_id": 139, "image_path": "img.png", "caption": " A kitchen. ", "model": "m", "policy": "Naive"}) + "\n"
        + json.dumps({"image_id": 140, "image_path": "img.png", "caption": "", "model": "m", "policy": "Naive"}) + "\n")
    spec = SurfaceSpec.from_params({"name": "recap_naive", "source": "jsonl", "path": str(tmp_path / "recap.jsonl"),
                                    "role": "ours"}, "p.yaml")
    rows = surface_rows(spec)
    assert rows == [{"caption_id": "recap_naive:139", "surface": "recap_naive", "caption": "A kitchen.", "image_id": 139,
                     "image_path": str((tmp_path / "img.png").resolve()), "source_row": 0, "policy": "Naive", "model": "m"}]
    with pytest.raises(InputError, match="source must be one of coco_mini_captions, sugarcrepe, jsonl"):
        SurfaceSpec.from_params({"name": "x", "source": "csv"}, "p.yaml")
    with pytest.raises(InputError, match="role must be one of"):
        SurfaceSpec.from_params({"name": "x", "source": "jsonl", "role": "hero"}, "p.yaml")
    (tmp_path / "dup.jsonl").write_text('{"image_id": 1, "caption": "a"}\n{"image_id": 1, "caption": "b"}\n')
    with pytest.raises(InputError, match="caption id 'd:1' occurs twice"):
        surface_rows(SurfaceSpec.from_params({"name": "d", "source": "jsonl", "path": str(tmp_path / "dup.jsonl")}, "p"))


def test_coco_and_sugarcrepe_surfaces() -> None:
    from capaudit.judges.slices import SurfaceSpec, surface_rows

    a = surface_rows(SurfaceSpec.from_params({"name": "a", "source": "coco_mini_captions", "caption_rank": 0}, "p"))
    b = surface_rows(SurfaceSpec.from_params({"name": "b", "source": "coco_mini_captions", "caption_rank": 1}, "p"))
    assert len(a) == len(b) == 159 and a[0]["caption_id"] == "a:coco-ann-372891"  # image 139, first annotation
    assert a[0]["caption"] == "A woman stands in the dining area at the table." and a[0]["image_id"] == 139
    neg = surface_rows(SurfaceSpec.from_params({"name": "n", "source": "sugarcrepe", "side": "negative"}, "p"))
    pos = surface_rows(SurfaceSpec.from_params({"name": "p", "source": "sugarcrepe", "side": "positive", "limit": 3}, "p"))
    # 83 SugarCrepe pairs have their val2017 image in COCO-MINI (22 distinct images); every positive
    # is one of the image's COCO captions, so its annotation id marks both captions of the pair
    assert len(neg) == 83 and len({r["image_id"] for r in neg}) == 22 and len(pos) == 3
    assert all(":coco-ann-" in r["caption_id"] for r in neg)
    assert pos[0]["pair_id"] == neg[0]["pair_id"] == "add_att:201" and pos[0]["caption"] != neg[0]["caption"]
