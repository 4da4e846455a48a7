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
* Progress: a tqdm bar on stderr with rate and ETA (``progress=False`` to silence).
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
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union


from capaudit.llm._json import dumps_bytes, loads, loads_lenient
from capaudit.llm.dialects import DIALECTS, build_payload
from capaudit.llm.http import Pool
from capaudit.llm.requests import check_request, count_lines, iter_request_lines, parse_request_line
from capaudit.llm.store import ResponseStore
from capaudit.llm.validate import DEFAULT_RULES, TaskRules, ValidatorCache

TRANSPORTS = ("fast", "openai")
TRANSIENT_KINDS = frozenset({"connection", "timeout", "http_retryable"})
OUTPUT_KINDS = frozenset({"parse", "schema", "rule"})
MAX_ERROR_CHARS = 2000


@dataclass
class RunStats:
    """Counts of one ``run_requests`` call."""

    input_rows: int = 0
    skipped_answered: int = 0
    skipped_duplicate: int = 0
    skipped_not_failed: int = 0
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

    @property
    def rate(self) -> float:
        """Finished (answered + failed) requests per second."""
        return (self.answered + self.failed) / self.elapsed_sec if self.elapsed_sec > 0 else 0.0

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["rate_per_sec"] = round(self.rate, 3)
        d["elapsed_sec"] = round(self.elapsed_sec, 3)
        return d


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


def _utc_now() -> str:
    """UTC time as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (the seconds prefix is cached)."""
    t = time.time()
    sec = int(t)
    if sec != _STAMP[0]:
        _STAMP[0], _STAMP[1] = sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return f"{_STAMP[1]}.{int((t - sec) * 1000):03d}Z"


def _clip(text: Any, n: int = MAX_ERROR_CHARS) -> str:
    s = text.decode("utf-8", "replace") if isinstance(text, (bytes, bytearray)) else str(text)
    return s if len(s) <= n else s[:n] + f"... [{len(s) - n} more chars]"


RequestsInput = Union[str, Path, Iterable[Mapping[str, Any]]]


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


class _Run:
    def __init__(self, store: ResponseStore, urls: Sequence[str], model: str, concurrency: int, timeout: float,
                 retries: int, dialect: str, reasks: int, backoff_base: float, backoff_max: float,
                 api_key: Optional[str], allow_model_mismatch: bool, rules: TaskRules, seed: Optional[int],
                 transport: str = "fast"):
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
        self.rules = rules
        self.transport = transport
        self.vcache = ValidatorCache()
        self.rng = random.Random(seed)
        self.stats = RunStats()
        self.stop = asyncio.Event()
        self.bar: Any = None
        self.input_error: Optional[BaseException] = None

    # ---------------------------------------------------------------------------------------
    def source(self, requests: RequestsInput, answered: Set[str], only: Optional[Set[str]]) -> Iterator[Dict[str, Any]]:
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
            self.stats.sent += 1
            try:
                await self.one(req, pools)
            except asyncio.CancelledError:
                self.stats.cancelled += 1
                raise

    async def _sleep(self, delay: float) -> None:
        if delay <= 0:
            return
        try:
            await asyncio.wait_for(self.stop.wait(), timeout=delay)
        except asyncio.TimeoutError:
            pass

    def make_pools(self) -> List[Any]:
        """One connection pool per endpoint URL, of the selected transport."""
        if self.transport == "openai":
            from capaudit.llm.openai_transport import OpenAIPool

            return [OpenAIPool(u, self.headers, max_connections=self.concurrency) for u in self.router.urls]
        return [Pool(u, self.headers, max_idle=self.concurrency) for u in self.router.urls]

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

    async def one(self, req: Dict[str, Any], pools: Sequence[Pool]) -> None:
        st = self.stats
        rid = req["request_id"]
        body = dumps_bytes(build_payload(req, self.model, self.dialect))
        started_at = _utc_now()
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
                kind, reason, transport_failed = "connection", f"{type(exc).__name__}: {_clip(exc, 500)}", True
            finally:
                self.router.release(idx, transport_failed)

            text: Optional[str] = None
            parsed: Any = None
            usage: Any = None
            resp_model: Any = None
            if kind is None and status is not None and status >= 400:
                kind = "http"
                reason = f"HTTP {status}: {_clip(raw, 1000)}"
            elif kind is None:
                try:
                    env = loads(raw)
                    choice = env["choices"][0]
                    text = choice["message"]["content"]
                    usage = env.get("usage")
                    resp_model = env.get("model")
                except Exception:
                    kind, reason = "parse", f"response is not a chat completion: {_clip(raw, 500)}"
                else:
                    if not isinstance(text, str) or not text.strip():
                        kind = "parse"
                        reason = f"empty message content (finish_reason={choice.get('finish_reason')!r})"
                    else:
                        try:
                            parsed = loads_lenient(text)
                        except ValueError as exc:
                            kind = "parse"
                            reason = f"invalid JSON ({exc}; finish_reason={choice.get('finish_reason')!r})"
                        else:
                            errs = self.vcache.get(req["schema"]).errors(parsed)
                            if errs:
                                kind, reason = "schema", "; ".join(errs)
                            else:
                                rule_errs = self.rules.errors(str(req.get("task", "")), parsed, req)
                                if rule_errs:
                                    kind, reason = "rule", "; ".join(rule_errs[:20])

            if kind is None:
                st.answered += 1
                self.store.append({
                    "request_id": rid, "ok": True, "status": status, "attempts": attempts,
                    "started_at": started_at, "elapsed_sec": round(time.monotonic() - t0, 4),
                    "model": resp_model or self.model, "usage": usage, "response_text": text,
                    "parsed": parsed, "error": None, "error_kind": None, "request_hash": _hash(body),
                })
                if self.bar is not None:
                    self.bar.update(1)
                return

            retryable = kind in ("connection", "timeout") or (kind == "http" and self._retryable_status(status, resp_headers))
            if not self.stop.is_set():
                if retryable and transient_left > 0:
                    transient_left -= 1
                    st.retries += 1
                    honour = status == 429 or (self.transport == "openai" and retry_after is not None and retry_after > 0)
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
            self.store.append({
                "request_id": rid, "ok": False, "status": status, "attempts": attempts,
                "started_at": started_at, "elapsed_sec": round(time.monotonic() - t0, 4),
                "model": resp_model or self.model, "usage": usage, "response_text": text,
                "parsed": parsed, "error": _clip(reason), "error_kind": kind, "request_hash": _hash(body),
            })
            if self.bar is not None:
                self.bar.update(1)
            return



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
) -> RunStats:
    """Coroutine form of :func:`run_requests` (use it inside a running event loop).

    ``transport``: ``fast`` (our HTTP/1.1 pools) or ``openai`` (the ``openai`` package's client).
    """
    own_store = not isinstance(store, ResponseStore)
    st_obj = ResponseStore(store) if own_store else store
    run = _Run(st_obj, urls, model, concurrency, timeout, retries, dialect, reasks, backoff_base, backoff_max,
               api_key, allow_model_mismatch, rules or DEFAULT_RULES, seed, transport)
    answered, failed = st_obj.scan()
    if not resume and (answered or failed):
        raise ValueError(f"{st_obj.path}: response store already has rows; resume it or remove it first")
    only: Optional[Set[str]] = failed if only_failed else None
    t_start = time.monotonic()
    if progress:
        from tqdm.auto import tqdm

        if total is None and isinstance(requests, (str, Path)):
            total = count_lines(requests)
        run.bar = tqdm(total=total, unit="req", desc="llm run", file=sys.stderr, mininterval=0.5, smoothing=0.1,
                       dynamic_ncols=True)

    loop = asyncio.get_running_loop()
    installed: List[int] = []
    tasks: List[asyncio.Task] = []
    signals_seen = [0]

    def on_signal() -> None:
        signals_seen[0] += 1
        run.stats.interrupted = True
        run.stop.set()
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

    async def postfix() -> None:
        while True:
            await asyncio.sleep(1.0)
            s = run.stats
            run.bar.set_postfix(ok=s.answered, failed=s.failed, retries=s.retries, refresh=False)

    pf = asyncio.ensure_future(postfix()) if run.bar is not None else None
    it = run.source(requests, answered, only)
    pools = run.make_pools()
    try:
        try:
            tasks.extend(asyncio.ensure_future(run.worker(it, pools)) for _ in range(concurrency))
            pending: Set[asyncio.Task] = set(tasks)
            stop_wait = asyncio.ensure_future(run.stop.wait())
            try:
                while pending:
                    done, _ = await asyncio.wait(pending | {stop_wait}, return_when=asyncio.FIRST_COMPLETED)
                    pending -= done
                    if stop_wait in done:
                        break
                if pending:  # stopping: drain in-flight requests, then cancel what is left
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
                if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                    raise r
        finally:
            for p in pools:
                if hasattr(p, "aclose"):
                    await p.aclose()
                else:
                    p.close()
    finally:
        if pf is not None:
            pf.cancel()
        for sig in installed:
            loop.remove_signal_handler(sig)
        it.close()
        st_obj.flush()
        if own_store:
            st_obj.close()
        run.stats.elapsed_sec = time.monotonic() - t_start
        if run.bar is not None:
            s = run.stats
            run.bar.set_postfix(ok=s.answered, failed=s.failed, retries=s.retries, refresh=False)
            run.bar.close()
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
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_loop(arun_requests(*coro_args, **kwargs))
    box: Dict[str, Any] = {}

    def target() -> None:
        try:
            box["out"] = _run_loop(arun_requests(*coro_args, **kwargs))
        except BaseException as exc:  # re-raised in the caller's thread
            box["err"] = exc

    th = threading.Thread(target=target, name="capaudit-llm-run")
    th.start()
    th.join()
    if "err" in box:
        raise box["err"]
    return box["out"]


def _run_loop(coro: Any) -> Any:
    try:
        import uvloop  # optional, faster event loop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro) if hasattr(uvloop, "run") else asyncio.run(coro)


__all__ = ["RunStats", "TRANSPORTS", "run_requests", "arun_requests", "endpoint_url"]
