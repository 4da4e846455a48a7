"""``llm run`` refuses, before sending, a request whose prompt (image tokens included) is over the
model's context, where the server declares the context (``max_model_len``) and counts prompts
(``/tokenize``), as vLLM does. A server with neither, or ``--no-context-check``, gets every request.
The test server counts like vLLM's: the words of the text parts, plus a fixed number per image."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List

from aiohttp import web

from capaudit.llm.client import run_requests
from capaudit.llm.context_check import max_new_tokens, refusal, tokenize_url

IMAGE_TOKENS = 49
LIMIT = 120


def _count(messages: List[Dict]) -> int:
    n = 0
    for m in messages:
        c = m["content"]
        parts = [{"type": "text", "text": c}] if isinstance(c, str) else c
        n += sum(len(p["text"].split()) if p["type"] == "text" else IMAGE_TOKENS for p in parts)
    return n + 3  # the template's own tokens


@contextmanager
def fake_vllm(tokenize: bool = True, max_model_len: bool = True) -> Iterator[Dict]:
    seen: Dict = {"completions": [], "tokenize": 0}

    async def models(request: web.Request) -> web.Response:
        entry = {"id": "m", "object": "model", "owned_by": "vllm", "root": "/nonexistent/m"}
        if max_model_len:
            entry["max_model_len"] = LIMIT
        return web.json_response({"object": "list", "data": [entry]})

    async def tok(request: web.Request) -> web.Response:
        body = await request.json()
        seen["tokenize"] += 1
        return web.json_response({"count": _count(body["messages"]), "max_model_len": LIMIT, "tokens": []})

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        seen["completions"].append(body["messages"][0]["content"][1]["text"][:20])
        return web.json_response({"id": "x", "object": "chat.completion", "model": "m", "usage": {
            "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"a": "x"}'}}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    if tokenize:
        app.router.add_post("/tokenize", tok)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    seen["url"] = f"http://127.0.0.1:{port}"
    try:
        yield seen
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)


def _requests(tmp_path: Path) -> Path:
    rows = []
    for rid, words in (("short", 10), ("long", 60)):  # long: 60 + 49 + 3 = 112 tokens + 16 new > 120
        rows.append({"request_id": rid, "task": "probe", "task_version": 1, "prompt_version": "t1", "input": {}, "schema": {"type": "object", "properties": {"a": {"type": "string"}},
                                                                     "required": ["a"]},
                     "decoding": {"max_tokens": 16, "temperature": 0},
                     "messages": [{"role": "user", "content": [
                         {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
                         {"type": "text", "text": " ".join([rid] * words)}]}]})
    path = tmp_path / "req.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _store(path: Path) -> Dict[str, Dict]:
    return {r["request_id"]: r for r in (json.loads(x) for x in path.read_text().splitlines())}


def test_a_prompt_over_the_context_with_its_image_tokens_is_refused_before_sending(tmp_path: Path) -> None:
    req = _requests(tmp_path)
    with fake_vllm() as srv:
        stats = run_requests(str(req), str(tmp_path / "resp.jsonl"), [srv["url"]], "m", progress=False,
                             handle_signals=False, concurrency=1)
    assert srv["completions"] == ["short short short sh"]  # the long one never reached the server
    rows = _store(tmp_path / "resp.jsonl")
    assert rows["short"]["ok"]
    bad = rows["long"]
    assert not bad["ok"] and bad["error_kind"] == "context" and bad["status"] is None and bad["attempts"] == 0
    assert bad["error"] == ("prompt is 112 tokens (chat template and image tokens included) + max_tokens 16 = 128 > "
                            "the model's context of 120 tokens; not sent")
    assert (stats.answered, stats.failed, stats.failed_by_kind) == (1, 1, {"context": 1})
    assert "request long: prompt is 112 tokens" in stats.first_failure and "\n" not in stats.first_failure


def test_the_cli_refuses_in_one_line_and_exits_non_zero(tmp_path: Path, capsys) -> None:
    from capaudit.cli import main

    req = _requests(tmp_path)
    with fake_vllm() as srv:
        rc = main(["llm", "run", "--requests", str(req), "--out", str(tmp_path / "resp.jsonl"), "--url", srv["url"],
                   "--model", "m", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 3 and "Traceback" not in err
    lines = [x for x in err.splitlines() if "error:" in x]
    assert len(lines) == 1 and "context 1" in lines[0] and "the model's context of 120 tokens; not sent" in lines[0]


def test_no_check_without_a_declared_context_or_a_tokenizer_or_when_turned_off(tmp_path: Path) -> None:
    req = _requests(tmp_path)
    for i, (kw, server) in enumerate(((dict(), dict(tokenize=False)), (dict(), dict(max_model_len=False)),
                                      (dict(context_check=False), dict()))):
        out = tmp_path / f"resp{i}.jsonl"
        with fake_vllm(**server) as srv:
            stats = run_requests(str(req), str(out), [srv["url"]], "m", progress=False, handle_signals=False, **kw)
        assert (stats.answered, stats.failed) == (2, 0) and len(srv["completions"]) == 2
        if server.get("max_model_len") is False or kw:
            assert srv["tokenize"] == 0  # nothing to check against (or turned off): no extra round trip


def test_helpers() -> None:
    assert tokenize_url("http://h:1/v1/chat/completions") == "http://h:1/tokenize"
    assert tokenize_url("http://h:1/v1") == tokenize_url("http://h:1/") == "http://h:1/tokenize"
    assert max_new_tokens({"decoding": {"max_completion_tokens": 7}}) == 7 and max_new_tokens({}) == 0
    req = {"decoding": {"max_tokens": 10}}
    assert refusal(200, b'{"count": 90}', req, 100) is None  # 90 + 10 fits exactly
    assert "91 tokens" in refusal(200, b'{"count": 91}', req, 100)
    assert refusal(404, b"{}", req, 100) is None and refusal(200, b"not json", req, 100) is None
