"""``capaudit serve``: the local OpenAI-compatible server for offline backends."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from capaudit.llm.backends import BackendRegistry, load_backend_spec, minimal_instance, register_backend
from capaudit.llm.client import run_requests
from capaudit.llm.server import make_app
from capaudit.llm.store import merge
from test_llm_support import SCHEMA, free_port, make_rows, read_jsonl, wait_for


def test_minimal_instance():
    assert minimal_instance(SCHEMA) == {"caption_id": "", "claimed_units": []}
    assert minimal_instance({"type": "array", "minItems": 2, "items": {"enum": ["yes", "no"]}}) == ["yes", "yes"]
    assert minimal_instance({"type": "integer", "minimum": 3}) == 3
    assert minimal_instance({"type": ["null", "string"], "minLength": 2}) == "xx"
    assert minimal_instance({"anyOf": [{"type": "boolean"}, {"type": "string"}]}) is False


def _call(app, method, path, body=None):
    async def go():
        from aiohttp.test_utils import TestClient, TestServer

        async with TestClient(TestServer(app)) as client:
            resp = await client.request(method, path, json=body)
            return resp.status, await resp.json()

    return asyncio.run(go())


def test_routes_and_errors():
    reg = BackendRegistry(plugins=())
    reg.register("upper", lambda messages, payload: messages[-1]["content"].upper())
    app = make_app(["upper"], registry=reg)
    assert _call(app, "GET", "/health") == (200, {"status": "ok", "models": ["upper"], "capaudit_degraded": []})
    status, models = _call(make_app(["upper"], registry=reg), "GET", "/v1/models")
    assert status == 200 and [m["id"] for m in models["data"]] == ["upper"]
    status, out = _call(make_app(["upper"], registry=reg), "POST", "/v1/chat/completions",
                        {"model": "upper", "messages": [{"role": "user", "content": "a dog"}]})
    assert status == 200 and out["model"] == "upper"
    assert out["choices"][0]["message"] == {"role": "assistant", "content": "A DOG"}
    assert out["usage"]["prompt_tokens"] == 2
    status, out = _call(make_app(["upper"], registry=reg), "POST", "/v1/chat/completions",
                        {"model": "nope", "messages": [{"role": "user", "content": "x"}]})
    assert status == 404 and out["error"]["code"] == "model_not_found"
    status, out = _call(make_app(["upper"], registry=reg), "POST", "/v1/chat/completions", {"model": "upper"})
    assert status == 400 and "messages" in out["error"]["message"]


def test_backend_crash_is_a_500():
    reg = BackendRegistry(plugins=())
    reg.register("crash", lambda m, p: 1 / 0)
    status, out = _call(make_app(["crash"], registry=reg), "POST", "/v1/chat/completions",
                        {"model": "crash", "messages": [{"role": "user", "content": "x"}]})
    assert status == 500 and "ZeroDivisionError" in out["error"]["message"]


def test_backend_spec_loading():
    reg = BackendRegistry(plugins=())
    assert load_backend_spec("dumps=json:dumps", registry=reg) == "dumps"
    assert reg.get("dumps") is json.dumps
    with pytest.raises(ValueError, match="NAME=package.module:function"):
        load_backend_spec("x=json", registry=reg)
    with pytest.raises(KeyError, match="unknown backend 'zzz'"):
        load_backend_spec("zzz", registry=reg)


@pytest.mark.slow
def test_cli_serve_end_to_end_with_client(tmp_path):
    """`capaudit serve` in a subprocess + `run_requests` with the llamacpp and vllm dialects."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "capaudit.cli", "serve", "--port", str(port),
                             "--backend", "capaudit-schema-minimal"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"

        def up():
            try:
                return urllib.request.urlopen(url + "/health", timeout=1).status == 200
            except OSError:
                return False

        assert wait_for(up, 30)
        rows = make_rows(20, model="capaudit-schema-minimal")
        for dialect in ("vllm", "llamacpp", "openai"):
            out = tmp_path / f"{dialect}.jsonl"
            st = run_requests(rows, out, [url], "capaudit-schema-minimal", dialect=dialect, progress=False)
            assert st.answered == 20
            got = read_jsonl(out)
            assert {r["model"] for r in got} == {"capaudit-schema-minimal"}  # the backend's name travels
            assert all(r["parsed"] == {"caption_id": "", "claimed_units": []} for r in got)
        assert len(merge(*tmp_path.glob("*.jsonl"))) == 20
    finally:
        proc.terminate()
        proc.wait(10)
    assert proc.returncode in (0, -15)


def test_register_backend_default_registry():
    register_backend("test-llm-const", lambda m, p: '{"caption_id": "c", "claimed_units": []}')
    app = make_app(["test-llm-const"])
    status, out = _call(app, "POST", "/v1/chat/completions",
                        {"model": "test-llm-const", "messages": [{"role": "user", "content": "x"}]})
    assert status == 200 and json.loads(out["choices"][0]["message"]["content"])["caption_id"] == "c"


def test_background_server_serves_then_stops(tmp_path):
    from capaudit.llm.backends import DEFAULT_BACKENDS
    from capaudit.llm.server import background_server

    name = DEFAULT_BACKENDS.names()[0]
    with background_server([name]) as url:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
            assert [m["id"] for m in json.load(r)["data"]] == [name]
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/health", timeout=2)
    with background_server([name]) as u1, pytest.raises(RuntimeError, match="could not start"):
        with background_server([name], port=int(u1.rsplit(":", 1)[1])):
            pass


def test_serve_list_names_what_the_command_line_would_serve(capsys):
    from capaudit.cli import main

    assert main(["serve", "--list", "--backend", "echo-list-test=json:dumps"]) == 0
    assert capsys.readouterr().out.split() == ["echo-list-test"]
    assert main(["serve", "--list"]) == 0
    listed = capsys.readouterr().out.split()
    assert "capaudit-offline-annotation-judge" in listed and "capaudit-heuristic-extractor" in listed
