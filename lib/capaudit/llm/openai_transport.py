"""The ``openai`` transport: the ``openai`` package's ``AsyncOpenAI`` client behind our run loop.

``capaudit llm run --transport openai`` sends exactly the same request rows (same JSON body, so
the same ``request_hash``) and records the same response rows as the default ``fast`` transport
(:mod:`capaudit.llm.http`); parsing, schema and task-rule validation, re-asks, the store and
resume are the client's (:mod:`capaudit.llm.client`) and do not change. Use it for hosted APIs
(organisation / project headers from ``OPENAI_ORG_ID`` / ``OPENAI_PROJECT_ID``, the SDK's TLS and
proxy handling, HTTP/2 where its HTTP client offers it); use ``fast`` for local vLLM fleets, where
the SDK's per-request overhead is client CPU that the fast transport does not spend.

How the SDK's retry and timeout semantics map onto ours
* Retries: the SDK's own retries are switched off (``max_retries=0``) because the client's retry
  loop also fails over between endpoints (least-loaded choice, cool-down) and counts attempts into
  the response row; ``--retries`` is the SDK's ``max_retries``. The statuses retried are the SDK's:
  408, 409, 429 and 5xx, and the SDK's ``x-should-retry: true|false`` header overrides the status
  (the fast transport retries 429 and 5xx only). A ``retry-after-ms`` / ``retry-after`` header
  (seconds or an HTTP date) sets the delay of a retryable status, capped at ``--backoff-max``.
  The backoff is ours: ``min(backoff_max, backoff * 2**k)`` times a jitter in [0.5, 1.5).
* Timeout: ``--timeout`` is one attempt's deadline, connect to last byte, as for the fast
  transport. The SDK's ``timeout`` is per phase (connect, read, write, pool), so it is given the
  same value and the attempt is also bounded by an ``asyncio`` deadline.
* Errors: ``APITimeoutError`` → ``timeout``; ``APIConnectionError`` → ``connection``;
  ``APIStatusError`` → an HTTP status response (its body kept for the error text).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import time
from typing import Mapping, Optional

from capaudit.llm.http import Response

#: statuses the SDK retries (``_should_retry``), used by the client for this transport
RETRY_STATUSES = frozenset({408, 409, 429})
_SKIP_HEADERS = frozenset({"content-type", "authorization", "content-length", "host"})


def _import_openai():
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ValueError("--transport openai needs the optional dependency: pip install -e '.[openai]'") from exc
    return openai


def base_url_of(endpoint: str) -> str:
    """``.../v1`` for an endpoint URL ``.../v1/chat/completions``."""
    suffix = "/chat/completions"
    return endpoint[: -len(suffix)] if endpoint.endswith(suffix) else endpoint


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """The SDK's rule: ``x-should-retry`` decides if present, else 408, 409, 429 and 5xx."""
    flag = headers.get("x-should-retry")
    if flag == "true":
        return True
    if flag == "false":
        return False
    return status in RETRY_STATUSES or status >= 500


def retry_after_seconds(headers: Mapping[str, str]) -> Optional[float]:
    """Server-directed delay from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date)."""
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            delay = float(value) / divisor
        except ValueError:
            continue
        return delay if math.isfinite(delay) else None
    value = headers.get("retry-after")
    if value:
        try:
            parsed = email.utils.parsedate_tz(value)
            if parsed is not None:
                return float(email.utils.mktime_tz(parsed) - time.time())
        except (TypeError, ValueError, OverflowError):
            return None
    return None


#: connections per SDK client: the HTTP client's pool scans every connection on each request, so
#: a large ``--concurrency`` is spread over several small pools (round robin)
CONNECTIONS_PER_CLIENT = 32


class OpenAIPool:
    """Same interface as :class:`capaudit.llm.http.Pool`: ``await post(body, timeout)`` → Response.

    Requests go through ``AsyncOpenAI.post("/chat/completions", content=body)``: the SDK's auth,
    default and organisation headers, timeouts and status errors, with the exact request body the
    fast transport sends (no re-serialisation, so the same ``request_hash``). ``max_connections``
    is spread over ``ceil(max_connections / 32)`` clients.
    """

    retry_statuses = RETRY_STATUSES

    def __init__(self, url: str, headers: Mapping[str, str], max_connections: int = 64,
                 default_headers: Optional[Mapping[str, str]] = None):
        import importlib

        openai = _import_openai()
        self.openai = openai
        self.url = url
        auth = str(headers.get("Authorization", ""))
        api_key = auth[7:] if auth.startswith("Bearer ") else (auth or "sk-fake")
        extra = {k: v for k, v in headers.items() if k.lower() not in _SKIP_HEADERS}
        extra.update(default_headers or {})
        limits_cls = type(openai.DEFAULT_CONNECTION_LIMITS)
        n = max(1, -(-max(1, max_connections) // CONNECTIONS_PER_CLIENT))
        per = max(1, -(-max(1, max_connections) // n))
        self.clients = []
        for _ in range(n):
            http = openai.DefaultAsyncHttpxClient(limits=limits_cls(max_connections=per, max_keepalive_connections=per))
            self.clients.append(openai.AsyncOpenAI(base_url=base_url_of(url), api_key=api_key, max_retries=0,
                                                   default_headers=extra or None, http_client=http))
        self.client = self.clients[0]
        self._next = 0
        # the HTTP library the SDK is built on (httpx, or httpx2 in recent releases): its Response type
        try:
            from openai._httpx2 import http_response_types  # openai >= 3: built on httpx2

            self._response_type = http_response_types()[0]
        except ImportError:  # older releases: httpx
            self._response_type = importlib.import_module("httpx").Response
        self._closing: Optional[asyncio.Task] = None

    async def post(self, body: bytes, timeout: float) -> Response:
        """POST the JSON ``body`` with the SDK's low-level ``post`` (raw response back)."""
        openai = self.openai
        client = self.clients[self._next]
        self._next = (self._next + 1) % len(self.clients)
        try:
            http = await asyncio.wait_for(
                client.post("/chat/completions", cast_to=self._response_type, content=body,
                            options={"headers": {"Content-Type": "application/json"}, "timeout": timeout}),
                timeout)
        except openai.APITimeoutError:
            raise asyncio.TimeoutError() from None
        except openai.APIStatusError as exc:
            resp = exc.response
            return Response(int(resp.status_code), {k.lower(): v for k, v in resp.headers.items()}, resp.content)
        except openai.APIConnectionError as exc:
            cause = exc.__cause__
            what = f"{type(cause).__name__}: {cause}" if cause else str(exc)
            raise ConnectionError(f"openai client: {what}") from None
        return Response(int(http.status_code), {k.lower(): v for k, v in http.headers.items()}, await http.aread())

    def close(self) -> None:
        """Close the SDK clients (scheduled on the running loop when there is one)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._closing = loop.create_task(self.aclose())

    async def aclose(self) -> None:
        for c in self.clients:
            await c.close()


__all__ = ["OpenAIPool", "RETRY_STATUSES", "base_url_of", "retry_after_seconds", "should_retry"]
