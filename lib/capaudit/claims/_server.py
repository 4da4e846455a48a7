"""In-process ``capaudit serve`` for the claims stage: the llm layer's aiohttp app
(:func:`capaudit.llm.server.make_app`) run on 127.0.0.1 on a free port in a daemon thread.

The llm layer exposes only the blocking ``serve()``; this context manager is the missing
background form (no HTTP client code here: requests go through ``capaudit.llm.client``).
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import contextmanager
from typing import Iterator, List, Optional


@contextmanager
def background_server(backends: List[str], host: str = "127.0.0.1", port: int = 0, workers: int = 1,
                      start_timeout: float = 30.0) -> Iterator[str]:
    """Serve ``backends`` while the block runs; yields the base URL ``http://host:port``."""
    from aiohttp import web

    from capaudit.llm.server import make_app

    app = make_app(backends, workers=workers)
    ready = threading.Event()
    box: dict = {}

    def target() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        try:
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, host, port)
            loop.run_until_complete(site.start())
            sock = site._server.sockets[0]  # type: ignore[union-attr]
            box["port"] = sock.getsockname()[1]
            box["stop"] = asyncio.Event()
            box["loop"] = loop
        except BaseException as exc:  # reported to the caller
            box["err"] = exc
            ready.set()
            loop.close()
            return
        ready.set()
        try:
            loop.run_until_complete(box["stop"].wait())
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    th = threading.Thread(target=target, name="capaudit-claims-serve", daemon=True)
    th.start()
    if not ready.wait(start_timeout):
        raise RuntimeError(f"capaudit serve: server did not start within {start_timeout} s")
    if "err" in box:
        raise RuntimeError(f"capaudit serve: could not start on {host}:{port}: {box['err']}") from box["err"]
    try:
        yield f"http://{host}:{box['port']}"
    finally:
        loop: Optional[asyncio.AbstractEventLoop] = box.get("loop")
        if loop is not None:
            loop.call_soon_threadsafe(box["stop"].set)
        th.join(timeout=10.0)
