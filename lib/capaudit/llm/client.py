"""Async OpenAI-compatible client for JSON-schema requests (spec §4.3, §5.2; fixes §13.5-6).

``run_requests`` streams request rows (a JSONL path or any iterable of row dicts) to one or more
``/v1/chat/completions`` endpoints and appends one response row per finished request to a
``ResponseStore``.

Behaviour
* Concurrency: ``concurrency`` worker coroutines pull from the input iterator, so at most
  ``concurrency`` requests are in flight and in memory, whatever the input size (a semaphore
  with one task per row would hold every row). The id set (answered + launched) grows with the
  input, about 100 bytes per id.
* Transport: ``fast`` (default), :mod:`capaudit.llm.http` (keep-alive HTTP/1.1 pools, one per
  URL), or ``openai``, the ``openai`` package's ``AsyncOpenAI`` (:mod:`capaudit.llm.openai_transport`,
  which documents how the SDK's retry and timeout rules map onto these); same request bodies, same
  response rows. ``timeout`` is the deadline of one attempt, connect to last byte.
* Endpoints: each attempt goes to the least-loaded base URL (fewest in flight, ties round-robin);
  a URL with 3 consecutive connection errors/timeouts is skipped for a growing cool-down
  (1 s, 2 s, ... 30 s) unless all are cooling down. Base URLs may be ``http://h:p``,
  ``http://h:p/v1`` or the full ``.../v1/chat/completions``.
* Retries (``retries`` = extra attempts): connection errors, timeouts, HTTP 429 and 5xx are
  retried with exponential backoff ``min(backoff_max, backoff_base * 2**k)`` times a jitter factor
  in [0.5, 1.5) (``Retry-After`` of a 429 is honoured up to ``backoff_max``). Other 4xx are not
  retried. Output that does not parse, violates the schema or a task rule is **re-asked**
  ``reasks`` times (default 1): with greedy decoding a re-ask usually repeats the answer, so the
  bound is small, but batching non-determinism and sampled decoding make one retry worthwhile.
  The final failure is recorded with ``ok: false``, ``error`` (reason) and ``error_kind``.
* Parsing: ``choices[0].message.content`` is parsed with ``json.loads(strict=False)`` (after a
  strict fast path; one Markdown code fence is tolerated), then validated against the row's
  ``schema`` and the task's registered rules (``capaudit.llm.validate``).
* Resume: ids answered in the store are skipped (``resume=True``); ``only_failed=True`` asks only
  ids whose rows are all failures; an id repeated in the input is asked once. With
  ``resume=False`` the store must be empty (the caller decides whether to delete it).
* Stop: SIGINT/SIGTERM (first) stops launching new requests and waits up to ``drain_timeout``
  seconds for those in flight; a second signal (or the timeout) cancels them. Cancelled
  requests are not recorded, so the store stays consistent and a ``--resume`` run asks them again.
  A worker that raises stops the run the same way, then its exception is re-raised.
* Progress: a tqdm bar on stderr with rate and ETA (``progress=False`` to silence).

Extension point: :class:`RequestRun` holds all of the above (router, pools, retries, backoff,
re-asks, stop, drain, stats) for one run; its :meth:`~RequestRun.interpret` hook decides what a
message content means — JSON mode here (``llm run``), free-text mode in :class:`TextRequestRun`
(an empty answer fails with kind ``empty``), which the captioning runner (:mod:`capaudit.recap.runner`)
subclasses with its own bodies, rows and feeder. :func:`utc_now`, :func:`clip_text`,
:func:`run_loop` and :func:`run_blocking` are the clock, error clipping and event-loop helpers both use.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import (Any, Awaitable, Callable, ClassVar, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Set, Tuple, TypeVar, Union)


from capaudit.errors import CapauditError
from capaudit.io.canonical_json import dumps_bytes, loads, loads_lenient
from capaudit.llm.cards import fetch_cards
from capaudit.llm.dialects import DIALECTS, build_payload
from capaudit.llm.http import Pool
from capaudit.llm.requests import check_request, count_lines, iter_request_lines, parse_request_line
from capaudit.llm.store import ResponseStore, record_answerers
from capaudit.llm.context_check import (CONTEXT_KIND, TOKENIZE_TIMEOUT_S, ContextUncounted, context_limit,
                                        tokenize_body, tokenize_url)
from capaudit.llm.context_check import refusal as context_refusal_reason
from capaudit.llm.validate import DEFAULT_RULES, TaskRules, ValidatorCache, load_validator

class EndpointUnavailable(CapauditError):
    """An endpoint cannot answer at all (unreachable, model not served, backend unavailable)."""


TRANSPORTS = ("fast", "openai")
TRANSIENT_KINDS = frozenset({"connection", "timeout", "http_retryable"})
OUTPUT_KINDS = frozenset({"parse", "schema", "rule", "empty"})  # re-asked (``reasks``)
ENDPOINT_STATUSES = frozenset({401, 403, 404})  # the endpoint, not the request, is at fault
#: error codes of servers that say a backend can never answer here (``capaudit serve``): not retried
UNAVAILABLE_CODES = frozenset({"backend_unavailable"})
MAX_ERROR_CHARS = 2000


@dataclass
class RequestStats:
    """Counts kept by :meth:`RequestRun.send` (requests sent, their outcomes and attempts)."""

    sent: int = 0
    answered: int = 0
    failed: int = 0
    failed_by_kind: Dict[str, int] = field(default_factory=dict)
    attempts: int = 0
    retries: int = 0
    reasks: int = 0
    cancelled: int = 0
    interrupted: bool = False
    elapsed_sec: float = 0.0
    #: requests counted against the model's context by the server's ``/tokenize`` before sending
    context_checked: int = 0
    #: why the context check stopped for the rest of the run (``None``: it never stopped)
    context_check_off: Optional[str] = None
    #: the first failure, naming the endpoint and model that gave it (None when nothing failed)
    first_failure: Optional[str] = None

    #: key of :attr:`rate` in :meth:`to_dict`
    RATE_KEY: ClassVar[str] = "rate_per_sec"

    @property
    def rate(self) -> float:
        """Finished (answered + failed) requests per second."""
        return (self.answered + self.failed) / self.elapsed_sec if self.elapsed_sec > 0 else 0.0

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d[self.RATE_KEY] = round(self.rate, 3)
        d["elapsed_sec"] = round(self.elapsed_sec, 3)
        return d


@dataclass
class RunStats(RequestStats):
    """Counts of one ``run_requests`` call."""

    input_rows: int = 0
    skipped_answered: int = 0
    skipped_duplicate: int = 0
    skipped_not_failed: int = 0


def endpoint_url(url: str) -> str:
    """``.../v1/chat/completions`` for a base URL given with or without ``/v1``."""
    u = url.strip().rstrip("/")
    if not u.startswith(("http://", "https://")):
        raise ValueError(f"URL {url!r} must start with http:// or https://")
    if u.endswith("/chat/completions"):
        return u
    if u.endswith("/v1"):
        return u + "/chat/completions"
    return u + "/v1/chat/completions"


class _Router:
    """Least-loaded choice among endpoints with a simple cool-down for failing ones."""

    def __init__(self, urls: Sequence[str]):
        self.urls = [endpoint_url(u) for u in urls]
        if not self.urls:
            raise ValueError("at least one --url is needed")
        n = len(self.urls)
        self.inflight = [0] * n
        self.fails = [0] * n
        self.down_until = [0.0] * n
        self._rr = 0

    def pick(self) -> int:
        n = len(self.urls)
        if n == 1:
            self.inflight[0] += 1
            return 0
        now = time.monotonic()
        start = self._rr
        self._rr = (start + 1) % n
        best = -1
        for k in range(n):
            i = (start + k) % n
            if self.down_until[i] > now:
                continue
            if best < 0 or self.inflight[i] < self.inflight[best]:
                best = i
        if best < 0:
            best = min(range(n), key=self.down_until.__getitem__)
        self.inflight[best] += 1
        return best

    def release(self, i: int, transport_failed: bool) -> None:
        self.inflight[i] -= 1
        if transport_failed:
            self.fails[i] += 1
            if self.fails[i] >= 3:
                self.down_until[i] = time.monotonic() + min(30.0, 2.0 ** (self.fails[i] - 3))
        elif self.fails[i]:
            self.fails[i] = 0


_STAMP = [-1, ""]


def utc_now() -> str:
    """UTC time as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (the seconds prefix is cached)."""
    t = time.time()
    sec = int(t)
    if sec != _STAMP[0]:
        _STAMP[0], _STAMP[1] = sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return f"{_STAMP[1]}.{int((t - sec) * 1000):03d}Z"


def clip_text(text: Any, n: int = MAX_ERROR_CHARS) -> str:
    """``text`` (bytes are decoded as UTF-8, others ``str()``-ed) cut to ``n`` characters, saying how many more."""
    s = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
    return s if len(s) <= n else s[:n] + f"... [{len(s) - n} more chars]"


RequestsInput = Union[str, Path, Iterable[Mapping[str, Any]]]
#: What :meth:`RequestRun.interpret` returns: ``(value, error_kind, reason)``; ``error_kind`` None = answered.
Interpretation = Tuple[Any, Optional[str], Optional[str]]


def _iter_input(requests: RequestsInput) -> Iterator[Tuple[str, Dict[str, Any]]]:
    if hasattr(requests, "iter_request_rows"):  # e.g. a byte range of a request file (engine shards)
        yield from requests.iter_request_rows()  # type: ignore[union-attr]
        return
    if isinstance(requests, (str, Path)):
        for lineno, line in iter_request_lines(requests):
            where = f"{requests}:{lineno}"
            yield where, parse_request_line(line, where)
    else:
        for i, row in enumerate(requests):
            where = f"requests[{i}]"
            yield where, check_request(dict(row) if not isinstance(row, dict) else row, where)


class RequestRun:
    """One run against OpenAI-compatible endpoints: routing, retries, backoff, re-asks, stop, stats.

    :meth:`send` POSTs a prepared chat-completion body until it is answered or fails for good (module
    docstring) and appends one response row to ``store``; :meth:`drive` runs worker coroutines under
    the stop rules (signals, drain, cancel). ``run_requests`` feeds it request rows
    (:meth:`source`, :meth:`worker`); other callers (the captioning runner) call :meth:`send` with
    bodies of their own.

    Hooks for subclasses:

    * :meth:`interpret` turns the message content of a chat completion into the recorded value or a
      failure. Here: **JSON mode** (``llm run``): parse, then validate against the request's
      ``schema`` and the task's rules. :class:`TextRequestRun`: **free-text mode**.
    * :meth:`response_row` shapes the row appended to the store (default: the ``llm run`` row).
    * :meth:`progress_postfix`: the counts shown on the progress bar.

    Output failures whose kind is in :data:`OUTPUT_KINDS` are re-asked ``reasks`` times; transport
    failures (``connection``, ``timeout``, HTTP 429/5xx) are retried ``retries`` times with backoff.
    """

    def __init__(self, store: ResponseStore, urls: Sequence[str], model: str, *, concurrency: int = 8,
                 timeout: float = 240.0, retries: int = 3, reasks: int = 1, backoff_base: float = 0.5,
                 backoff_max: float = 30.0, api_key: Optional[str] = None, seed: Optional[int] = None,
                 transport: str = "fast", dialect: str = "vllm", rules: Optional[TaskRules] = None,
                 allow_model_mismatch: bool = False, stats: Optional[RequestStats] = None):
        if transport not in TRANSPORTS:
            raise ValueError(f"unknown transport {transport!r}; expected one of {', '.join(TRANSPORTS)}")
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if timeout <= 0:
            raise ValueError("timeout must be > 0")
        if retries < 0 or reasks < 0:
            raise ValueError("retries and reasks must be >= 0")
        self.store = store
        self.router = _Router(urls)
        self.model = model
        self.concurrency = concurrency
        self.timeout_s = timeout
        self.retries = retries
        self.dialect = dialect
        self.reasks = reasks
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.headers = {"Content-Type": "application/json", "Authorization": f"Bearer {api_key or 'sk-fake'}"}
        self.allow_model_mismatch = allow_model_mismatch
        self.rules = rules or DEFAULT_RULES
        self.transport = transport
        self.vcache = ValidatorCache()
        self.rng = random.Random(seed)
        self.stats: Any = stats if stats is not None else RunStats()
        self.stop = asyncio.Event()
        self.bar: Any = None
        self.input_error: Optional[BaseException] = None
        # probe: the run's first request is sent alone; if it fails for an endpoint reason, stop
        self.probe = True
        self._probe_rid: Optional[str] = None
        self._probe_done = asyncio.Event()
        self.endpoint_error: Optional[EndpointUnavailable] = None
        # context check (capaudit.llm.context_check): set by arun_requests from the recorded cards
        self.context_limit: Optional[int] = None
        self._tokenize_pools: Dict[int, Any] = {}
        self._tokenize_turn = 0

    # -- hooks ----------------------------------------------------------------------------------
    def interpret(self, text: Any, finish_reason: Any, req: Optional[Mapping[str, Any]]) -> Interpretation:
        """JSON mode: ``text`` (the message content) parsed with ``json.loads(strict=False)`` (one
        Markdown fence tolerated), valid against ``req["schema"]`` and the rules of ``req["task"]``.
        Returns ``(parsed, None, None)``, or ``(parsed or None, kind, reason)`` with kind ``parse``,
        ``schema`` or ``rule``."""
        if not isinstance(text, str) or not text.strip():
            return None, "parse", f"empty message content (finish_reason={finish_reason!r})"
        try:
            parsed = loads_lenient(text)
        except ValueError as exc:
            return None, "parse", f"invalid JSON ({exc}; finish_reason={finish_reason!r})"
        errs = self.vcache.get(req["schema"]).errors(parsed)
        if errs:
            return parsed, "schema", "; ".join(errs)
        rule_errs = self.rules.errors(str(req.get("task", "")), parsed, req)
        if rule_errs:
            return parsed, "rule", "; ".join(rule_errs[:20])
        return parsed, None, None

    def response_row(self, row: Dict[str, Any], finish_reason: Any, extra: Any) -> Dict[str, Any]:
        """The row to append for a finished request. ``row`` is the ``llm run`` row (``request_id, ok,
        status, attempts, started_at, elapsed_sec, model, usage, response_text, parsed`` (the value of
        :meth:`interpret`), ``error, error_kind, request_hash``); ``extra`` is what the caller gave
        :meth:`send`. Default: ``row`` as it is."""
        return row

    def progress_postfix(self) -> Dict[str, Any]:
        """Counts shown beside the progress bar."""
        s = self.stats
        return {"ok": s.answered, "failed": s.failed, "retries": s.retries}

    # -- llm run's feeder -----------------------------------------------------------------------
    def source(self, requests: RequestsInput, answered: Set[str], only: Optional[Set[str]]) -> Iterator[Dict[str, Any]]:
        """Request rows still to ask (skips answered, repeated and — with ``only`` — not-failed ids)."""
        st = self.stats
        model = self.model
        bar = self.bar
        launched: Set[str] = set()
        for where, row in _iter_input(requests):
            st.input_rows += 1
            rid = row["request_id"]
            if rid in launched:
                st.skipped_duplicate += 1
            elif rid in answered:
                st.skipped_answered += 1
            elif only is not None and rid not in only:
                st.skipped_not_failed += 1
            else:
                hint = row.get("model_hint")
                if hint is not None and hint != model and not self.allow_model_mismatch:
                    raise ValueError(
                        f"{where}: field 'model_hint' is {hint!r} but the run uses model {model!r} "
                        "(the request id hashes the model; rebuild the requests or pass --allow-model-mismatch)"
                    )
                launched.add(rid)
                yield row
                continue
            if bar is not None:
                bar.update(1)

    async def worker(self, it: Iterator[Dict[str, Any]], pools: Sequence[Pool]) -> None:
        """Ask request rows from ``it`` one at a time until it ends or the run stops."""
        while not self.stop.is_set():
            try:
                req = next(it)
            except StopIteration:
                return
            except BaseException as exc:  # bad input row: stop launching, let others drain
                if self.input_error is None:
                    self.input_error = exc
                self.stop.set()
                return
            await self.one(req, pools)

    async def one(self, req: Dict[str, Any], pools: Sequence[Pool]) -> None:
        """Ask one request row (its body per ``dialect``); a prompt over the model's context is refused
        before it is sent (:meth:`context_refusal`)."""
        body = dumps_bytes(build_payload(req, self.model, self.dialect))
        reason = await self.context_refusal(req)
        if reason is not None:
            self.refuse(req["request_id"], body, CONTEXT_KIND, reason)
            return
        await self.send(req["request_id"], body, pools, req)

    async def context_refusal(self, req: Mapping[str, Any]) -> Optional[str]:
        """Why ``req`` does not fit the model's context, counted by ``/tokenize`` (the endpoints in
        turn; every endpoint serves the same model and template) (``None``: it fits, or there is no
        limit to check against). A count that cannot be had (not 200, no count, no answer within
        :data:`TOKENIZE_TIMEOUT_S`) turns the check off for the rest of the run, saying why in
        :attr:`RunStats.context_check_off`; the requests then go to the server as they are."""
        limit = self.context_limit  # read once: another request may turn the check off meanwhile
        if limit is None or "messages" not in req:
            return None
        idx = self._tokenize_turn % len(self.router.urls)
        self._tokenize_turn += 1
        pool = self._tokenize_pools.get(idx)
        if pool is None:
            pool = self._tokenize_pools[idx] = Pool(tokenize_url(self.router.urls[idx]), self.headers,
                                                    max_idle=self.concurrency)
        try:
            resp = await pool.post(tokenize_body(req, self.model), min(TOKENIZE_TIMEOUT_S, self.timeout_s))
        except (OSError, asyncio.TimeoutError) as exc:
            self.context_check_stops(f"{pool.url}: {type(exc).__name__ or 'timeout'} {clip_text(exc, 200)}".strip())
            return None
        try:
            reason = context_refusal_reason(resp.status, resp.body, req, limit)
        except ContextUncounted as exc:
            self.context_check_stops(f"{pool.url}: {exc}")
            return None
        self.stats.context_checked += 1
        return reason

    def context_check_stops(self, why: str) -> None:
        """Turn the context check off for the rest of the run (the first reason is kept)."""
        self.context_limit = None
        if self.stats.context_check_off is None:
            self.stats.context_check_off = why

    def refuse(self, rid: str, body: bytes, kind: str, reason: str, extra: Any = None) -> None:
        """Record a request that is not sent: a failed row naming why, counted like any failure
        (``extra`` goes to :meth:`response_row`, as with :meth:`send`)."""
        st = self.stats
        st.failed += 1
        st.failed_by_kind[kind] = st.failed_by_kind.get(kind, 0) + 1
        if st.first_failure is None:
            st.first_failure = f"{self.router.urls[0]} (model {self.model}), request {rid}: {clip_text(reason, 300)}"
        row = {"request_id": rid, "ok": False, "status": None, "attempts": 0, "started_at": utc_now(),
               "elapsed_sec": 0.0, "model": self.model, "usage": None, "response_text": None, "parsed": None,
               "error": clip_text(reason), "error_kind": kind, "request_hash": _hash(body)}
        self.store.append(self.response_row(row, None, extra))
        if self.bar is not None:
            self.bar.update(1)

    # -- transport ------------------------------------------------------------------------------
    def make_pools(self) -> List[Any]:
        """One connection pool per endpoint URL, of the selected transport."""
        if self.transport == "openai":
            from capaudit.llm.openai_transport import OpenAIPool

            return [OpenAIPool(u, self.headers, max_connections=self.concurrency) for u in self.router.urls]
        return [Pool(u, self.headers, max_idle=self.concurrency) for u in self.router.urls]

    @staticmethod
    async def close_pools(pools: Sequence[Any]) -> None:
        """Close the pools of :meth:`make_pools`."""
        for p in pools:
            if hasattr(p, "aclose"):
                await p.aclose()
            else:
                p.close()

    async def _sleep(self, delay: float) -> None:
        if delay <= 0:
            return
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=delay)
        except asyncio.TimeoutError:
            pass

    def _retryable_status(self, status: Optional[int], headers: Mapping[str, str]) -> bool:
        if status is None:
            return False
        if self.transport == "openai":
            from capaudit.llm.openai_transport import should_retry

            return should_retry(status, headers)
        return status == 429 or status >= 500

    def _backoff(self, k: int, retry_after: Optional[float]) -> float:
        if retry_after is not None:
            return min(self.backoff_max, max(0.0, retry_after))
        return min(self.backoff_max, self.backoff_base * (2.0 ** k)) * (0.5 + self.rng.random())

    async def send(self, rid: str, body: bytes, pools: Sequence[Any], req: Optional[Mapping[str, Any]] = None,
                   extra: Any = None) -> None:
        """POST ``body`` (a chat-completion request) until it is answered or fails for good and append
        one row (:meth:`response_row`) to the store; counts go to :attr:`stats`. ``req`` is passed to
        :meth:`interpret`, ``extra`` to :meth:`response_row`. A cancelled send records nothing."""
        st = self.stats
        if self.probe and not self._probe_done.is_set():
            if self._probe_rid is not None:  # the probe is in flight: wait for its verdict
                await self._probe_done.wait()
                if self.endpoint_error is not None or self.stop.is_set():
                    return
            else:
                self._probe_rid = rid
        st.sent += 1
        try:
            await self._send(rid, body, pools, req, extra)
        except asyncio.CancelledError:
            st.cancelled += 1
            raise
        finally:
            if rid == self._probe_rid:
                self._probe_done.set()

    async def _send(self, rid: str, body: bytes, pools: Sequence[Any], req: Optional[Mapping[str, Any]],
                    extra: Any) -> None:
        st = self.stats
        started_at = utc_now()
        t0 = time.monotonic()
        attempts = 0
        transient_left = self.retries
        reasks_left = self.reasks
        k = 0
        while True:
            attempts += 1
            st.attempts += 1
            kind: Optional[str] = None
            reason: Optional[str] = None
            status: Optional[int] = None
            raw = b""
            retry_after: Optional[float] = None
            resp_headers: Mapping[str, str] = {}
            idx = self.router.pick()
            transport_failed = False
            try:
                resp = await pools[idx].post(body, self.timeout_s)
                status = resp.status
                raw = resp.body
                resp_headers = resp.headers
                if self.transport == "openai":
                    if status >= 400:
                        from capaudit.llm.openai_transport import retry_after_seconds

                        retry_after = retry_after_seconds(resp.headers)
                elif status == 429:
                    ra = resp.headers.get("retry-after")
                    if ra:
                        try:
                            retry_after = float(ra)
                        except ValueError:
                            retry_after = None
            except asyncio.TimeoutError:
                kind, reason, transport_failed = "timeout", f"no complete response within {self.timeout_s:g} s", True
            except OSError as exc:
                kind, reason, transport_failed = "connection", f"{type(exc).__name__}: {clip_text(exc, 500)}", True
            finally:
                self.router.release(idx, transport_failed)

            text: Any = None
            value: Any = None
            usage: Any = None
            resp_model: Any = None
            finish: Any = None
            degraded: Any = None  # capaudit serve's notes on a backend answering with less
            if kind is None and status is not None and status >= 400:
                kind = "http"
                reason = f"HTTP {status}: {clip_text(raw, 1000)}"
            elif kind is None:
                try:
                    env = loads(raw)
                    choice = env["choices"][0]
                    text = choice["message"]["content"]
                    usage = env.get("usage")
                    resp_model = env.get("model")
                    finish = choice.get("finish_reason")
                    degraded = env.get("capaudit_degraded")
                except Exception:
                    kind, reason = "parse", f"response is not a chat completion: {clip_text(raw, 500)}"
                else:
                    value, kind, reason = self.interpret(text, finish, req)

            if kind is not None:
                retryable = kind in ("connection", "timeout") or (
                    kind == "http" and self._retryable_status(status, resp_headers) and not never_answers(raw))
                if not self.stop.is_set():
                    if retryable and transient_left > 0:
                        transient_left -= 1
                        st.retries += 1
                        honour = status == 429 or (self.transport == "openai" and retry_after is not None
                                                   and retry_after > 0)
                        await self._sleep(self._backoff(k, retry_after if honour else None))
                        k += 1
                        if not self.stop.is_set():
                            continue
                    elif kind in OUTPUT_KINDS and reasks_left > 0:
                        reasks_left -= 1
                        st.reasks += 1
                        continue
                st.failed += 1
                st.failed_by_kind[kind] = st.failed_by_kind.get(kind, 0) + 1
                if st.first_failure is None:
                    where = self.router.urls[idx] if idx < len(self.router.urls) else "?"
                    st.first_failure = f"{where} (model {self.model}), request {rid}: {clip_text(reason, 300)}"
                if rid == self._probe_rid and endpoint_failure(kind, status, raw) and not self.stop.is_set():
                    url = self.router.urls[idx] if idx < len(self.router.urls) else "?"
                    self.endpoint_error = EndpointUnavailable(
                        f"{url} (model {self.model}) cannot answer the run's first request {rid}: {clip_text(reason, 600)}"
                        f"; nothing more was sent")
                    self.stop.set()
            else:
                st.answered += 1
            row = {
                "request_id": rid, "ok": kind is None, "status": status, "attempts": attempts,
                "started_at": started_at, "elapsed_sec": round(time.monotonic() - t0, 4),
                "model": resp_model or self.model, "usage": usage, "response_text": text, "parsed": value,
                "error": None if kind is None else clip_text(reason), "error_kind": kind,
                "request_hash": _hash(body),
            }
            if degraded:
                row["capaudit_degraded"] = degraded
            self.store.append(self.response_row(row, finish, extra))
            if self.bar is not None:
                self.bar.update(1)
            return

    # -- running --------------------------------------------------------------------------------
    def open_progress(self, total: Optional[int], unit: str, desc: str) -> None:
        """A tqdm bar on stderr (rate and ETA) in :attr:`bar`."""
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, mininterval=0.5, smoothing=0.1,
                        dynamic_ncols=True)

    def close_progress(self) -> None:
        """Final counts on the bar, then close it (no-op without a bar)."""
        if self.bar is not None:
            self.bar.set_postfix(**self.progress_postfix(), refresh=False)
            self.bar.close()

    async def drive(self, workers: Iterable[Awaitable[None]], *, drain_timeout: float = 30.0,
                    handle_signals: bool = True, on_stop: Optional[Callable[[], None]] = None) -> None:
        """Run ``workers`` (coroutines) to the end under the stop rules of the module docstring.

        The first SIGINT/SIGTERM (handled when ``handle_signals`` and in the main thread) sets
        ``stats.interrupted`` and :attr:`stop`; a second cancels the workers. Once :attr:`stop` is set
        (by a signal, a worker, or a worker that raised), ``on_stop()`` is called (e.g. to wake idle
        workers), workers get ``drain_timeout`` seconds to finish what is in flight, and the rest are
        cancelled. The first exception a worker raised (other than cancellation) is re-raised.
        """
        loop = asyncio.get_running_loop()
        tasks: List[asyncio.Future] = [asyncio.ensure_future(w) for w in workers]
        installed: List[int] = []
        signals_seen = [0]

        def on_signal() -> None:
            signals_seen[0] += 1
            self.stats.interrupted = True
            self.stop.set()
            if signals_seen[0] >= 2:
                for t in tasks:
                    t.cancel()

        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, on_signal)
                    installed.append(sig)
                except (NotImplementedError, RuntimeError, ValueError):
                    pass
        failure: Optional[BaseException] = None
        try:
            pending: Set[asyncio.Future] = set(tasks)
            stop_wait = asyncio.ensure_future(self.stop.wait())
            try:
                while pending:
                    done, _ = await asyncio.wait(pending | {stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                    pending -= done
                    for t in done:
                        if t is not stop_wait and not t.cancelled() and t.exception() is not None and failure is None:
                            failure = t.exception()
                            self.stop.set()
                    if stop_wait in done or failure is not None:
                        break
                if pending:  # stopping: drain in-flight requests, then cancel what is left
                    if on_stop is not None:
                        on_stop()
                    _, still = await asyncio.wait(pending, timeout=drain_timeout)
                    for t in still:
                        t.cancel()
                    await asyncio.gather(*still, return_exceptions=True)
            finally:
                stop_wait.cancel()
                for t in tasks:
                    if not t.done():
                        t.cancel()
                results = await asyncio.gather(*tasks, return_exceptions=True)
            for r in results:
                if failure is None and isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                    failure = r
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)
        if failure is not None:
            raise failure
        if self.endpoint_error is not None and not self.stats.interrupted:
            raise self.endpoint_error


class TextRequestRun(RequestRun):
    """:class:`RequestRun` in **free-text mode**: the answer is the message content as text.

    :meth:`clean` normalises it (default: strip); an answer that is empty, or empty once cleaned,
    fails with kind ``empty`` (re-asked like unparsable output). ``response_row``'s ``parsed`` holds
    the cleaned text. Bodies are the caller's (no schema, no ``dialect``).
    """

    #: what the answer is called in failure reasons
    answer_noun: ClassVar[str] = "answer"

    def clean(self, text: str) -> str:
        """The recorded answer for message content ``text``; ``""`` makes it a failure."""
        return text.strip()

    def interpret(self, text: Any, finish_reason: Any, req: Optional[Mapping[str, Any]]) -> Interpretation:
        if not isinstance(text, str) or not text.strip():
            return None, "empty", f"empty {self.answer_noun} (finish_reason={finish_reason!r})"
        value = self.clean(text)
        if not value:
            return None, "empty", self.cleaned_empty_reason()
        return value, None, None

    def cleaned_empty_reason(self) -> str:
        """Failure reason of an answer that :meth:`clean` made empty."""
        return f"{self.answer_noun} is empty once cleaned"


def endpoint_failure(kind: Optional[str], status: Optional[int], raw: bytes = b"") -> bool:
    """True when a failure says the endpoint cannot answer any request: unreachable, auth refused,
    model not found, or a server that says its backend can never answer. A timeout or a 5xx after
    retries may be this request's alone, so it does not stop a run."""
    if kind == "connection":
        return True
    return kind == "http" and status is not None and (status in ENDPOINT_STATUSES or never_answers(raw))


def never_answers(raw: bytes) -> bool:
    """True when an error body says the backend can never answer (code in :data:`UNAVAILABLE_CODES`)."""
    try:
        err = loads(raw).get("error")
    except Exception:
        return False
    return isinstance(err, Mapping) and err.get("code") in UNAVAILABLE_CODES


def check_endpoints(urls: Sequence[str], model: str, api_key: Optional[str] = None, timeout: float = 10.0) -> None:
    """One ``GET /v1/models`` per endpoint before a batch: a model list without ``model``, or every
    endpoint unreachable, raises :class:`EndpointUnavailable` (one line); one reachable endpoint of
    several is enough (the router avoids dead ones). A server without the route passes."""
    import urllib.error
    import urllib.request

    dead: List[str] = []
    for u in urls:
        url = endpoint_url(u).rsplit("/chat/completions", 1)[0] + "/models"
        rq = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key or 'sk-fake'}"})
        try:
            with urllib.request.urlopen(rq, timeout=timeout) as resp:
                body = resp.read()
        except urllib.error.HTTPError:
            continue  # no /v1/models here: the first request decides
        except (OSError, ValueError) as exc:
            dead.append(f"{u} ({getattr(exc, 'reason', exc)})")
            continue
        try:
            served = [m.get("id") for m in loads(body).get("data", []) if isinstance(m, Mapping)]
        except Exception:
            continue
        if served and model not in served:
            raise EndpointUnavailable(f"{u} does not serve model {model!r} (served: {', '.join(map(str, served))})")
    if dead and len(dead) == len(urls):
        raise EndpointUnavailable(f"endpoint unreachable: {'; '.join(dead)}; start the server or fix --url")


def _hash(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=16).hexdigest()


async def arun_requests(
    requests: RequestsInput,
    store: Union[ResponseStore, str, Path],
    urls: Sequence[str],
    model: str,
    concurrency: int = 8,
    timeout: float = 240.0,
    retries: int = 3,
    dialect: str = "vllm",
    resume: bool = True,
    only_failed: bool = False,
    progress: bool = True,
    *,
    reasks: int = 1,
    backoff_base: float = 0.5,
    backoff_max: float = 30.0,
    api_key: Optional[str] = None,
    allow_model_mismatch: bool = False,
    total: Optional[int] = None,
    drain_timeout: float = 30.0,
    handle_signals: bool = True,
    rules: Optional[TaskRules] = None,
    seed: Optional[int] = None,
    transport: str = "fast",
    probe: bool = True,
    context_check: bool = True,
) -> RunStats:
    """Coroutine form of :func:`run_requests` (use it inside a running event loop).

    ``context_check``: where an endpoint declares the model's context (``max_model_len``), count each
    request's prompt with its ``/tokenize`` and refuse one that does not fit before it is sent
    (:mod:`capaudit.llm.context_check`).

    ``transport``: ``fast`` (our HTTP/1.1 pools) or ``openai`` (the ``openai`` package's client).
    ``probe``: check each endpoint (``GET /v1/models``) and send the first request alone; an
    endpoint that cannot answer raises :class:`EndpointUnavailable` before the batch is sent.
    """
    own_store = not isinstance(store, ResponseStore)
    st_obj = ResponseStore(store) if own_store else store
    run = RequestRun(st_obj, urls, model, concurrency=concurrency, timeout=timeout, retries=retries, reasks=reasks,
                     backoff_base=backoff_base, backoff_max=backoff_max, api_key=api_key, seed=seed,
                     transport=transport, dialect=dialect, rules=rules, allow_model_mismatch=allow_model_mismatch)
    answered, failed = st_obj.scan()
    if not resume and (answered or failed):
        raise ValueError(f"{st_obj.path}: response store already has rows; resume it or remove it first")
    only: Optional[Set[str]] = failed if only_failed else None
    load_validator()  # before any request is in flight (validate.load_validator)
    if probe:
        await asyncio.get_running_loop().run_in_executor(None, check_endpoints, urls, model, api_key)
    run.probe = probe
    # who answers: the model card each endpoint declares for the model, beside the store
    # (capaudit.llm.cards; "unknown" where a server has no /v1/models)
    cards = await asyncio.get_running_loop().run_in_executor(None, partial(fetch_cards, urls, model, api_key, 5.0))
    record_answerers(st_obj.path, cards, fresh=not (answered or failed))
    if context_check:
        run.context_limit = context_limit(cards)
    t_start = time.monotonic()
    if progress:
        if total is None and isinstance(requests, (str, Path)):
            total = count_lines(requests)
        run.open_progress(total, "req", "llm run")

    async def postfix() -> None:
        while True:
            await asyncio.sleep(1.0)
            run.bar.set_postfix(**run.progress_postfix(), refresh=False)

    pf = asyncio.ensure_future(postfix()) if run.bar is not None else None
    it = run.source(requests, answered, only)
    pools = run.make_pools()
    try:
        try:
            await run.drive([run.worker(it, pools) for _ in range(concurrency)], drain_timeout=drain_timeout,
                            handle_signals=handle_signals)
        finally:
            await run.close_pools(pools)
            for tp in run._tokenize_pools.values():
                tp.close()
    finally:
        if pf is not None:
            pf.cancel()
        it.close()
        st_obj.flush()
        if own_store:
            st_obj.close()
        run.stats.elapsed_sec = time.monotonic() - t_start
        run.close_progress()
    if run.input_error is not None:
        raise run.input_error
    return run.stats


def run_requests(
    requests_iter: RequestsInput,
    store: Union[ResponseStore, str, Path],
    urls: Sequence[str],
    model: str,
    concurrency: int = 8,
    timeout: float = 240.0,
    retries: int = 3,
    dialect: str = "vllm",
    resume: bool = True,
    only_failed: bool = False,
    progress: bool = True,
    **kwargs: Any,
) -> RunStats:
    """Send every request not yet answered and record one response row each (module docstring).

    ``requests_iter``: a JSONL path or an iterable of request rows. ``store``: a ``ResponseStore``
    or its path. Runs its own event loop (in a helper thread when called from inside a running loop,
    e.g. a notebook). Extra keyword arguments are those of :func:`arun_requests`.
    """
    coro_args = (requests_iter, store, urls, model, concurrency, timeout, retries, dialect, resume, only_failed, progress)
    return run_blocking(lambda: arun_requests(*coro_args, **kwargs), thread_name="capaudit-llm-run")


T = TypeVar("T")


def run_loop(coro: Awaitable[T]) -> T:
    """Run ``coro`` in a new event loop (uvloop's when it is installed) and return its result."""
    try:
        import uvloop  # optional, faster event loop
    except ImportError:
        return asyncio.run(coro)  # type: ignore[arg-type]
    return uvloop.run(coro) if hasattr(uvloop, "run") else asyncio.run(coro)  # type: ignore[arg-type]


def run_blocking(make_coro: Callable[[], Awaitable[T]], thread_name: str = "capaudit-llm-run") -> T:
    """:func:`run_loop` of ``make_coro()``; inside a running event loop (e.g. a notebook) in a helper
    thread named ``thread_name``, whose exception is re-raised here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return run_loop(make_coro())
    box: Dict[str, Any] = {}

    def target() -> None:
        try:
            box["out"] = run_loop(make_coro())
        except BaseException as exc:  # re-raised in the caller's thread
            box["err"] = exc

    th = threading.Thread(target=target, name=thread_name)
    th.start()
    th.join()
    if "err" in box:
        raise box["err"]
    return box["out"]


__all__ = ["RequestStats", "RunStats", "RequestRun", "TextRequestRun", "Interpretation", "TRANSPORTS",
           "EndpointUnavailable", "check_endpoints", "never_answers",
           "OUTPUT_KINDS", "run_requests", "arun_requests", "endpoint_url", "utc_now", "clip_text",
           "run_loop", "run_blocking"]
