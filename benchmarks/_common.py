"""Shared parts of the model-call benchmarks (not a test): a zero-latency OpenAI-compatible endpoint.

``start_server(content, usage)`` starts an aiohttp server in its own process (uvloop when installed)
that answers every ``POST /v1/chat/completions`` with one fixed chat completion whose message is
``content``, and returns ``(process, base_url)`` once ``GET /health`` answers; terminate the process
when done. Used by ``bench_llm_run.py`` (a JSON answer) and ``bench_recap.py`` (a caption).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from typing import Any, Dict, Tuple

SERVER = r'''
import sys
from aiohttp import web
body = sys.stdin.buffer.read()
async def chat(request):
    await request.read()
    return web.Response(body=body, content_type="application/json")
async def health(request):
    return web.Response(text="ok")
app = web.Application(client_max_size=int(sys.argv[2]))
app.router.add_post("/v1/chat/completions", chat)
app.router.add_get("/health", health)
try:
    import uvloop
    uvloop.install()
except ImportError:
    pass
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None, backlog=4096)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(content: str, usage: Dict[str, Any], max_request_bytes: int = 1024 ** 2) -> Tuple[subprocess.Popen, str]:
    """The fixed-answer endpoint (module docstring); ``max_request_bytes`` bounds a request body
    (aiohttp's default 1 MiB; image requests need more)."""
    import urllib.request

    port = free_port()
    body = json.dumps({"id": "x", "object": "chat.completion", "model": "bench-model",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": "stop"}],
                       "usage": usage}).encode()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(max_request_bytes)], stdin=subprocess.PIPE)
    proc.stdin.write(body)
    proc.stdin.close()
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5)
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    raise RuntimeError("benchmark server did not start")
