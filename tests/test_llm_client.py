"""capaudit.llm.client against a fault-injecting local server (spec §4.3; §13.5-6 fixes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from capaudit.llm.client import endpoint_url, run_requests
from capaudit.llm.requests import write_requests
from capaudit.llm.store import ResponseStore, merge
from capaudit.llm.validate import TaskRules
from test_llm_support import FaultServer, ids_by_status, make_rows, read_jsonl, wait_for

FAULTS = {"500": 0.10, "429": 0.05, "hang": 0.04, "badjson": 0.05, "schema": 0.05, "conn": 0.03}
# probe=False: these tests script per-request faults; the endpoint probe has its own tests
FAST = dict(timeout=0.4, backoff_base=0.005, backoff_max=0.05, progress=False, probe=False)


def test_endpoint_url_forms():
    assert endpoint_url("http://h:1") == "http://h:1/v1/chat/completions"
    assert endpoint_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert endpoint_url("http://h:1/v1/chat/completions") == "http://h:1/v1/chat/completions"
    with pytest.raises(ValueError, match="http"):
        endpoint_url("h:1")


def test_faults_every_request_answered_or_failed_with_reason(tmp_path):
    rows = make_rows(300)
    perm = {rows[0]["request_id"]: "badjson", rows[1]["request_id"]: "schema",
            rows[2]["request_id"]: "500", rows[3]["request_id"]: "400", rows[4]["request_id"]: "hang"}
    out = tmp_path / "resp.jsonl"
    with FaultServer(seed=1, faults=FAULTS, always=perm, hang_sec=1.0) as srv:
        stats = run_requests(rows, out, [srv.url], "fault-model", concurrency=32, retries=4, reasks=1, **FAST)
    got = read_jsonl(out)
    # exactly one row per request, nothing duplicated
    assert Counter(r["request_id"] for r in got) == Counter(r["request_id"] for r in rows)
    assert stats.answered + stats.failed == 300 == stats.sent
    by_id = {r["request_id"]: r for r in got}
    for r in got:
        if r["ok"]:
            assert r["error"] is None and r["error_kind"] is None
            assert r["parsed"] == {"caption_id": r["request_id"][:8], "claimed_units": [{"category": "object", "unit": "dog"}]}
            assert r["status"] == 200 and r["usage"]["total_tokens"] == 8
        else:
            assert r["error"] and r["error_kind"] in {"http", "timeout", "connection", "parse", "schema", "rule"}
    # the permanent faults end as failures of the right kind, with the right number of attempts
    b = lambda i: by_id[rows[i]["request_id"]]
    assert (b(0)["error_kind"], b(0)["attempts"]) == ("parse", 2)  # 1 + 1 re-ask
    assert b(1)["error_kind"] == "schema" and "caption_id: 7 is not of type 'string'" in b(1)["error"]
    assert (b(2)["error_kind"], b(2)["status"], b(2)["attempts"]) == ("http", 500, 5)  # 1 + 4 retries
    assert (b(3)["error_kind"], b(3)["status"], b(3)["attempts"]) == ("http", 400, 1)  # 4xx: no retry
    assert (b(4)["error_kind"], b(4)["attempts"]) == ("timeout", 5)
    assert srv.counts[rows[3]["request_id"]] == 1
    # transient faults were retried: most requests that met a fault still got answered
    assert stats.retries > 20 and stats.answered >= 280
    assert sum(1 for r in got if r["ok"] and r["attempts"] > 1) > 20
    # bounded concurrency on the server side
    assert srv.max_inflight <= 32


def test_resume_skips_answered_and_only_failed_reasks_failures(tmp_path):
    rows = make_rows(60)
    bad = {rows[i]["request_id"]: "400" for i in range(5)}
    out = tmp_path / "r.jsonl"
    with FaultServer(always=bad) as srv:
        s1 = run_requests(rows, out, [srv.url], "fault-model", concurrency=8, retries=1, **FAST)
        assert (s1.answered, s1.failed, s1.failed_by_kind) == (55, 5, {"http": 5})
        # resume without --only-failed: answered skipped, failed asked again (still 400)
        s2 = run_requests(rows, out, [srv.url], "fault-model", concurrency=8, retries=1, **FAST)
        assert (s2.skipped_answered, s2.sent, s2.failed) == (55, 5, 5)
        srv.always.clear()  # the server is fixed
        s3 = run_requests(rows, out, [srv.url], "fault-model", concurrency=8, retries=1, only_failed=True, **FAST)
        assert (s3.sent, s3.answered, s3.skipped_answered) == (5, 5, 55)
        s4 = run_requests(rows, out, [srv.url], "fault-model", concurrency=8, retries=1, only_failed=True, **FAST)
        assert s4.sent == 0
        assert sum(srv.counts.values()) == 60 + 5 + 5
    got = read_jsonl(out)
    ok, failed = ids_by_status(got)
    assert set(ok) == {r["request_id"] for r in rows} and max(ok.values()) == 1
    assert len(got) == 60 + 5 + 5  # 5 ids carry two failed rows and one answered row
    assert all(r["ok"] for r in merge(out).values())


def test_resume_false_refuses_nonempty_store(tmp_path):
    rows = make_rows(3)
    out = tmp_path / "r.jsonl"
    with FaultServer() as srv:
        run_requests(rows, out, [srv.url], "fault-model", **FAST)
        with pytest.raises(ValueError, match="already has rows"):
            run_requests(rows, out, [srv.url], "fault-model", resume=False, **FAST)


def test_duplicate_ids_in_input_asked_once_and_model_hint_checked(tmp_path):
    rows = make_rows(10)
    with FaultServer() as srv:
        st = run_requests(rows + rows[:4], tmp_path / "a.jsonl", [srv.url], "fault-model", **FAST)
        assert (st.sent, st.skipped_duplicate) == (10, 4)
        with pytest.raises(ValueError, match=r"requests\[0\]: field 'model_hint' is 'fault-model'"):
            run_requests(rows, tmp_path / "b.jsonl", [srv.url], "other-model", **FAST)
        st = run_requests(rows, tmp_path / "c.jsonl", [srv.url], "other-model", allow_model_mismatch=True, **FAST)
        assert st.answered == 10
        assert srv.payloads[rows[0]["request_id"]]["model"] == "other-model"


def test_bad_input_row_names_file_and_line(tmp_path):
    req = tmp_path / "req.jsonl"
    write_requests(req, make_rows(3))
    with open(req, "a") as fh:
        fh.write('{"request_id": "x", "task": "t"}\n')
    with FaultServer() as srv:
        with pytest.raises(ValueError, match=r"req\.jsonl:4: missing field 'task_version'"):
            run_requests(str(req), tmp_path / "o.jsonl", [srv.url], "fault-model", **FAST)
    # the three good rows before it were answered and flushed
    assert len(read_jsonl(tmp_path / "o.jsonl")) == 3


def test_task_rules_and_multiple_urls(tmp_path):
    rows = make_rows(40)
    rules = TaskRules(providers=())
    rules.register("test_task", lambda parsed, req: [] if req["input"]["i"] % 10 else ["unit list must be empty"])
    with FaultServer(delay=0.01) as a, FaultServer(delay=0.01) as b:
        st = run_requests(rows, tmp_path / "o.jsonl", [a.url, b.url + "/v1"], "fault-model", concurrency=8,
                          rules=rules, reasks=0, **FAST)
        assert a.counts and b.counts and sum(a.counts.values()) + sum(b.counts.values()) == 40
        assert abs(sum(a.counts.values()) - sum(b.counts.values())) <= 8  # least-loaded spreads the work
    got = {r["request_id"]: r for r in read_jsonl(tmp_path / "o.jsonl")}
    assert st.failed_by_kind == {"rule": 4}
    bad = [r for r in rows if r["input"]["i"] % 10 == 0]
    assert all(got[r["request_id"]]["error"] == "unit list must be empty" for r in bad)


def test_dead_url_falls_back_to_live_one(tmp_path):
    from test_llm_support import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    rows = make_rows(30)
    with FaultServer() as srv:
        st = run_requests(rows, tmp_path / "o.jsonl", [dead, srv.url], "fault-model", concurrency=4, retries=3, **FAST)
    assert st.answered == 30 and st.retries >= 1


def test_input_is_streamed_not_loaded(tmp_path):
    """At most `concurrency` rows are pulled ahead of the recorded ones."""
    pulled = [0]
    written = [0]
    worst = [0]

    class CountingStore(ResponseStore):
        def append(self, row):
            written[0] += 1
            super().append(row)

    def gen():
        for r in make_rows(200):
            pulled[0] += 1
            worst[0] = max(worst[0], pulled[0] - written[0])
            yield r

    with FaultServer(delay=0.002) as srv:
        run_requests(gen(), CountingStore(tmp_path / "o.jsonl"), [srv.url], "fault-model", concurrency=5, **FAST)
    assert pulled[0] == 200 and worst[0] <= 5


def _cli(args, **kw):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "capaudit.cli", "llm", "run", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def _run_args(req, out, url, extra=()):
    return ["--requests", str(req), "--out", str(out), "--url", url, "--model", "fault-model",
            "--concurrency", "8", "--timeout", "0.4", "--retries", "4", "--backoff", "0.005", "--backoff-max", "0.05",
            "--no-progress", "--allow-failures", "--no-probe", *extra]


@pytest.mark.slow
def test_cli_sigkill_then_resume_loses_nothing(tmp_path):
    rows = make_rows(400)
    req = tmp_path / "req.jsonl"
    out = tmp_path / "resp.jsonl"
    write_requests(req, rows)
    with FaultServer(seed=3, faults=FAULTS, delay=0.01, hang_sec=1.0) as srv:
        proc = _cli(_run_args(req, out, srv.url))
        assert wait_for(lambda: out.exists() and out.stat().st_size > 0 and len(read_jsonl(out)) >= 60, 60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        before = out.read_bytes()
        first = read_jsonl(out)
        assert 60 <= len(first) < 400
        answered_first = {r["request_id"] for r in first if r["ok"]}
        srv.phase = 2
        proc = _cli(_run_args(req, out, srv.url, ["--resume"]))
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        line = next(ln for ln in err.decode().splitlines() if ln.startswith("capaudit llm run: {"))
        stats = json.loads(line.split("capaudit llm run: ", 1)[1])
    after = out.read_bytes()
    complete_before = before[: before.rfind(b"\n") + 1]
    assert after.startswith(complete_before)  # nothing recorded before the kill was lost or rewritten
    final = read_jsonl(out)
    ok, failed = ids_by_status(final)
    all_ids = {r["request_id"] for r in rows}
    assert set(ok) | failed == all_ids  # every request answered or recorded as failed
    assert max(ok.values()) == 1  # no id answered twice
    assert not ({rid for ph, rid, _ in srv.log if ph == 2} & answered_first)  # answered ids never re-sent
    assert stats["skipped_answered"] == len(answered_first)
    assert all(r["error"] for r in final if not r["ok"])


@pytest.mark.slow
def test_cli_sigterm_stops_cleanly_and_resumes(tmp_path):
    rows = make_rows(300)
    req = tmp_path / "req.jsonl"
    out = tmp_path / "resp.jsonl"
    write_requests(req, rows)
    with FaultServer(delay=0.02) as srv:
        proc = _cli(_run_args(req, out, srv.url))
        assert wait_for(lambda: out.exists() and len(read_jsonl(out)) >= 20, 60)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err.decode()
        data = out.read_bytes()
        assert data.endswith(b"\n")  # flushed, no torn line
        n1 = len(read_jsonl(out))
        assert n1 < 300
        # every request that reached the server before the stop was recorded (drained, not dropped)
        assert n1 == len(srv.log)
        proc = _cli(_run_args(req, out, srv.url, ["--resume"]))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    final = read_jsonl(out)
    assert Counter(r["request_id"] for r in final) == Counter(r["request_id"] for r in rows)
    assert all(r["ok"] for r in final)
