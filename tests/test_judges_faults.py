"""Judges against a fault-injecting server: 500s, timeouts, invalid JSON, wrong ids, answers outside
the enum, duplicate ids. Each failure is recorded (kind and reason), counted as ``bad`` by the
summaries, retried by a resumed run, and nothing already answered is lost or replaced."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

from capaudit.judges.cells import build_cells
from capaudit.judges.prompts import message_text, parse_user_prompt
from capaudit.judges.questions import Question, question_text
from capaudit.judges.requests import JudgeBuildParams, build_request
from capaudit.judges.summarize import summarize_files
from capaudit.llm.backends import register_backend
from capaudit.llm.client import run_requests
from capaudit.llm.requests import write_requests
from capaudit.llm.server import background_server

FAULTY = "test-faulty-judge"
GOOD = "test-good-judge"


class Faulty:
    """Answers by caption id: ``c-ok`` fine; ``c-flaky`` a 500 on the first call, then fine;
    ``c-500`` always 500; ``c-timeout`` sleeps past the client timeout; ``c-badjson``, ``c-wrongid``,
    ``c-enum``, ``c-dup`` malformed answers. ``healed`` makes every caption fine."""

    def __init__(self) -> None:
        self.calls: Dict[str, int] = {}
        self.healed = False
        self.lock = threading.Lock()

    def __call__(self, messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
        cid, qs = parse_user_prompt(message_text(messages[-1]["content"]))
        with self.lock:
            self.calls[cid] = self.calls.get(cid, 0) + 1
            n = self.calls[cid]
        ids = [q["question_id"] for q in qs]
        good = {"caption_id": cid, "question_results": [{"question_id": q, "answer": "yes", "confidence": 1} for q in ids]}
        if self.healed or cid == "c-ok" or (cid == "c-flaky" and n > 1):
            return json.dumps(good)
        if cid in ("c-500", "c-flaky"):
            raise RuntimeError("injected server error")
        if cid == "c-timeout":
            time.sleep(1.5)
            return json.dumps(good)
        if cid == "c-badjson":
            return '{"caption_id": "c-badjson", "question_results": [}'
        if cid == "c-wrongid":
            good["question_results"][0]["question_id"] = "c-other:u0000"
        if cid == "c-enum":
            good["question_results"][0]["answer"] = "maybe"
        if cid == "c-dup":
            good["question_results"][1]["question_id"] = ids[0]
        return json.dumps(good)


def _requests(path: Path, model: str) -> Path:
    rows = []
    for cid in ("c-ok", "c-flaky", "c-500", "c-timeout", "c-badjson", "c-wrongid", "c-enum", "c-dup"):
        qs = [Question(f"{cid}:u{i:04d}", c, question_text(c, "dog", ""), "dog", "", "", i)
              for i, c in enumerate(("object", "count"))]
        rows.append(build_request(cid, "s", qs, "file:///img.png", "sha256:00", JudgeBuildParams(model=model, prompts="capaudit")))
    write_requests(path, rows)
    return path


def _rows(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.slow
def test_fault_injection_and_resume(tmp_path: Path) -> None:
    faulty = Faulty()
    register_backend(FAULTY, faulty)
    register_backend(GOOD, Faulty().__class__())  # a second judge; healed below
    req = _requests(tmp_path / "req.jsonl", FAULTY)
    resp = tmp_path / "resp.jsonl"
    kw = dict(concurrency=4, timeout=0.5, retries=1, reasks=0, backoff_base=0.01, backoff_max=0.05, progress=False,
              handle_signals=False, drain_timeout=5)
    with background_server([FAULTY, GOOD], workers=8) as url:
        st = run_requests(str(req), str(resp), [url], FAULTY, **kw)
        assert (st.answered, st.failed) == (2, 6)
        assert st.failed_by_kind == {"http": 1, "timeout": 1, "parse": 1, "schema": 2, "rule": 1}
        by_id = {r["request_id"]: r for r in _rows(resp)}
        cid_of = {r["request_id"]: r["input"]["caption_id"] for r in _rows(req)}
        kinds = {cid_of[k]: (v["ok"], v["error_kind"]) for k, v in by_id.items()}
        assert kinds == {"c-ok": (True, None), "c-flaky": (True, None), "c-500": (False, "http"),
                         "c-timeout": (False, "timeout"), "c-badjson": (False, "parse"), "c-wrongid": (False, "schema"),
                         "c-enum": (False, "schema"), "c-dup": (False, "rule")}
        dup = next(v for k, v in by_id.items() if cid_of[k] == "c-dup")
        assert "duplicate 'c-dup:u0000'" in dup["error"]
        assert faulty.calls["c-flaky"] == 2  # retried once after the 500
        s = summarize_files([resp], [req])
        assert (s.responses, s.ok, s.bad) == (8, 2, 6)
        bad = {e["caption_id"]: e for e in s.examples["bad_response"]}
        assert set(bad) == {"c-500", "c-timeout", "c-badjson", "c-wrongid", "c-enum", "c-dup"}
        assert bad["c-500"]["kind"] == "http" and "injected server error" in bad["c-500"]["error"]
        assert bad["c-enum"]["file"] == str(resp) and isinstance(bad["c-enum"]["line"], int)
        first = {cid_of[k]: v["started_at"] for k, v in by_id.items() if v["ok"]}
        # resume against the healed server: only the failed ids are asked; answered rows are untouched
        faulty.healed = True
        calls_before = dict(faulty.calls)
        st2 = run_requests(str(req), str(resp), [url], FAULTY, only_failed=True, **kw)
        assert (st2.sent, st2.answered, st2.skipped_answered) == (6, 6, 2)
        assert faulty.calls["c-ok"] == calls_before["c-ok"]
        s2 = summarize_files([resp], [req])
        assert (s2.responses, s2.ok, s2.bad) == (8, 8, 0) and s2.surface("s").counts.yes == 16
        still = {cid_of[r["request_id"]]: r["started_at"] for r in _rows(resp) if r["ok"] and cid_of[r["request_id"]] in first}
        assert still == first
        # cells with a second judge: the intersection follows what both answered
        req2 = _requests(tmp_path / "req2.jsonl", GOOD)
        resp2 = tmp_path / "resp2.jsonl"
        st3 = run_requests(str(req2), str(resp2), [url], GOOD, **kw)
        assert st3.answered == 2  # the second judge is faulty too (fresh state)
    cells, report = build_cells("S", [(FAULTY, [resp]), (GOOD, [resp2])], [req, req2], reps=20)
    assert report["__intersection__"]["captions"] == 2
    assert cells.get("S", FAULTY, "s").all_types.responses == 2 == cells.get("S", GOOD, "s").all_types.responses
    assert report[GOOD]["failed"] == 6 and report[FAULTY]["failed"] == 0
