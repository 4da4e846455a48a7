"""Question ids are kept exactly as a request gives them (issue 24): ``cid:u0`` is not ``cid:u0000``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capaudit.cli import main
from capaudit.errors import InputError
from capaudit.judges.answers import RequestIndex, load_answers
from capaudit.judges.questions import Question
from capaudit.judges.requests import JudgeBuildParams, build_request
from capaudit.llm.requests import write_requests


def _request(cid: str, qids, judge: str = "J"):
    qs = [Question(q, "object", f"Is there thing {k}?", f"thing {k}", "", "", k) for k, q in enumerate(qids)]
    return build_request(cid, "s", qs, "file:///x.png", "sha256:00", JudgeBuildParams(model=judge))


def _answer(req, answers):
    return {"request_id": req["request_id"], "ok": True, "started_at": "2026-01-01T00:00:00Z",
            "parsed": {"caption_id": req["input"]["caption_id"], "question_results": [
                {"question_id": q["question_id"], "answer": a, "confidence": 1.0}
                for q, a in zip(req["input"]["questions"], answers)]}}


def test_unpadded_ids_are_answered_as_given(tmp_path: Path, capsys):
    reqs = [_request("c1", ["c1:u0", "c1:u1"]), _request("c2", ["c2:u0000", "c2:u0001"])]
    write_requests(tmp_path / "req.jsonl", reqs)
    (tmp_path / "resp.jsonl").write_text("".join(json.dumps(_answer(r, a)) + "\n"
                                                 for r, a in zip(reqs, (["yes", "no"], ["yes", "yes"]))))
    index = RequestIndex.from_files([tmp_path / "req.jsonl"])
    assert index.rows[reqs[0]["request_id"]].qids() == ["c1:u0", "c1:u1"]
    assert index.rows[reqs[1]["request_id"]].qids() == ["c2:u0000", "c2:u0001"]
    a = load_answers(index, [tmp_path / "resp.jsonl"])
    assert not a.failures and len(a.answered) == 2
    assert a.answered[reqs[0]["request_id"]] == bytes([0, 1])
    assert main(["judges", "summarize", "--responses", str(tmp_path / "resp.jsonl"), "--requests",
                 str(tmp_path / "req.jsonl"), "--out", str(tmp_path / "s.json")]) == 0
    assert "(2 ok, 0 bad)" in capsys.readouterr().err
    # an answer with the padded form of an unpadded id is a wrong id, not silently the same question
    bad = _answer(reqs[0], ["yes", "no"])
    bad["parsed"]["question_results"][0]["question_id"] = "c1:u0000"
    (tmp_path / "bad.jsonl").write_text(json.dumps(bad) + "\n")
    b = load_answers(index, [tmp_path / "bad.jsonl"])
    assert len(b.failures) == 1 and "c1:u0" in b.failures[0].error


def test_two_ids_for_one_number_are_refused(tmp_path: Path):
    write_requests(tmp_path / "req.jsonl", [_request("c1", ["c1:u0", "c1:u00"])])
    with pytest.raises(InputError, match="same unit number twice"):
        RequestIndex.from_files([tmp_path / "req.jsonl"])
