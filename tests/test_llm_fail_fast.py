"""Fail fast, never degrade silently (issue 19): serve refuses a backend missing a required
resource; a backend that can never answer is not retried; the first request of a run is a probe
whose endpoint failure stops the run in one line; degraded backends say so; `llm run` exits
non-zero when failures remain."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capaudit import resources
from capaudit.llm import backends
from capaudit.llm.client import EndpointUnavailable, check_endpoints, run_requests
from capaudit.llm.server import background_server, make_app
from capaudit.resources import ResourceMissing

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(n: int, model: str = "m"):
    from capaudit.llm.requests import make_request

    return [make_request(task="t", task_version=1, model=model, revision=None, prompt_version=1,
                         schema={"type": "object"}, messages=[{"role": "user", "content": f"caption {i}"}],
                         decoding={"temperature": 0, "max_tokens": 16}, input={"i": i}) for i in range(n)]


def _json_except_caption_2(messages, payload):
    return "not json" if "caption 2" in messages[-1]["content"] else "{}"


@pytest.fixture
def absent_wordnet(monkeypatch):
    """WordNet reported missing, whatever this machine has."""
    res = dataclasses.replace(resources.RESOURCES["wordnet"], check=lambda: (False, "/nowhere: missing data.noun"))
    monkeypatch.setitem(resources.RESOURCES, "wordnet", res)


def test_make_app_refuses_backend_missing_required_resource(absent_wordnet):
    reg = backends.BackendRegistry(plugins=())
    reg.register("needs-wn", backends.echo_backend, requires=("wordnet",))
    t0 = time.monotonic()
    with pytest.raises(ResourceMissing) as err:
        make_app(["needs-wn"], registry=reg)
    msg = str(err.value)
    assert time.monotonic() - t0 < 5
    assert "backend needs-wn" in msg and "WordNet" in msg and "apt-get install -y wordnet-base wordnet-sense-index" in msg
    assert "apt-get update" in msg
    assert "\n" not in msg


def test_unknown_resource_name_is_refused_at_registration():
    reg = backends.BackendRegistry(plugins=())
    with pytest.raises(ValueError, match="unknown resources"):
        reg.register("x", backends.echo_backend, requires=("wordnett",))


def test_degraded_backend_says_so_in_every_answer(monkeypatch):
    res = dataclasses.replace(resources.RESOURCES["tesseract"], check=lambda: (False, "tesseract not on PATH"))
    monkeypatch.setitem(resources.RESOURCES, "tesseract", res)
    backends.register_backend("test-degraded-echo", backends.echo_backend, degrades=("tesseract",))
    with background_server(["test-degraded-echo"]) as url:
        import urllib.request

        body = json.dumps({"model": "test-degraded-echo", "messages": [{"role": "user", "content": "hi"}]}).encode()
        rq = urllib.request.Request(url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
        out = json.loads(urllib.request.urlopen(rq, timeout=10).read())
        health = json.loads(urllib.request.urlopen(url + "/health", timeout=10).read())
    assert out["choices"][0]["message"]["content"] == "hi"
    assert len(out["capaudit_degraded"]) == 1 and "Tesseract" in out["capaudit_degraded"][0]
    assert health["capaudit_degraded"] == out["capaudit_degraded"]


def _unavailable(messages, payload):
    raise ResourceMissing("WordNet 3.0 (Debian) is missing; install: apt-get install -y wordnet-base")


def test_backend_that_can_never_answer_is_not_retried_and_stops_the_run(tmp_path):
    backends.register_backend("test-never", _unavailable)
    with background_server(["test-never"]) as url:
        t0 = time.monotonic()
        with pytest.raises(EndpointUnavailable) as err:
            run_requests(_rows(50, "test-never"), tmp_path / "o.jsonl", [url], "test-never", retries=3,
                         progress=False)
        elapsed = time.monotonic() - t0
    rows = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["attempts"] == 1 and rows[0]["status"] == 503  # probe only, no retry
    assert "cannot answer the run's first request" in str(err.value) and "WordNet" in str(err.value)
    assert elapsed < 5


def test_endpoint_checks(tmp_path):
    dead = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(EndpointUnavailable, match="unreachable"):
        check_endpoints([dead], "m")
    with background_server(["capaudit-echo"]) as url:
        check_endpoints([dead, url], "capaudit-echo")  # one live endpoint of two is enough
        with pytest.raises(EndpointUnavailable, match="does not serve model 'nope'"):
            check_endpoints([url], "nope")
    t0 = time.monotonic()
    with pytest.raises(EndpointUnavailable):
        run_requests(_rows(3), tmp_path / "x.jsonl", [dead], "m", progress=False)
    assert time.monotonic() - t0 < 5
    assert not (tmp_path / "x.jsonl").exists() or (tmp_path / "x.jsonl").read_text() == ""


def _fails_on_caption_0(kind: str):
    def backend(messages, payload):
        if "caption 0" in messages[-1]["content"]:
            if kind == "crash":
                raise RuntimeError("this one input breaks the backend")
            raise ValueError("this one request is malformed")  # served as HTTP 400
        return "{}"
    return backend


@pytest.mark.parametrize("kind,status", [("crash", 500), ("reject", 400)])
def test_a_first_request_failing_alone_does_not_stop_the_run(tmp_path, kind, status):
    """Only failures that say the endpoint cannot answer stop a run; a 5xx or 400 of one request does not,
    and a resumed run (which sends that request first again) finishes too."""
    name = f"test-first-{kind}"
    backends.register_backend(name, _fails_on_caption_0(kind))
    with background_server([name]) as url:
        st = run_requests(_rows(6, name), tmp_path / "o.jsonl", [url], name, retries=1, backoff_base=0.001,
                          progress=False)
        again = run_requests(_rows(6, name), tmp_path / "o.jsonl", [url], name, retries=1, backoff_base=0.001,
                             progress=False)
    rows = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert (st.answered, st.failed) == (5, 1) and (again.answered, again.failed) == (0, 1)
    failed = [r for r in rows if not r["ok"]]
    assert len(failed) == 2 and {r["status"] for r in failed} == {status}


def test_serving_all_leaves_out_a_backend_that_cannot_run(absent_wordnet):
    reg = backends.BackendRegistry(plugins=())
    reg.register("needs-wn", backends.echo_backend, requires=("wordnet",))
    reg.register("plain", backends.echo_backend)
    from capaudit.llm.server import BACKENDS_KEY, DEGRADED_KEY

    app = make_app(None, registry=reg)
    assert app[BACKENDS_KEY] == ["plain"]
    assert any(n.startswith("needs-wn not served") and "wordnet-base" in n for n in app[DEGRADED_KEY])


def _cli(args, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    exe = REPO / ".venv" / "bin" / "capaudit"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "capaudit.cli"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, **kw)


def test_llm_run_exits_non_zero_when_failures_remain(tmp_path):
    req = tmp_path / "req.jsonl"
    req.write_text("".join(json.dumps(r) + "\n" for r in _rows(4, "test-json-but-2")))
    backends.register_backend("test-json-but-2", _json_except_caption_2)
    with background_server(["test-json-but-2"]) as url:
        base = ["llm", "run", "--requests", str(req), "--url", url, "--model", "test-json-but-2", "--no-progress",
                "--reasks", "0"]
        p = _cli([*base, "--out", str(tmp_path / "a.jsonl")])
        q = _cli([*base, "--out", str(tmp_path / "b.jsonl"), "--allow-failures"])
    assert p.returncode == 3, p.stderr
    err = [ln for ln in p.stderr.splitlines() if "error:" in ln]
    assert len(err) == 1 and "1 of 4 requests failed" in err[0] and "--allow-failures" in err[0]
    assert q.returncode == 0 and "warning: 1 of 4 requests failed" in q.stderr


def test_serve_cli_refuses_in_seconds_without_wordnet(tmp_path):
    env = {**os.environ, "CAPAUDIT_WORDNET_DIR": str(tmp_path / "no-wordnet"), "CAPAUDIT_CACHE": str(tmp_path)}
    t0 = time.monotonic()
    p = _cli(["serve", "--backend", "capaudit-offline-refcaption-judge", "--port", str(_free_port())], env=env,
             timeout=60)  # a server that starts would run until killed here: that is the failure
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode != 0 and time.monotonic() - t0 < 30
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "capaudit-offline-refcaption-judge" in lines[0] and "apt-get install" in lines[0]


def _always_500(messages, payload):
    raise RuntimeError("the model crashed on every request")  # served as HTTP 500


def test_llm_run_whose_every_answer_is_http_500_names_the_endpoint(tmp_path):
    """Every request answered HTTP 500 (after its retries): exit 3, and the one error line says
    which endpoint and model answered so, with the first failure's status and body."""
    req = tmp_path / "req.jsonl"
    req.write_text("".join(json.dumps(r) + "\n" for r in _rows(3, "test-always-500")))
    backends.register_backend("test-always-500", _always_500)
    with background_server(["test-always-500"]) as url:
        p = _cli(["llm", "run", "--requests", str(req), "--url", url, "--model", "test-always-500", "--no-progress",
                  "--retries", "1", "--backoff", "0.01", "--out", str(tmp_path / "o.jsonl")])
    assert p.returncode == 3, p.stderr
    err = [ln for ln in p.stderr.splitlines() if "error:" in ln]
    assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    assert "3 of 3 requests failed (http 3; first: " in err[0]
    assert f"{url.rstrip('/')}" in err[0] and "(model test-always-500)" in err[0] and "HTTP 500" in err[0], err[0]
