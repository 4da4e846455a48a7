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
import pytest

from capaudit.llm.context_check import ContextUncounted, max_new_tokens, refusal, tokenize_body, tokenize_url

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
def fake_vllm(tokenize: bool = True, max_model_len: bool = True, tokenize_status: int = 200,
              tokenize_delay: float = 0.0) -> Iterator[Dict]:
    seen: Dict = {"completions": [], "tokenize": 0}

    async def models(request: web.Request) -> web.Response:
        entry = {"id": "m", "object": "model", "owned_by": "vllm", "root": "/nonexistent/m"}
        if max_model_len:
            entry["max_model_len"] = LIMIT
        return web.json_response({"object": "list", "data": [entry]})

    async def tok(request: web.Request) -> web.Response:
        body = await request.json()
        seen["tokenize"] += 1
        seen.setdefault("tokenize_bodies", []).append(body)
        if tokenize_delay:
            await asyncio.sleep(tokenize_delay)
        if tokenize_status != 200:
            return web.json_response({"error": "boom"}, status=tokenize_status)
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
    for status, raw in ((404, b"{}"), (200, b"not json"), (200, b'{"count": "9"}'), (200, b'{"count": true}')):
        with pytest.raises(ContextUncounted):
            refusal(status, raw, req, 100)


def test_tokenize_renders_the_template_the_request_renders() -> None:
    msgs = [{"role": "user", "content": "hi"}]
    dec = {"max_tokens": 5, "temperature": 0, "chat_template_kwargs": {"enable_thinking": False},
           "mm_processor_kwargs": {"max_pixels": 1003520}, "chat_template": "{{ x }}", "continue_final_message": True}
    body = json.loads(tokenize_body({"messages": msgs, "decoding": dec}, "m"))
    assert body == {"model": "m", "messages": msgs, "add_generation_prompt": False, "chat_template": "{{ x }}",
                    "chat_template_kwargs": {"enable_thinking": False}, "continue_final_message": True,
                    "mm_processor_kwargs": {"max_pixels": 1003520}}
    assert json.loads(tokenize_body({"messages": msgs, "decoding": {"max_tokens": 5}}, "m")) == {
        "model": "m", "messages": msgs, "add_generation_prompt": True}


@pytest.mark.parametrize("server", [dict(tokenize_status=500), dict(tokenize_delay=3.0)], ids=["http500", "slow"])
def test_a_tokenizer_that_cannot_count_turns_the_check_off_once_and_says_so(tmp_path: Path, monkeypatch, capsys,
                                                                          server) -> None:
    from capaudit.cli import main
    import capaudit.llm.client as client

    monkeypatch.setattr(client, "TOKENIZE_TIMEOUT_S", 0.5)
    req = _requests(tmp_path)
    with fake_vllm(**server) as srv:
        rc = main(["llm", "run", "--requests", str(req), "--out", str(tmp_path / "resp.jsonl"), "--url", srv["url"],
                   "--model", "m", "--no-progress", "--concurrency", "1"])
    err = capsys.readouterr().err
    assert rc == 0 and len(srv["completions"]) == 2  # both sent, unchecked
    assert srv["tokenize"] == 1  # asked once, then off for the rest of the run
    warn = [x for x in err.splitlines() if "context check stopped" in x]
    assert len(warn) == 1 and "after 0 counted requests" in warn[0] and srv["url"] in warn[0]
    stats = json.loads(err.split("capaudit llm run: ", 1)[1].splitlines()[0])
    assert stats["context_checked"] == 0 and stats["context_check_off"]


def test_refused_rows_stay_refused_on_resume_and_the_message_says_what_would_help(tmp_path: Path, capsys) -> None:
    from capaudit.cli import main

    req, out = _requests(tmp_path), tmp_path / "resp.jsonl"
    with fake_vllm() as srv:
        args = ["llm", "run", "--requests", str(req), "--out", str(out), "--url", srv["url"], "--model", "m",
                "--no-progress"]
        assert main(args) == 3
        capsys.readouterr()
        assert main(args + ["--resume"]) == 3
        err = capsys.readouterr().err
        assert srv["completions"] == ["short short short sh"]  # the short one once; the long one never
    line = [x for x in err.splitlines() if "error:" in x][0]
    assert "1 of 1 requests failed (context 1" in line and "serve a larger max-model-len" in line
    assert "rerun with --resume" not in line  # resuming does not help a prompt over the context
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["error_kind"] for r in rows if r["request_id"] == "long"] == ["context", "context"]


def test_overwrite_forgets_who_answered_the_deleted_rows(tmp_path: Path) -> None:
    from capaudit.cli import main
    from capaudit.llm.store import answered_by, models_path

    req, out = _requests(tmp_path), tmp_path / "resp.jsonl"
    models_path(out).write_text(json.dumps({"answered_by": [{"model": "old-model", "kind": "real", "url": "x"}]}))
    out.write_text("")
    with fake_vllm() as srv:
        main(["llm", "run", "--requests", str(req), "--out", str(out), "--url", srv["url"], "--model", "m",
              "--no-progress", "--overwrite", "--allow-failures"])
    assert [c["model"] for c in answered_by(out)] == ["m"]


def test_the_endpoints_count_in_turn(tmp_path: Path) -> None:
    rows = [json.loads(x) for x in _requests(tmp_path).read_text().splitlines()]
    req = tmp_path / "many.jsonl"
    req.write_text("".join(json.dumps({**rows[0], "request_id": f"r{i}"}) + "\n" for i in range(8)))
    with fake_vllm() as a, fake_vllm() as b:
        stats = run_requests(str(req), str(tmp_path / "resp.jsonl"), [a["url"], b["url"]], "m", progress=False,
                             handle_signals=False, concurrency=4)
    assert stats.answered == 8 and stats.context_checked == 8
    assert a["tokenize"] > 0 and b["tokenize"] > 0 and a["tokenize"] + b["tokenize"] == 8


def test_recap_refuses_a_caption_request_over_the_context_too(tmp_path: Path) -> None:
    """The captioning runner checks each request as ``llm run`` does: the naive policy asks for
    max_tokens 512, over the test server's 120-token context with the image's tokens."""
    from capaudit.recap.inputs import open_images
    from capaudit.recap.policies import load_policy
    from capaudit.recap.runner import recap
    from test_recap_support import make_images

    make_images(tmp_path / "img", 2)
    imgs = tmp_path / "img"
    policy = load_policy("naive", Path(__file__).resolve().parents[1] / "params" / "policies")
    with fake_vllm() as srv:
        st = recap([open_images(imgs)], policy, tmp_path / "store", [srv["url"]], "m", workers=0, progress=False,
                   handle_signals=False)
    assert srv["completions"] == [] and srv["tokenize"] == 2
    assert (st.answered, st.failed, st.failed_by_kind) == (0, 2, {"context": 2})
    rows = [json.loads(x) for f in sorted((tmp_path / "store").rglob("*.jsonl")) for x in f.read_text().splitlines()
            if '"request_id"' in x]
    refused = [r for r in rows if r.get("error_kind") == "context"]
    assert len(refused) == 2 and all("+ max_tokens 512 =" in r["error"] for r in refused)
    assert all(r["recap"]["image_path"] for r in refused)  # the row says which image
    from capaudit.recap.cli import summary_line

    line = summary_line(st.to_dict(), False)
    assert "the 2 over the model's context are refused again on --resume" in line and "\n" not in line


def test_the_check_turning_off_mid_count_is_no_crash(tmp_path: Path) -> None:
    """Many requests in flight: one count fails (the check turns off) while others wait on theirs;
    those finish against the limit they started with, and the run ends normally."""
    rows = [json.loads(x) for x in _requests(tmp_path).read_text().splitlines()]
    req = tmp_path / "many.jsonl"
    req.write_text("".join(json.dumps({**rows[0], "request_id": f"r{i}"}) + "\n" for i in range(6)))
    with fake_vllm(tokenize_delay=0.5) as slow, fake_vllm(tokenize_status=500) as failing:
        stats = run_requests(str(req), str(tmp_path / "resp.jsonl"), [slow["url"], failing["url"]], "m",
                             progress=False, handle_signals=False, concurrency=6)
    assert stats.answered == 6 and stats.failed == 0
    assert stats.context_check_off and failing["url"] in stats.context_check_off
    assert stats.context_checked >= 1  # the slow counts that were in flight still counted
