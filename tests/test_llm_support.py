"""Helpers shared by the tests/test_llm_*.py files (no tests here).

``FaultServer``: an OpenAI-compatible aiohttp server on 127.0.0.1 (random port) in a background
thread that injects faults deterministically per (request id, attempt): HTTP 500, 429, 400,
hangs past the client timeout, invalid JSON, schema-violating JSON. Every call is logged.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Set, Tuple

from aiohttp import web

from capaudit.llm.requests import make_request

SCHEMA: Dict[str, Any] = {
    "type": "object",
    "properties": {
        "caption_id": {"type": "string"},
        "claimed_units": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "category": {"enum": ["object", "attribute", "count"]},
                    "unit": {"type": "string", "maxLength": 40},
                },
                "required": ["category", "unit"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["caption_id", "claimed_units"],
    "additionalProperties": False,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_rows(n: int, model: str = "fault-model", task: str = "test_task", prompt_version: int = 1) -> List[dict]:
    """Request rows whose last message ends with ``rid=<request_id>`` (messages are not hashed),
    so the fault server knows which request it serves."""
    rows = [
        make_request(
            task=task, task_version=1, model=model, revision=None, prompt_version=prompt_version, schema=SCHEMA,
            messages=[{"role": "system", "content": "extract"}, {"role": "user", "content": f"caption {i}"}],
            decoding={"temperature": 0, "max_tokens": 64}, input={"i": i}, meta={"row": i},
        )
        for i in range(n)
    ]
    for r in rows:
        r["messages"][-1]["content"] += f" rid={r['request_id']}"
    return rows


class FaultServer:
    """See module docstring. ``faults`` maps kind → probability per attempt; ``always`` maps a
    request id to a fault returned on every attempt."""

    KINDS = ("500", "429", "400", "hang", "badjson", "schema", "conn")

    def __init__(self, seed: int = 0, faults: Optional[Dict[str, float]] = None,
                 always: Optional[Dict[str, str]] = None, hang_sec: float = 1.0, delay: float = 0.0):
        self.seed = seed
        self.faults = dict(faults or {})
        self.always = dict(always or {})
        self.hang_sec = hang_sec
        self.delay = delay
        self.counts: Counter = Counter()
        self.log: List[Tuple[int, str, str]] = []  # (phase, request_id, outcome)
        self.payloads: Dict[str, dict] = {}
        self.phase = 1
        self.inflight = 0
        self.max_inflight = 0
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self._stop: Optional[asyncio.Event] = None

    def outcome(self, rid: str, n: int) -> str:
        if rid in self.always:
            return self.always[rid]
        r = random.Random(f"{self.seed}:{rid}:{n}").random()
        acc = 0.0
        for kind in self.KINDS:
            acc += self.faults.get(kind, 0.0)
            if r < acc:
                return kind
        return "ok"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        rid = payload["messages"][-1]["content"].rsplit("rid=", 1)[-1]
        self.counts[rid] += 1
        n = self.counts[rid]
        kind = self.outcome(rid, n)
        self.log.append((self.phase, rid, kind))
        self.payloads[rid] = payload
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if kind == "500":
                return web.Response(status=500, text="injected server error")
            if kind == "429":
                return web.Response(status=429, text="slow down", headers={"Retry-After": "0.01"})
            if kind == "400":
                return web.Response(status=400, text="injected bad request")
            if kind == "hang":
                await asyncio.sleep(self.hang_sec)
            if kind == "conn":
                request.transport.close()
                return web.Response(status=200)
            if kind == "badjson":
                content = '{"caption_id": "x", "claimed_units": [ {"category": "obj'
            elif kind == "schema":
                content = json.dumps({"caption_id": 7, "claimed_units": [{"category": "animal", "unit": "dog"}]})
            else:
                content = json.dumps({"caption_id": rid[:8], "claimed_units": [{"category": "object", "unit": "dog"}]})
            body = {"id": "x", "object": "chat.completion", "model": payload.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}
            return web.json_response(body)
        finally:
            self.inflight -= 1

    async def _main(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        async def health(request: web.Request) -> web.Response:
            return web.json_response({"ok": True})

        app.router.add_get("/health", health)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port)
        await site.start()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> "FaultServer":
        def target() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self._main())
            pending = asyncio.all_tasks(self._loop)
            for t in pending:
                t.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault server did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def read_jsonl(path) -> List[dict]:
    out = []
    with open(path, "rb") as fh:
        for line in fh:
            if line.endswith(b"\n"):
                out.append(json.loads(line))
    return out


def wait_for(pred, timeout: float = 30.0, every: float = 0.02) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(every)
    return False


def ids_by_status(rows: List[dict]) -> Tuple[Counter, Set[str]]:
    ok = Counter(r["request_id"] for r in rows if r["ok"])
    failed = {r["request_id"] for r in rows if not r["ok"]}
    return ok, failed
