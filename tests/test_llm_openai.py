"""``--transport openai``: the openai package's AsyncOpenAI behind our client gives the same rows
as the fast transport, with the SDK's retry rules (408/409, x-should-retry, retry-after)."""

from __future__ import annotations

import asyncio
import threading
from typing import Dict, List

import pytest

pytest.importorskip("openai")

from aiohttp import web  # noqa: E402

from capaudit.llm.client import run_requests  # noqa: E402
from capaudit.llm.openai_transport import base_url_of, retry_after_seconds, should_retry  # noqa: E402
from capaudit.llm.store import merge  # noqa: E402
from test_llm_support import FaultServer, free_port, make_rows, read_jsonl  # noqa: E402

TIMING = ("started_at", "elapsed_sec")
# probe=False: these tests script per-request faults; the endpoint probe has its own tests
FAST = dict(timeout=1.0, backoff_base=0.005, backoff_max=0.05, progress=False, probe=False)


def rows_without_timing(path) -> Dict[str, dict]:
    return {rid: {k: v for k, v in r.items() if k not in TIMING} for rid, r in merge(path).items()}


def test_rules():
    assert base_url_of("http://h:1/v1/chat/completions") == "http://h:1/v1"
    assert [should_retry(s, {}) for s in (400, 404, 408, 409, 422, 429, 500, 503)] == [
        False, False, True, True, False, True, True, True]
    assert should_retry(500, {"x-should-retry": "false"}) is False
    assert should_retry(400, {"x-should-retry": "true"}) is True
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) < -3e8  # a date in the past


def test_same_rows_as_fast_transport_under_faults(tmp_path):
    faults = {"500": 0.15, "429": 0.05, "badjson": 0.05, "schema": 0.05}
    rows = make_rows(80)
    perm = {rows[0]["request_id"]: "400", rows[1]["request_id"]: "schema"}
    out = {}
    for transport in ("fast", "openai"):
        with FaultServer(seed=3, faults=faults, always=perm) as srv:
            path = tmp_path / f"{transport}.jsonl"
            st = run_requests(rows, path, [srv.url], "fault-model", concurrency=8, retries=4, reasks=1,
                              transport=transport, **FAST)
            out[transport] = (st, path, dict(srv.counts))
    (sf, pf, cf), (so, po, co) = out["fast"], out["openai"]
    assert (sf.answered, sf.failed, sf.retries, sf.reasks) == (so.answered, so.failed, so.retries, so.reasks)
    assert cf == co  # the server saw the same attempts per request
    assert rows_without_timing(pf) == rows_without_timing(po)
    got = {r["request_id"]: r for r in read_jsonl(po)}
    assert (got[rows[0]["request_id"]]["error_kind"], got[rows[0]["request_id"]]["attempts"]) == ("http", 1)
    assert got[rows[1]["request_id"]]["error_kind"] == "schema"
    assert sum(1 for r in got.values() if r["ok"]) == 78


class ScriptedServer:
    """Answers each request id with a scripted list of (status, headers) before a valid answer."""

    def __init__(self, script: List[tuple], hang: float = 0.0):
        self.script = script
        self.hang = hang
        self.calls: List[dict] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    async def handle(self, request: web.Request) -> web.Response:
        payload = await request.json()
        self.calls.append({"headers": dict(request.headers), "payload": payload})
        n = len(self.calls)
        if n <= len(self.script):
            status, headers = self.script[n - 1]
            if status == "hang":
                await asyncio.sleep(self.hang)
            else:
                return web.Response(status=status, text="scripted", headers=headers)
        content = '{"caption_id": "x", "claimed_units": []}'
        return web.json_response({"id": "x", "object": "chat.completion", "model": payload["model"],
                                  "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                               "finish_reason": "stop"}], "usage": None})

    def __enter__(self):
        self._ready = threading.Event()

        def target():
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            app = web.Application()
            app.router.add_post("/v1/chat/completions", self.handle)
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
            self.loop.run_until_complete(runner.setup())
            self.loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", self.port).start())
            self.runner = runner
            self._ready.set()
            self.loop.run_forever()
            pending = asyncio.all_tasks(self.loop)
            for t in pending:  # e.g. a handler still sleeping in a "hang" script
                t.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(runner.cleanup())
            self.loop.close()

        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.mark.parametrize("transport,script,attempts,ok", [
    ("openai", [(408, {}), (409, {})], 3, True),          # the SDK retries 408 and 409
    ("fast", [(408, {})], 1, False),                       # ours does not
    ("openai", [(500, {"x-should-retry": "false"})], 1, False),
    ("openai", [(400, {"x-should-retry": "true"})], 2, True),
    ("openai", [(503, {"retry-after-ms": "10"})], 2, True),
    ("openai", [("hang", {})], 2, True),                   # timeout -> retried
])
def test_sdk_retry_rules(tmp_path, transport, script, attempts, ok):
    rows = make_rows(1)
    with ScriptedServer(script, hang=1.0) as srv:
        st = run_requests(rows, tmp_path / "o.jsonl", [srv.url], "fault-model", concurrency=1, retries=3,
                          transport=transport, **{**FAST, "timeout": 0.3})
    (row,) = read_jsonl(tmp_path / "o.jsonl")
    assert (row["attempts"], row["ok"]) == (attempts, ok)
    if not ok:
        assert row["error_kind"] == "http" and "scripted" in row["error"]
    assert st.answered == int(ok)


def test_openai_transport_headers_and_connection_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_ORG_ID", "org-test")
    rows = make_rows(2)
    with ScriptedServer([]) as srv:
        run_requests(rows, tmp_path / "a.jsonl", [srv.url], "fault-model", transport="openai", api_key="sk-abc", **FAST)
    h = {k.lower(): v for k, v in srv.calls[0]["headers"].items()}
    assert h["authorization"] == "Bearer sk-abc" and h["openai-organization"] == "org-test"
    # the body is our payload (vLLM structured output form kept via extra_body)
    assert srv.calls[0]["payload"]["structured_outputs"]["json"]["required"] == ["caption_id", "claimed_units"]
    st = run_requests(rows[:1], tmp_path / "b.jsonl", [f"http://127.0.0.1:{free_port()}"], "fault-model",
                      transport="openai", retries=1, **FAST)
    (row,) = read_jsonl(tmp_path / "b.jsonl")
    assert (row["error_kind"], row["attempts"], st.failed) == ("connection", 2, 1)
    with pytest.raises(ValueError, match="unknown transport"):
        run_requests(rows, tmp_path / "c.jsonl", [srv.url], "fault-model", transport="grpc", **FAST)
