"""The captioning runner (reference-spec §6; fixes §13.6): images → captions in a resumable store.

Pipeline, all in one event loop except where said:

1. a **reader thread** streams :class:`~capaudit.recap.preprocess.Job` s from the inputs
   (:mod:`capaudit.recap.inputs`), drops repeated image ids (counted), normalises the policy's
   context fields, and hands jobs to the loop through a bounded queue (backpressure: at most
   ``min(2 × concurrency, concurrency + 64)`` jobs wait);
2. ``concurrency`` **sender** coroutines each take a job, have a **worker process**
   (``ProcessPoolExecutor``, spawn) read it, hash it (``image_key = sha256:<hex>``), compute its
   request id and — unless that id is already answered — decode, orient, composite, resize and
   encode it (:func:`~capaudit.recap.preprocess.prepare`), so the event loop never waits on
   Pillow; then POST one chat completion (``model``, ``messages`` = the policy's
   ``[system?, user(text + image)]``, the policy's ``decoding`` as is) through the model-call
   layer's transport (:class:`capaudit.llm.http.Pool`, least-loaded routing over several
   ``--url`` with cool-down, retries with exponential backoff on connection errors, timeouts,
   429 and 5xx — the machinery of :mod:`capaudit.llm.client`, in free-text mode);
3. one **response row** per finished image is appended to the content-addressed store
   (:class:`capaudit.llm.store.ResponseStore`, a sharded directory ``STORE/responses/``).

Request id = ``capaudit.llm.requests.request_id(task="recap_caption", task_version, model,
revision, policy.prompt_version, schema={"type": "string"}, policy.decoding, input={image_key,
image_id, preprocess fingerprint, context})``: a changed image, prompt, policy version, model,
decoding or preprocessing never reuses an old caption.

Outcomes: ``ok: true`` rows carry ``caption`` (the model text stripped and without trailing
``TEXT: none`` blocks, :func:`~capaudit.recap.captions.clean_caption`), ``usage``, ``model``,
``started_at``/``finished_at`` (UTC ``Z``) and ``recap`` (image id, path, key, policy, sizes).
An empty answer (or one that is empty once cleaned) is re-asked ``reasks`` times, then recorded
as ``error_kind: "empty"``; HTTP/timeout/connection failures as in ``llm run``; an image that
cannot be read or decoded as ``error_kind: "image"`` with the reason naming the file. Failures
are never marked done: ``--resume`` asks them again (and skips answered ids without decoding).

Stopping: SIGINT/SIGTERM stops taking new images and drains requests in flight for up to
``drain_timeout`` seconds (a second signal cancels them); unrecorded requests are asked again on
``--resume``. A SIGKILL loses at most the last unflushed batch of rows (flushed every 64 rows or
1 s). ``STORE/run.json`` fixes the store's policy, model, revision, decoding and image mode (a
run with others is refused); ``STORE/run.lock`` keeps a second runner out; ``STORE/runs.jsonl``
gets one line of statistics per run that did any work (with ``error`` when it ended on one). A run
that fails before any work (bad input, a store of another run, ...) leaves nothing behind: what
it created of the store (folder, ``run.json``, ``run.lock``, ``responses/``) is removed again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import concurrent.futures.process  # noqa: F401  (makes cf.process.BrokenProcessPool available)
import hashlib
import multiprocessing
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Union

from capaudit.errors import InputError, LockHeldError
from capaudit.io.canonical_json import dumps_bytes, dumps_line, loads
from capaudit.llm.cards import fetch_cards
from capaudit.llm.context_check import CONTEXT_KIND, context_limit
from capaudit.llm.store import MODELS_SUFFIX, record_answerers
from capaudit.llm.client import (RequestStats, TextRequestRun, check_endpoints, clip_text, endpoint_url, run_blocking,
                                 utc_now)
from capaudit.llm.requests import make_request, request_id
from capaudit.llm.store import ResponseStore

from .captions import clean_caption
from .policies import Policy, normalize_context
from .preprocess import IdTemplate, Job, PrepOptions, Prepared, init_worker, prepare, prepare_in_worker, request_input

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

TASK = "recap_caption"
TASK_VERSION = 1
TEXT_SCHEMA: Dict[str, Any] = {"type": "string"}
RESPONSES_DIR = "responses"
MANIFEST_NAME = "run.json"
LOCK_NAME = "run.lock"
RUNS_LOG = "runs.jsonl"
IDENTITY_KEYS = ("task", "task_version", "policy", "policy_version", "prompt_version", "model", "revision",
                 "decoding", "image_mode", "preprocess")
#: keys of a response row, in order (the llm client's row + ``finished_at``, ``caption``, ``finish_reason``, ``recap``)
ROW_KEYS = ("request_id", "ok", "status", "attempts", "started_at", "finished_at", "elapsed_sec", "model", "usage",
            "response_text", "parsed", "caption", "finish_reason", "error", "error_kind", "request_hash", "recap")
_END = object()


@dataclass
class RecapStats(RequestStats):
    """Counts of one runner call: the llm client's request counts (``sent`` ... ``elapsed_sec``; images,
    not requests, except ``attempts``/``retries``/``reasks``) plus the image side."""

    images: int = 0
    duplicate_ids: int = 0
    duplicate_examples: List[str] = field(default_factory=list)
    skipped_answered: int = 0
    skipped_not_failed: int = 0
    image_failed: int = 0
    image_failed_by_stage: Dict[str, int] = field(default_factory=dict)

    RATE_KEY: ClassVar[str] = "captions_per_sec"

    @property
    def rate(self) -> float:
        """Captions answered per second of run time."""
        return self.answered / self.elapsed_sec if self.elapsed_sec > 0 else 0.0


@dataclass(frozen=True)
class StoreLayout:
    """Files of a recap store folder (module docstring)."""

    root: Path

    @property
    def responses(self) -> Path:
        return self.root / RESPONSES_DIR

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST_NAME

    @property
    def lock(self) -> Path:
        return self.root / LOCK_NAME

    @property
    def runs_log(self) -> Path:
        return self.root / RUNS_LOG

    def response_store(self) -> ResponseStore:
        return ResponseStore(str(self.responses) + os.sep, batch_rows=64, batch_sec=1.0)


def run_identity(policy: Policy, model: str, revision: Optional[str], opts: PrepOptions) -> Dict[str, Any]:
    """What a store is bound to: a run with a different identity must use another store."""
    return {"task": TASK, "task_version": TASK_VERSION, "policy": policy.name, "policy_version": policy.version,
            "prompt_version": policy.prompt_version, "model": model, "revision": revision,
            "decoding": dict(policy.decoding), "image_mode": opts.mode, "preprocess": opts.fingerprint()}


def id_template(policy: Policy, model: str, revision: Optional[str], opts: PrepOptions) -> IdTemplate:
    """The run's :class:`~capaudit.recap.preprocess.IdTemplate`, checked against
    ``capaudit.llm.requests.request_id`` on a probe input (the two must never disagree)."""
    tmpl = IdTemplate.build(TASK, TASK_VERSION, model, revision, policy.prompt_version, TEXT_SCHEMA,
                            dict(policy.decoding), opts.fingerprint())
    probe = ("sha256:" + "0" * 64, "probe-\u00e9", {"general_tags": ["a", "b"], "rating": "g"})
    want = request_id(TASK, TASK_VERSION, model, revision, policy.prompt_version, TEXT_SCHEMA, dict(policy.decoding),
                      request_input(probe[0], probe[1], opts.fingerprint(), probe[2]))
    if tmpl.request_id(*probe) != want:  # pragma: no cover - guards a change of the llm layer's canonical JSON
        raise RuntimeError("recap request ids no longer match capaudit.llm.requests.request_id")
    return tmpl


def request_row(policy: Policy, model: str, revision: Optional[str], opts: PrepOptions, *, image_url: str,
                image_key: str, image_id: str, context: Optional[Mapping[str, Any]] = None,
                meta: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The full ``capaudit.llm.requests`` row of one image (same id as the runner computes)."""
    ctx = dict(context or {})
    return make_request(task=TASK, task_version=TASK_VERSION, model=model, revision=revision,
                        prompt_version=policy.prompt_version, schema=TEXT_SCHEMA,
                        messages=policy.messages(image_url, ctx), decoding=dict(policy.decoding),
                        input=request_input(image_key, image_id, opts.fingerprint(), ctx), meta=meta)


def chat_payload(policy: Policy, model: str, image_url: str, context: Mapping[str, Any]) -> Dict[str, Any]:
    """The POST body: ``model``, ``messages``, and the policy's decoding keys as they are (§6)."""
    payload: Dict[str, Any] = {"model": model, "messages": policy.messages(image_url, context)}
    payload.update(policy.decoding)
    return payload


# -- store identity and lock ------------------------------------------------------------------------
def check_store(layout: StoreLayout, identity: Mapping[str, Any], inputs: Sequence[Any]) -> None:
    """Write ``run.json`` for a new store; refuse a run whose identity differs from it."""
    from capaudit.io.atomic import write_json_atomic

    if layout.manifest.exists():
        try:
            have = loads(layout.manifest.read_bytes())
        except ValueError as exc:
            raise InputError(f"unreadable store manifest ({exc})", path=layout.manifest) from None
        diff = [k for k in IDENTITY_KEYS if have.get(k) != identity.get(k)]
        if diff:
            shown = "; ".join(f"{k}: store {have.get(k)!r}, run {identity.get(k)!r}" for k in diff[:4])
            raise InputError(f"this store belongs to another run ({shown}); use a new --out", path=layout.manifest)
        return
    layout.root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(layout.manifest, {**identity, "created_at": utc_now(), "inputs": list(inputs)})


class _StoreLock:
    def __init__(self, path: Path):
        self.path = path
        self.fh: Any = None

    def __enter__(self) -> "_StoreLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "a+")
        if fcntl is not None:
            try:
                fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                self.fh.close()
                raise LockHeldError(f"{self.path.parent}: another recap run is writing this store") from None
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(f"{os.getpid()}\n")
        self.fh.flush()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.fh is not None:
            self.fh.close()


# -- the HTTP side: the llm client's run in free-text mode -------------------------------------------
class _CaptionRun(TextRequestRun):
    """The llm client's run (router, retries, backoff, re-asks, stop, stats) in free-text mode: the
    answer cleaned by :func:`~capaudit.recap.captions.clean_caption`, recorded as ``caption``."""

    answer_noun = "caption"
    stats: RecapStats

    def clean(self, text: str) -> str:
        return clean_caption(text)

    def cleaned_empty_reason(self) -> str:
        return "caption is empty once the trailing TEXT: block is removed"

    def response_row(self, row: Dict[str, Any], finish_reason: Any, extra: Any) -> Dict[str, Any]:
        row.update(finished_at=utc_now(), caption=row["parsed"], parsed=None, finish_reason=finish_reason, recap=extra)
        return {k: row[k] for k in ROW_KEYS}

    def progress_postfix(self) -> Dict[str, Any]:
        s = self.stats
        return {"ok": s.answered, "failed": s.failed + s.image_failed}

    def record_image_failure(self, prep: Prepared, meta: Dict[str, Any], rid_seed: str) -> None:
        rs = self.stats
        rs.image_failed += 1
        stage = prep.stage or "decode"
        rs.image_failed_by_stage[stage] = rs.image_failed_by_stage.get(stage, 0) + 1
        rid = prep.request_id or ("unread:" + hashlib.blake2b(rid_seed.encode("utf-8"), digest_size=16).hexdigest())
        now = utc_now()
        self.store.append({
            "request_id": rid, "ok": False, "status": None, "attempts": 0, "started_at": now, "finished_at": now,
            "elapsed_sec": 0.0, "model": self.model, "usage": None, "response_text": None, "parsed": None,
            "caption": None, "error": clip_text(prep.error), "error_kind": "image", "recap": {**meta, "stage": stage},
        })


# -- the runner -----------------------------------------------------------------------------------
ImagesInput = Union[Iterable[Job], Sequence[Iterable[Job]]]


def _chain(images: Any) -> Iterable[Job]:
    if isinstance(images, (list, tuple)) and images and not isinstance(images[0], Job):
        for part in images:
            yield from part
    else:
        yield from images


async def arecap(
    images: ImagesInput,
    policy: Policy,
    store: Union[str, Path],
    urls: Sequence[str],
    model: str,
    *,
    revision: Optional[str] = None,
    image_mode: str = "data",
    concurrency: int = 8,
    timeout: float = 180.0,
    retries: int = 3,
    reasks: int = 1,
    workers: int = 2,
    resume: bool = False,
    only_failed: bool = False,
    progress: bool = True,
    backoff_base: float = 2.0,
    backoff_max: float = 30.0,
    api_key: Optional[str] = None,
    drain_timeout: float = 30.0,
    handle_signals: bool = True,
    probe: bool = True,
    metadata: Optional[Mapping[str, Mapping[str, Any]]] = None,
    limit: Optional[int] = None,
    seed: Optional[int] = None,
    prep_options: Optional[PrepOptions] = None,
    inputs_description: Sequence[Any] = (),
    context_check: bool = True,
) -> RecapStats:
    """Coroutine form of :func:`recap` (module docstring). ``context_check``: a request over the
    context the server declares (its image tokens included) is refused before it is sent, as in
    ``llm run`` (:mod:`capaudit.llm.context_check`)."""
    opts = prep_options or PrepOptions(mode=image_mode)
    if workers < 0:
        raise ValueError("workers must be >= 0")
    if not urls:
        raise InputError("at least one --url is needed", field="url")
    for u in urls:
        endpoint_url(u)  # a malformed URL is an error before the store is touched
    if probe:  # an endpoint that is down or does not serve the model: one line, before the store exists
        await asyncio.get_running_loop().run_in_executor(None, check_endpoints, list(urls), model, api_key)
    layout = StoreLayout(Path(store))
    identity = run_identity(policy, model, revision, opts)
    tmpl = id_template(policy, model, revision, opts)
    rstats = RecapStats()
    t_start = time.monotonic()
    from capaudit.io.atomic import check_output_dir

    check_output_dir(layout.root)
    new = _NewParts(layout)
    rstore = layout.response_store()
    try:
        with _StoreLock(layout.lock):
            check_store(layout, identity, inputs_description)
            # who captions: the model card each endpoint declares, beside the responses (capaudit.llm.cards)
            cards = await asyncio.get_running_loop().run_in_executor(None, fetch_cards, list(urls), model, api_key, 5.0)
            record_answerers(str(layout.responses) + os.sep, cards)
            answered, failed = rstore.scan()
            if not resume and (answered or failed):
                raise InputError("the store already has responses; pass --resume to continue it or use a new --out",
                                 path=layout.responses)
            only = frozenset(failed) if only_failed else None
            run = _CaptionRun(rstore, urls, model, concurrency=concurrency, timeout=timeout, retries=retries,
                              reasks=reasks, backoff_base=backoff_base, backoff_max=backoff_max, api_key=api_key,
                              seed=seed, stats=rstats)
            run.probe = probe  # the first request alone: an endpoint that cannot answer stops the run
            if context_check:
                run.context_limit = context_limit(cards)
            error: Optional[BaseException] = None
            try:
                await _pipeline(run, images, policy, tmpl, opts, frozenset(answered), only, workers, progress,
                                drain_timeout, handle_signals, metadata, limit)
            except BaseException as exc:
                error = exc
                raise
            finally:
                rstore.close()
                rstats.elapsed_sec = time.monotonic() - t_start
                if error is None or rstats.images or rstore.rows_written:  # a run that did nothing is not logged
                    line = {"finished_at": utc_now(), "pid": os.getpid(), "urls": list(urls),
                            "concurrency": concurrency, "workers": workers, **rstats.to_dict()}
                    if error is not None:
                        line["error"] = f"{type(error).__name__}: {error}"[:500]
                    with open(layout.runs_log, "ab") as fh:
                        fh.write(dumps_line(line))
    except BaseException:
        if not rstats.images and not rstore.rows_written:
            new.remove()
        raise
    return rstats


class _NewParts:
    """What of a store folder does not exist yet, to remove it again after a run that did nothing."""

    def __init__(self, layout: StoreLayout):
        self.layout = layout
        self.folders = [p for p in (layout.root, *layout.root.parents) if not p.exists()]
        self.files = [p for p in (layout.manifest, layout.lock, layout.runs_log) if not p.exists()]
        self.responses = not layout.responses.exists()

    def remove(self) -> None:
        for f in self.files:
            try:
                f.unlink()
            except OSError:
                pass
        if self.responses:
            for f in self.layout.responses.glob(f"*{MODELS_SUFFIX}"):  # the answerers this run recorded
                f.unlink(missing_ok=True)
            try:
                self.layout.responses.rmdir()  # only if empty: a run that wrote nothing
            except OSError:
                pass
        for d in self.folders:  # innermost first; only if empty
            try:
                d.rmdir()
            except OSError:
                break


async def _pipeline(run: _CaptionRun, images: ImagesInput, policy: Policy, tmpl: IdTemplate, opts: PrepOptions,
                    answered: frozenset, only: Optional[frozenset], workers: int, progress: bool,
                    drain_timeout: float, handle_signals: bool,
                    metadata: Optional[Mapping[str, Mapping[str, Any]]], limit: Optional[int]) -> None:
    loop = asyncio.get_running_loop()
    rs = run.stats
    queue: asyncio.Queue = asyncio.Queue()
    slots = threading.Semaphore(max(8, min(2 * run.concurrency, run.concurrency + 64)))
    halt = threading.Event()
    box: Dict[str, BaseException] = {}

    def feed() -> None:
        seen: Set[str] = set()
        n = 0
        try:
            for job in _chain(images):
                if halt.is_set() or (limit is not None and n >= limit):
                    break
                n += 1
                if job.image_id in seen:
                    rs.duplicate_ids += 1
                    if len(rs.duplicate_examples) < 5:
                        rs.duplicate_examples.append(f"{job.image_id} ({job.image_path})")
                    continue
                seen.add(job.image_id)
                ctx = dict(job.context)
                if metadata is not None and job.image_id in metadata:
                    ctx = {**metadata[job.image_id], **ctx}
                try:
                    job.context = normalize_context(policy, ctx, where=job.image_path or job.image_id)
                except InputError as exc:
                    job.error = f"context: {exc}"
                while not slots.acquire(timeout=0.2):
                    if halt.is_set():
                        return
                loop.call_soon_threadsafe(queue.put_nowait, job)
        except BaseException as exc:  # bad input: reported after the run drains
            box["err"] = exc
            loop.call_soon_threadsafe(run.stop.set)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, _END)

    if workers > 0 and not _spawn_safe():
        print("capaudit recap: the main module cannot be re-imported by worker processes (a script read from "
              f"stdin?); preprocessing in {workers} thread(s) instead", file=sys.stderr)
        executor: cf.Executor = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="capaudit-recap-prep")
        prep_fn: Any = partial(prepare, tmpl=tmpl, opts=opts, answered=answered, only=only)
    elif workers > 0:
        executor = cf.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=init_worker, initargs=(tmpl, opts, answered, only))
        prep_fn = prepare_in_worker
    else:
        executor = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="capaudit-recap-prep")
        prep_fn = partial(prepare, tmpl=tmpl, opts=opts, answered=answered, only=only)

    if progress:
        run.open_progress(limit, "img", f"recap {policy.name}")
    launched: Set[str] = set()
    pools = run.make_pools()

    async def sender() -> None:
        while not run.stop.is_set():
            job = await queue.get()
            if job is _END:
                queue.put_nowait(_END)
                return
            slots.release()
            rs.images += 1
            try:
                prep: Prepared = await loop.run_in_executor(executor, prep_fn, job)
            except cf.process.BrokenProcessPool as exc:
                raise RuntimeError(f"an image worker process died ({exc}); the store is consistent, rerun with "
                                   "--resume (or --workers 0 to preprocess in the runner process)") from exc
            meta = {"image_id": prep.image_id, "image_path": prep.image_path, "image_key": prep.image_key,
                    "policy": policy.name, "policy_version": policy.version,
                    "prompt_version": policy.prompt_version, "image_mode": opts.mode, "source": job.source,
                    "size": list(prep.size) if prep.size else None,
                    "sent_size": list(prep.sent_size) if prep.sent_size else None,
                    "context": job.context or None}
            if prep.skipped:
                if prep.skipped == "answered":
                    rs.skipped_answered += 1
                else:
                    rs.skipped_not_failed += 1
                if run.bar is not None:
                    run.bar.update(1)
                continue
            if prep.error is not None:
                run.record_image_failure(prep, meta, f"{tmpl.prefix}|{prep.image_id}|{prep.image_path}")
                if run.bar is not None:
                    run.bar.update(1)
                continue
            rid = str(prep.request_id)
            if rid in launched:
                continue
            launched.add(rid)
            if run.stop.is_set():
                return
            payload = chat_payload(policy, run.model, str(prep.url), job.context)
            body = dumps_bytes(payload)
            prep.url = None
            reason = await run.context_refusal({"messages": payload["messages"], "decoding": policy.decoding})
            if reason is not None:
                run.refuse(rid, body, CONTEXT_KIND, reason, extra=meta)
                continue
            await run.send(rid, body, pools, extra=meta)

    reader = threading.Thread(target=feed, name="capaudit-recap-reader", daemon=True)
    reader.start()
    try:
        await run.drive([sender() for _ in range(run.concurrency)], drain_timeout=drain_timeout,
                        handle_signals=handle_signals, on_stop=lambda: queue.put_nowait(_END))  # wakes idle senders
    finally:
        halt.set()
        await loop.run_in_executor(None, reader.join)
        executor.shutdown(wait=True, cancel_futures=True)
        await run.close_pools(pools)
        run.store.flush()
        run.close_progress()
    if "err" in box:
        raise box["err"]


def _spawn_safe() -> bool:
    """Whether spawned workers can re-import ``__main__`` (not when it is a script read from stdin)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return path is None or os.path.exists(path) or getattr(getattr(main, "__spec__", None), "name", None) is not None


def recap(images: ImagesInput, policy: Policy, store: Union[str, Path], urls: Sequence[str], model: str,
          **kwargs: Any) -> RecapStats:
    """Caption every image not yet answered in ``store`` (module docstring); returns the counts.

    ``images``: an iterable of :class:`~capaudit.recap.preprocess.Job` (e.g.
    :func:`capaudit.recap.inputs.open_images`) or a list of such iterables. Keyword arguments are
    those of :func:`arecap`. Runs its own event loop (in a helper thread when called from inside a
    running loop, e.g. a notebook).
    """
    return run_blocking(lambda: arecap(images, policy, store, urls, model, **kwargs), thread_name="capaudit-recap-run")


__all__ = ["TASK", "TASK_VERSION", "TEXT_SCHEMA", "RecapStats", "StoreLayout", "run_identity", "id_template",
           "request_row", "chat_payload", "check_store", "arecap", "recap"]
