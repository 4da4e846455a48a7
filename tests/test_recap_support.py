"""Helpers for tests/test_recap_*.py (no tests here).

``VisionFaultServer``: an OpenAI-compatible vision endpoint (aiohttp, 127.0.0.1, random port, in a
background thread). It recognises the test image of each request by its width (image ``i`` is
``10 + i`` pixels wide; data URLs are decoded, file URLs opened) and answers per a plan:

* ``ok`` (default): ``"Test image {i} ...\\n\\nTEXT: none"`` (the runner must strip the block);
* ``500x2``: HTTP 500 on the first two attempts, then ok;
* ``hang1``: the first attempt sleeps ``hang`` seconds (past the client timeout), then ok;
* ``empty``: an empty message, always; ``textnone``: only ``TEXT: none``, always;
* ``500``: HTTP 500 always; ``flaky``: HTTP 500 until :attr:`heal` is set, then ok.

Every call is logged as ``(i, attempt)``; ``latency`` delays every answer.
"""

from __future__ import annotations

import asyncio
import base64
import io
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

from aiohttp import web
from PIL import Image


def make_images(folder: Path, n: int, start: int = 0) -> List[Path]:
    """``img_<i>.png`` of width ``10 + i`` (and height 8), i in [start, start + n)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(start, start + n):
        p = folder / f"img_{i:03d}.png"
        Image.new("RGB", (10 + i, 8), ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256)).save(p)
        out.append(p)
    return out


def image_index(url: str) -> int:
    if url.startswith("data:"):
        data = base64.b64decode(url.split(",", 1)[1])
        with Image.open(io.BytesIO(data)) as im:
            return im.width - 10
    with Image.open(unquote(urlsplit(url).path)) as im:
        return im.width - 10


class VisionFaultServer:
    def __init__(self, plan: Optional[Dict[int, str]] = None, latency: float = 0.0, hang: float = 3.0):
        self.plan = dict(plan or {})
        self.latency = latency
        self.hang = hang
        self.heal = False
        self.log: List[Tuple[int, int]] = []
        self.payloads: List[dict] = []
        self.attempts: Counter = Counter()
        self._lock = threading.Lock()
        self.url = ""
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._thread: Optional[threading.Thread] = None

    def calls(self, i: int) -> int:
        return sum(1 for j, _ in self.log if j == i)

    async def _chat(self, request: web.Request) -> web.Response:
        payload = await request.json()
        url = next(p["image_url"]["url"] for m in payload["messages"] if m["role"] == "user"
                   for p in m["content"] if p.get("type") == "image_url")
        i = image_index(url)
        with self._lock:
            self.attempts[i] += 1
            attempt = self.attempts[i]
            self.log.append((i, attempt))
            self.payloads.append({k: v for k, v in payload.items() if k != "messages"})
        if self.latency:
            await asyncio.sleep(self.latency)
        mode = self.plan.get(i, "ok")
        if mode == "500" or (mode == "500x2" and attempt <= 2) or (mode == "flaky" and not self.heal):
            return web.json_response({"error": {"message": "injected"}}, status=500)
        if mode == "hang1" and attempt == 1:
            await asyncio.sleep(self.hang)
        content = {"empty": "", "textnone": "TEXT: none"}.get(mode, f"Test image {i} shows a flat colour.\n\nTEXT: none")
        return web.json_response({
            "id": "x", "object": "chat.completion", "model": payload["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100 + i, "completion_tokens": 7, "total_tokens": 107 + i},
        })

    def __enter__(self) -> "VisionFaultServer":
        ready = threading.Event()

        def target() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_post("/v1/chat/completions", self._chat)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
            self._loop = loop
            self._stop = asyncio.Event()
            ready.set()
            loop.run_until_complete(self._stop.wait())
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=target, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)


def wait_for(cond, timeout: float = 30.0, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False
