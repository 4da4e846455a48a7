"""``capaudit study run-model``: the real study on GPUs, one command per model (capaudit.gpu_study).

The dry runs check the exact commands for params/paper.yaml (serve line = ``llm serve-cmd``'s, the
wait line, the stage command) and the refusals; the non-dry runs execute the whole path on CPU with
the offline ``capaudit serve`` (or a tiny fake process) as the "server": start -> wait -> stage -> stop.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import yaml

from capaudit.cli import main

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "params" / "paper.yaml"
CAPAUDIT = [str(Path(sys.executable).parent / "capaudit")] if (Path(sys.executable).parent / "capaudit").is_file() \
    else [sys.executable, "-m", "capaudit.cli"]

QWEN = "Qwen3.5-397B-A17B-FP8"
SERVING = {"extractor": "extractor_qwen35_397b_a17b_fp8", "judge-qwen": "judge_qwen35_397b_a17b_fp8",
           "judge-gemma": "judge_gemma4_31b_it", "captioner": "captioner_qwen35_35b_a3b_fp8"}


@pytest.fixture(autouse=True)
def _reference_env(monkeypatch: pytest.MonkeyPatch, reference_dir: Path) -> None:
    monkeypatch.setenv("CAPAUDIT_REFERENCE_DIR", str(os.environ.get("CAPAUDIT_REFERENCE_DIR", reference_dir)))
    if not (Path(os.environ["CAPAUDIT_REFERENCE_DIR"]) / "configs" / "recap" / "vllm_serve.yaml").is_file():
        pytest.skip("the reference folder (configs/recap/vllm_serve*.yaml) is not here")


@pytest.fixture
def plan_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding only params/paper.yaml (a dry run must add nothing to it)."""
    (tmp_path / "params").mkdir()
    shutil.copyfile(PAPER, tmp_path / "params" / "paper.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> Tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def files_under(d: Path) -> List[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def paper() -> Dict:
    return yaml.safe_load(PAPER.read_text(encoding="utf-8"))


def serve_cmd_line(capsys: pytest.CaptureFixture, name: str, port: int) -> str:
    rc, out, _ = run_cli(capsys, "llm", "serve-cmd", name, "--host", "127.0.0.1", "--port", str(port))
    assert rc == 0
    return out.strip()


def judge(raw: Dict, name: str) -> Dict:
    return next(j for j in raw["judges"]["judges"] if j["name"] == name)


@pytest.mark.parametrize("model,url,served,revision,stage", [
    ("extractor", lambda r: r["claims"]["url"], lambda r: r["claims"]["model"], lambda r: r["claims"]["revision"],
     "claims run"),
    ("judge-qwen", lambda r: judge(r, QWEN)["url"], lambda r: judge(r, QWEN)["model"],
     lambda r: judge(r, QWEN)["revision"], f"judges run --judge {QWEN}"),
    ("judge-gemma", lambda r: judge(r, "Gemma-4-31B-IT")["url"], lambda r: judge(r, "Gemma-4-31B-IT")["model"],
     lambda r: judge(r, "Gemma-4-31B-IT")["revision"], "judges run --judge Gemma-4-31B-IT"),
])
def test_dry_run_prints_the_exact_commands(capsys, plan_dir, model, url, served, revision, stage):
    raw = paper()
    u = url(raw)
    port = int(u.rsplit(":", 1)[1])
    rc, out, err = run_cli(capsys, "study", "run-model", model, "--params", "params/paper.yaml", "--dry-run")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == serve_cmd_line(capsys, SERVING[model], port)
    serve = shlex.split(lines[0])
    assert serve[:3] == ["vllm", "serve", served(raw)]
    assert serve[serve.index("--revision") + 1] == revision(raw)
    assert serve[serve.index("--served-model-name") + 1] == served(raw)
    assert serve[serve.index("--host") + 1] == "127.0.0.1" and serve[serve.index("--port") + 1] == str(port)
    wait = shlex.split(lines[1])
    assert wait[:len(CAPAUDIT)] == CAPAUDIT and wait[len(CAPAUDIT):len(CAPAUDIT) + 2] == ["llm", "wait"]
    assert wait[wait.index("--url") + 1] == u and wait[-2:] == ["--timeout", "1800"]
    words = stage.split()
    assert lines[2:] == [shlex.join(CAPAUDIT + words[:2] + ["--params", "params/paper.yaml"] + words[2:])]
    # one judge at a time: the other judge is not asked (nor waited for); the extractor, served with the
    # Qwen judge, is waited for by the Gemma judge's run while the extraction is not stored yet
    if model != "extractor":
        other = {raw["judges"]["extractor_url"]} - {u}
        assert [wait[i + 1] for i, w in enumerate(wait) if w == "--url"] == [u, *sorted(other)]
        assert "is another judge: not asked by this run" in err
        assert ("is not served by this command" in err) == bool(other)
    assert "8 GPUs" in err
    assert files_under(plan_dir) == ["params", "params/paper.yaml"]  # nothing written (no outputs/)


def test_dry_run_names_the_deliberate_differences(capsys, plan_dir):
    rc, _, err = run_cli(capsys, "study", "run-model", "extractor", "--params", "params/paper.yaml", "--dry-run")
    assert rc == 0
    for key in ("max-num-seqs", "limit-mm-per-prompt", "mm-processor-kwargs", "allowed-local-media-path"):
        assert f"deliberately different from reference configs/recap/vllm_serve_397b_fp8.yaml: {key}" in err
    rc, _, err = run_cli(capsys, "study", "run-model", "judge-qwen", "--params", "params/paper.yaml", "--dry-run")
    assert rc == 0 and "deliberately different" not in err  # the judge serves exactly the reference's arguments


def test_captioner_needs_a_recap_section(capsys, plan_dir):
    rc, out, err = run_cli(capsys, "study", "run-model", "captioner", "--params", "params/paper.yaml", "--dry-run")
    assert rc == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "params/paper.yaml: no 'recap' section" in err
    raw = paper()
    raw["recap"] = {"model": "Qwen/Qwen3.5-35B-A3B-FP8", "url": "http://127.0.0.1:8003", "revision": None,
                    "policies": ["reference-photorealistic"], "inputs": [{"file": "images/"}], "image_mode": "file"}
    (plan_dir / "params" / "recap.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    rc, out, err = run_cli(capsys, "study", "run-model", "captioner", "--params", "params/recap.yaml", "--dry-run")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == serve_cmd_line(capsys, SERVING["captioner"], 8003)
    assert "--data-parallel-size 8" in lines[0] and "--revision" not in lines[0]
    assert shlex.split(lines[1])[-4:] == ["--url", "http://127.0.0.1:8003", "--timeout", "1800"]
    assert lines[2] == shlex.join(CAPAUDIT + ["study", "run-stage", "recap", "--params", "params/recap.yaml"])
    assert "deliberately different from reference configs/recap/vllm_serve.yaml: allowed-local-media-path" in err
    assert "not pinned to a revision" in err


@pytest.mark.parametrize("model,edit,expect", [
    ("extractor", lambda r: r["claims"].update(model="Qwen/Qwen3.5-35B-A3B"),
     "params/paper.yaml claims.model = 'Qwen/Qwen3.5-35B-A3B' but serving/extractor_qwen35_397b_a17b_fp8.yaml "
     "vllm.served-model-name = 'Qwen/Qwen3.5-397B-A17B-FP8'"),
    ("judge-gemma", lambda r: judge(r, "Gemma-4-31B-IT").update(revision="145dc2508c480a64b47242f160d286cff94a2343"),
     "params/paper.yaml judges.judges[Gemma-4-31B-IT].revision = \"145dc2508c480a64b47242f160d286cff94a2343\" but "
     "serving/judge_gemma4_31b_it.yaml revision = \"439edf5652646a0d1bd8b46bfdc1d3645761a445\""),
    ("judge-qwen", lambda r: r["judges"].update(extractor_revision="0" * 40),
     "params/paper.yaml judges.extractor_revision = \"" + "0" * 40 + "\" but serving/judge_qwen35_397b_a17b_fp8.yaml"),
    ("extractor", lambda r: r["claims"].update(url="http://gpu-node:8000"),
     "params/paper.yaml claims.url = http://gpu-node:8000 but serving/extractor_qwen35_397b_a17b_fp8.yaml is served "
     "here on http://127.0.0.1:PORT"),
])
def test_mismatched_plan_is_refused_in_one_line(capsys, plan_dir, model, edit, expect):
    raw = paper()
    edit(raw)
    (plan_dir / "params" / "paper.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    rc, out, err = run_cli(capsys, "study", "run-model", model, "--params", "params/paper.yaml", "--dry-run")
    assert rc == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and "refused, nothing started" in err
    assert expect in err, err
    assert files_under(plan_dir) == ["params", "params/paper.yaml"]


def test_serving_config_differing_from_the_reference_is_refused(capsys, plan_dir):
    cfg = yaml.safe_load((REPO / "serving" / "judge_qwen35_397b_a17b_fp8.yaml").read_text(encoding="utf-8"))
    cfg["vllm"]["max-model-len"] = 4096
    (plan_dir / "judge.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    rc, out, err = run_cli(capsys, "study", "run-model", "judge-qwen", "--params", "params/paper.yaml",
                           "--serving", "judge.yaml", "--dry-run")
    assert rc == 1 and out == "" and len(err.strip().splitlines()) == 1
    assert "judge.yaml vllm.max-model-len = 4096 but reference configs/recap/vllm_serve_397b_fp8.yaml " \
           "max-model-len = 8192" in err


def test_makefile_targets_pass_dry_run():
    out = subprocess.run(["make", "-n", "study-judge-gemma", "DRY_RUN=1"], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    line = [ln for ln in out.stdout.splitlines() if "study run-model" in ln]
    assert line and line[-1].endswith("study run-model judge-gemma --params params/paper.yaml --dry-run")
    out = subprocess.run(["make", "-n", "study-extractor"], cwd=REPO, capture_output=True, text=True)
    assert [ln for ln in out.stdout.splitlines() if "study run-model" in ln][-1].endswith(
        "study run-model extractor --params params/paper.yaml")


# --- the non-dry path, on CPU ------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=1.0):
            return True
    except OSError:
        return False


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def server_pid(err: str) -> int:
    line = next(ln for ln in err.splitlines() if "server pid" in ln and " on http" in ln)
    return int(line.split("server pid ")[1].split()[0])


def write_case(d: Path, port: int, launcher: List[str], surface: str = "tiny", model_flag: str = "--backend") -> None:
    caps = ["A brown dog runs across a green field with a red ball in its mouth.",
            "Two people sit on a wooden bench near a lake under a cloudy sky.",
            "A small kitchen with white cabinets, a steel sink and a window above it."]
    with open(d / "captions.jsonl", "w", encoding="utf-8") as fh:
        for i, c in enumerate(caps):
            fh.write(json.dumps({"id": str(i), "caption": c}) + "\n")
    plan = {"run": "gpu_study_fake", "notebooks": [],
            "surfaces": [{"name": "tiny", "file": "captions.jsonl", "format": "jsonl", "caption_field": "caption",
                          "key_field": "id"}],
            "claims": {"model": "capaudit-heuristic-extractor", "url": f"http://127.0.0.1:{port}", "budget": 16,
                       "budgets": [16], "lexical_window": False, "surfaces": [surface], "concurrency": 2,
                       "retries": 0}}
    (d / "plan.yaml").write_text(yaml.safe_dump(plan), encoding="utf-8")
    fake = {"capaudit": {"name": "fake-extractor", "role": "ci", "launcher": launcher, "model_flag": model_flag,
                         "unpinned_reason": "the offline stand-in (its rule-set version is its revision)"},
            "model": "capaudit-heuristic-extractor", "revision": None, "host": "127.0.0.1", "port": 8000, "vllm": {}}
    (d / "fake.yaml").write_text(yaml.safe_dump(fake), encoding="utf-8")
    (d / "ref.yaml").write_text(yaml.safe_dump({"model": "capaudit-heuristic-extractor", "host": "0.0.0.0",
                                                "port": 8000}), encoding="utf-8")


def run_model(d: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "CAPAUDIT_VLLM_PYTHON": sys.executable}
    return subprocess.Popen(CAPAUDIT + ["study", "run-model", "extractor", "--params", "plan.yaml", "--serving",
                                        "fake.yaml", "--reference", "ref.yaml", "--wait-timeout", "60",
                                        "--stop-timeout", "10", *extra],
                            cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


OFFLINE_SERVE = ["{python}", "-m", "capaudit.cli", "serve"]


def test_run_model_serves_waits_runs_the_stage_and_stops(tmp_path):
    port = free_port()
    write_case(tmp_path, port, OFFLINE_SERVE)
    proc = run_model(tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    pid = server_pid(err)
    assert gone(pid) and not answers(f"http://127.0.0.1:{port}")
    assert f"server pid {pid} stopped" in err
    assert "capaudit llm wait: http://127.0.0.1:%d ready" % port in err
    summary = tmp_path / "outputs" / "gpu_study_fake" / "artifacts" / "claims" / "claimed_cbu_summary.json"
    assert summary.is_file()
    manifest = json.loads((summary.parent / "stage_manifest.json").read_text(encoding="utf-8"))
    assert f"http://127.0.0.1:{port}" in json.dumps(manifest)  # the stage asked this command's server
    order = [err.index(s) for s in ("+ " + sys.executable + " -m capaudit.cli serve", "llm wait --url",
                                    "claims run --params plan.yaml", f"server pid {pid} stopped")]
    assert order == sorted(order)


def test_failed_stage_still_stops_the_server_and_exits_non_zero(tmp_path):
    port = free_port()
    write_case(tmp_path, port, OFFLINE_SERVE, surface="not_declared")
    proc = run_model(tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert "step failed with status" in err and "not_declared" in err
    pid = server_pid(err)
    assert gone(pid) and not answers(f"http://127.0.0.1:{port}")


def test_server_that_dies_while_starting_ends_the_wait(tmp_path):
    port = free_port()
    write_case(tmp_path, port, ["{python}", "-c", "import sys; sys.exit(7)"], model_flag="")
    t0 = time.monotonic()
    proc = run_model(tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and time.monotonic() - t0 < 30
    assert "the server exited with status 7 before it answered" in err
    assert not (tmp_path / "outputs").exists()  # no stage ran


@pytest.mark.parametrize("sig,status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_stops_the_server(tmp_path, sig, status):
    port = free_port()
    write_case(tmp_path, port, ["{python}", "-c", "import time; time.sleep(120)"], model_flag="")
    proc = run_model(tmp_path)
    err = ""
    deadline = time.monotonic() + 30
    while "server pid" not in err and time.monotonic() < deadline:  # stderr until the server is started
        err += proc.stderr.readline()
    pid = server_pid(err)
    time.sleep(0.5)
    assert not gone(pid)
    proc.send_signal(sig)
    out, rest = proc.communicate(timeout=60)
    assert proc.returncode == status, err + rest
    assert gone(pid) and f"server pid {pid} stopped" in rest


def test_a_port_already_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        write_case(tmp_path, port, OFFLINE_SERVE)
        proc = run_model(tmp_path)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and f"http://127.0.0.1:{port} is already in use" in err
    assert "server pid" not in err and not (tmp_path / "outputs").exists()


def test_missing_stage_inputs_are_refused_before_the_server_starts(capsys, plan_dir):
    # the judged CC12M caption files come from notebook 01b_cc12m_bridge: none here
    rc, out, err = run_cli(capsys, "study", "run-model", "judge-qwen", "--params", "params/paper.yaml")
    assert rc == 1 and len([ln for ln in err.splitlines() if ": error: " in ln]) == 1
    assert "refused before starting the server" in err
    assert "outputs/paper/artifacts/cc12m/images/ours_cc12m.jsonl" in err
    assert "01b_cc12m_bridge" in err and "server pid" not in err
    assert files_under(plan_dir) == ["params", "params/paper.yaml"]


def test_an_endpoint_the_stage_needs_but_this_command_does_not_serve_must_answer_first(capsys, plan_dir):
    port = free_port()  # nothing listens there: the Qwen server (extractor and judge) is not up
    raw = paper()
    raw["judges"]["extractor_url"] = judge(raw, "Qwen3.5-397B-A17B-FP8")["url"] = f"http://127.0.0.1:{port}"
    (plan_dir / "params" / "paper.yaml").write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    images = plan_dir / "outputs" / "paper" / "artifacts" / "cc12m" / "images"
    images.mkdir(parents=True)
    for s in raw["judges"]["slices"][0]["surfaces"]:
        (images / f"{s['name']}.jsonl").write_text("", encoding="utf-8")
    before = files_under(plan_dir)
    rc, out, err = run_cli(capsys, "study", "run-model", "judge-gemma", "--params", "params/paper.yaml")
    assert rc == 1 and "refused before starting the server" in err and "server pid" not in err
    assert f"judges.extractor_url http://127.0.0.1:{port} (Qwen/Qwen3.5-397B-A17B-FP8) does not answer" in err
    assert f"serving/serve.sh judge_qwen35_397b_a17b_fp8 --port {port}" in err
    assert files_under(plan_dir) == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_killed_command_leaves_no_server(tmp_path):
    port = free_port()
    write_case(tmp_path, port, ["{python}", "-c", "import time; time.sleep(120)"], model_flag="")
    proc = run_model(tmp_path)
    err = ""
    deadline = time.monotonic() + 30
    while "server pid" not in err and time.monotonic() < deadline:
        err += proc.stderr.readline()
    pid = server_pid(err)
    proc.kill()  # SIGKILL: no finally block runs
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(pid)


def test_a_judge_run_needs_no_extractor_once_the_extraction_is_stored(capsys, plan_dir):
    from capaudit.judges.stage_params import slug

    raw = paper()
    row = {"request_id": "r0", "task": "claims", "task_version": 1, "prompt_version": "p", "input": {},
           "schema": {"type": "object"}, "decoding": {}, "messages": [{"role": "user", "content": "x"}]}
    answer = {"request_id": "r0", "ok": True, "status": 200, "attempts": 1, "started_at": "", "elapsed_sec": 0,
              "model": "m", "usage": None, "response_text": "{}", "parsed": {}, "error": None, "error_kind": None}
    for s in raw["judges"]["slices"]:
        d = plan_dir / "outputs" / "paper" / "artifacts" / "judges" / slug(s["name"]) / "claims"
        d.mkdir(parents=True)
        (d / "requests.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
        (d / "responses.jsonl").write_text(json.dumps(answer) + "\n", encoding="utf-8")
    rc, out, err = run_cli(capsys, "study", "run-model", "judge-gemma", "--params", "params/paper.yaml", "--dry-run")
    assert rc == 0, err
    wait = shlex.split(out.splitlines()[1])
    assert [wait[i + 1] for i, w in enumerate(wait) if w == "--url"] == [judge(raw, "Gemma-4-31B-IT")["url"]]
    assert "the extraction is stored already; not asked" in err
