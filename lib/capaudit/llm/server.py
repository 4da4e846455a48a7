"""Local OpenAI-compatible server for offline backends (``capaudit serve``).

Routes: ``POST /v1/chat/completions`` (non-streaming), ``GET /v1/models``, ``GET /health``.
The request's ``model`` selects the backend (``capaudit.llm.backends``); the response's
``model`` is the backend name. The server is the one module that loads the stand-in models
(:mod:`capaudit.standins`, :func:`registry`), and it declares who answers: every ``/v1/models``
entry carries ``capaudit: {kind, version, label, caveat}`` (the backend's model card,
:mod:`capaudit.llm.cards`) and every completion ``capaudit_model`` with the same card. Backends run in a thread pool (``workers`` threads, default 1
so that backends need not be thread-safe). ``usage`` counts whitespace-separated words, not
model tokens (there is no tokenizer). Binds 127.0.0.1 unless told otherwise.

Before it serves, each backend's required system resources are checked
(``BackendRegistry.check``): a missing one stops the server with one line
naming the backend, the resource and its install command, rather than answering every request
with an error. A backend running without an optional resource is served, and every completion
it returns carries the notes in ``capaudit_degraded`` (also on ``/health``). A backend that fails
at request time for want of a resource answers HTTP 503 with code ``backend_unavailable``, which
clients do not retry.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterator, List, Optional, Sequence

from aiohttp import web

from capaudit.io.canonical_json import dumps_bytes, loads
from capaudit.llm.backends import DEFAULT_BACKENDS, BackendRegistry
from capaudit.resources import ResourceMissing

UNAVAILABLE_CODE = "backend_unavailable"


BACKENDS_KEY = web.AppKey("capaudit_backends", list)
DEGRADED_KEY = web.AppKey("capaudit_degraded", list)


def _error(status: int, message: str, code: str, etype: str = "invalid_request_error") -> web.Response:
    body = {"error": {"message": message, "type": etype, "code": code}}
    return web.Response(status=status, body=dumps_bytes(body), content_type="application/json")


def _words(messages: Any) -> int:
    n = 0
    for m in messages if isinstance(messages, list) else []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            n += len(c.split())
        elif isinstance(c, list):
            n += sum(len(str(p.get("text", "")).split()) for p in c if isinstance(p, dict))
    return n


def registry() -> BackendRegistry:
    """The default registry with every stand-in model registered (importing
    :mod:`capaudit.standins` registers them)."""
    import capaudit.standins  # noqa: F401  (registers the stand-ins with DEFAULT_BACKENDS)

    return DEFAULT_BACKENDS


def served_names() -> List[str]:
    """Every backend ``capaudit serve`` can serve (built-ins and stand-ins)."""
    return registry().names()


def served_cards() -> Dict[str, Dict[str, Any]]:
    """Name → the model card ``capaudit serve`` declares for it (``/v1/models``' ``capaudit``), for a
    stage that sets up its requests before a server runs."""
    reg = registry()
    return {n: reg.card(n).to_json() for n in reg.names()}


def make_app(backends: Optional[Sequence[str]] = None, registry: Optional[BackendRegistry] = None,
             workers: int = 1) -> web.Application:
    """aiohttp application serving ``backends`` (all registered ones when ``None``); ``registry``
    defaults to :func:`registry` (built-ins and stand-ins)."""
    reg = registry if registry is not None else _default_registry()
    names = list(backends) if backends else reg.names()
    skipped: List[str] = []
    for n in list(names):
        try:
            reg.check(n)  # a named backend missing a required resource: refuse to serve (one line)
        except ResourceMissing as exc:
            if backends:
                raise
            names.remove(n)  # serving "all": leave out what cannot run, and say so
            skipped.append(f"{n} not served: {exc}")
    fns = {name: reg.get(name) for name in names}
    if not fns:
        raise ValueError("no offline backend to serve" + (f" ({'; '.join(skipped)})" if skipped else ""))
    degraded = {n: reg.degraded(n) for n in names}
    cards = {n: reg.card(n).to_json() for n in names}
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="capaudit-backend")
    created = int(time.time())

    async def health(request: web.Request) -> web.Response:
        notes = [x for n in names for x in degraded[n]]
        return web.json_response({"status": "ok", "models": names, "capaudit_degraded": notes})

    async def models(request: web.Request) -> web.Response:
        data = [{"id": n, "object": "model", "created": created, "owned_by": "capaudit", "capaudit": cards[n]}
                for n in names]
        return web.json_response({"object": "list", "data": data})

    async def chat(request: web.Request) -> web.Response:
        try:
            payload = loads(await request.read())
        except ValueError as exc:
            return _error(400, f"request body is not JSON: {exc}", "invalid_json")
        if not isinstance(payload, dict):
            return _error(400, "request body must be a JSON object", "invalid_body")
        if payload.get("stream"):
            return _error(400, "streaming is not supported by capaudit serve", "stream_unsupported")
        name = payload.get("model")
        fn = fns.get(name) if isinstance(name, str) else None
        if fn is None:
            return _error(404, f"model {name!r} is not served here; served: {', '.join(names)}", "model_not_found")
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "field 'messages' must be a non-empty list", "invalid_messages")
        loop = asyncio.get_running_loop()
        try:
            content = await loop.run_in_executor(pool, fn, messages, payload)
        except ValueError as exc:
            return _error(400, f"backend {name}: {exc}", "backend_rejected")
        except ResourceMissing as exc:  # can never answer here: clients must not retry
            return _error(503, f"backend {name} cannot answer: {exc}", UNAVAILABLE_CODE, "server_error")
        except Exception as exc:  # backend crash → 500 so clients may retry
            return _error(500, f"backend {name} failed: {type(exc).__name__}: {exc}", "backend_error", "server_error")
        if not isinstance(content, str):
            return _error(500, f"backend {name} returned {type(content).__name__}, not str", "backend_error", "server_error")
        prompt_words = _words(messages)
        completion_words = len(content.split())
        body = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": completion_words,
                      "total_tokens": prompt_words + completion_words, "unit": "words"},
            "capaudit_model": cards[name],
        }
        if degraded[name]:
            body["capaudit_degraded"] = degraded[name]
        return web.Response(body=dumps_bytes(body), content_type="application/json")

    async def on_cleanup(app: web.Application) -> None:
        pool.shutdown(wait=False, cancel_futures=True)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    app.on_cleanup.append(on_cleanup)
    app[BACKENDS_KEY] = names
    app[DEGRADED_KEY] = skipped + [x for n in names for x in degraded[n]]
    return app


_default_registry = registry


def serve(host: str = "127.0.0.1", port: int = 8000, backends: Optional[List[str]] = None, workers: int = 1) -> None:
    """Run the server until interrupted (SIGINT/SIGTERM)."""
    app = make_app(backends, workers=workers)
    print(f"capaudit serve: http://{host}:{port}/v1 models={','.join(app[BACKENDS_KEY])}", flush=True)
    for note in app[DEGRADED_KEY]:
        print(f"capaudit serve: WARNING: {note}", flush=True)
    web.run_app(app, host=host, port=port, print=None, access_log=None, handle_signals=True)



@contextmanager
def background_server(backends: List[str], host: str = "127.0.0.1", port: int = 0, workers: int = 1,
                      start_timeout: float = 30.0) -> Iterator[str]:
    """Serve ``backends`` while the block runs; yields the base URL ``http://host:port``."""
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

    th = threading.Thread(target=target, name="capaudit-serve", daemon=True)
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


__all__ = ["make_app", "registry", "serve", "served_cards", "served_names", "background_server"]
