"""Where a stage's map + merge runs: in this process, in a local process pool, or on Ray.

A stage says *what* to compute per shard (``map_fn(shard) -> part``) and *how* to merge
(``merge_fn([part, ...]) -> part``, associative); :func:`map_merge` says *where*. Whatever the
engine or the number of workers, parts are merged **in shard order** (results that finish early
wait in a small buffer), batches of ``merge_every`` at a time, so a stage whose merge is exact
(integer counts) gives byte-identical summaries on 1 process, a pool or a cluster.

Engines
* ``local``: ``workers <= 1`` maps in this process; more workers use a ``ProcessPoolExecutor``
  (``map_fn`` and shards must pickle: a module-level function or a ``functools.partial``).
* ``ray``: one Ray task per shard (``num_cpus=1`` each); ``address`` (or ``RAY_ADDRESS``) joins an
  existing cluster, otherwise a local one is started with ``num_cpus=workers`` and no dashboard.
  ``map_fn`` is put in the object store once; at most ``max_in_flight`` tasks are pending, so the
  driver never holds more than that many unmerged parts. A cluster started here stays up for later
  calls in the same process (Ray's start-up costs seconds); :func:`shutdown_ray` stops it.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, TypeVar

from capaudit.errors import EmptyInputError, InputError

if TYPE_CHECKING:
    from capaudit.config import ParamsSection

S = TypeVar("S")
P = TypeVar("P")

ENGINES = ("local", "ray")
DEFAULT_LOCAL_RAY_CPUS = 2


def check_engine(engine: str) -> str:
    """``engine`` lower-cased if it is one of :data:`ENGINES`; InputError otherwise."""
    e = str(engine).strip().lower()
    if e not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}", field="engine")
    return e


class _OrderedMerger:
    """Merges parts in index order, ``merge_every`` at a time."""

    def __init__(self, merge_fn: Callable[[List[Any]], Any], merge_every: int):
        self.merge_fn = merge_fn
        self.merge_every = max(2, int(merge_every))
        self.acc: List[Any] = []
        self.waiting: Dict[int, Any] = {}
        self.next = 0

    def add(self, index: int, part: Any) -> None:
        self.waiting[index] = part
        while self.next in self.waiting:
            self.acc.append(self.waiting.pop(self.next))
            self.next += 1
            if len(self.acc) >= self.merge_every:
                self.acc = [self.merge_fn(self.acc)]

    @property
    def backlog(self) -> int:
        return len(self.waiting)

    def result(self) -> Any:
        assert not self.waiting, "parts missing before the merge"
        if len(self.acc) == 1:
            return self.acc[0]
        return self.merge_fn(self.acc)


def map_merge(shards: Iterable[S], map_fn: Callable[[S], P], merge_fn: Callable[[List[P]], P],
              engine: str = "local", workers: int = 1, address: Optional[str] = None, *,
              merge_every: int = 8, max_in_flight: Optional[int] = None,
              initializer: Optional[Callable[..., None]] = None, initargs: tuple = (),
              ray_options: Optional[Dict[str, Any]] = None) -> P:
    """``merge_fn`` over ``map_fn(shard)`` of every shard, merged in shard order (module docstring).

    ``shards`` may be a list or a lazy iterable (read only as tasks are submitted, so at most
    about ``max_in_flight`` shards are held at once).

    ``initializer(*initargs)`` runs once per local worker process (local engine only).
    ``ray_options`` are passed to ``ray.remote`` (e.g. ``{"memory": 2 * 2**30}``).
    """
    engine = check_engine(engine)
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}", field="workers")
    it = iter(shards)
    try:
        first = next(it)
    except StopIteration:
        raise EmptyInputError("no shards to map over") from None
    shards_it = chain([first], it)  # shards may be a lazy stream: read as tasks are submitted
    merger = _OrderedMerger(merge_fn, merge_every)
    if engine == "ray":
        _map_ray(shards_it, map_fn, merger, workers, address, max_in_flight, ray_options or {})
    elif workers <= 1 or (isinstance(shards, Sequence) and len(shards) == 1):
        if initializer is not None:
            initializer(*initargs)
        for i, shard in enumerate(shards_it):
            merger.add(i, map_fn(shard))
    else:
        _map_pool(shards_it, map_fn, merger, workers, max_in_flight, initializer, initargs)
    return merger.result()


def _bounded_map(shards: Iterable[Any], merger: _OrderedMerger, limit: int, pending: Dict[Any, int],
                 submit: Callable[[Any], Any], wait_some: Callable[[Dict[Any, int]], Iterable[Any]],
                 result: Callable[[Any], Any]) -> None:
    """Submit shards while fewer than ``limit`` are pending or unmerged; merge each finished one.

    ``pending`` (task handle → shard index) belongs to the caller, which can cancel what is left.
    """
    it = iter(enumerate(shards))
    exhausted = False
    while pending or not exhausted:
        while not exhausted and len(pending) + merger.backlog < limit:
            try:
                i, shard = next(it)
            except StopIteration:
                exhausted = True
                break
            pending[submit(shard)] = i
        if not pending:
            continue
        for handle in wait_some(pending):
            i = pending.pop(handle)
            merger.add(i, result(handle))


def _map_pool(shards: Iterable[Any], map_fn: Callable, merger: _OrderedMerger, workers: int,
              max_in_flight: Optional[int], initializer: Optional[Callable], initargs: tuple) -> None:
    limit = max(1, max_in_flight or 2 * workers)
    with ProcessPoolExecutor(max_workers=workers, initializer=initializer,
                             initargs=initargs) as pool:
        def wait_some(pending: Dict[Any, int]) -> List[Any]:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            return sorted(done, key=pending.__getitem__)

        _bounded_map(shards, merger, limit, {}, lambda shard: pool.submit(map_fn, shard), wait_some,
                     lambda fut: fut.result())


# ---------------------------------------------------------------------------------------------
# Ray
# ---------------------------------------------------------------------------------------------

def ray_available() -> bool:
    """True when the optional ``ray`` package imports."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise InputError("engine 'ray' needs the optional dependency: pip install -e '.[ray]'",
                         field="engine") from exc
    return ray


def ensure_ray(address: Optional[str] = None, num_cpus: Optional[int] = None,
               object_store_mb: Optional[int] = None) -> bool:
    """Connect to Ray unless already connected; True when this call connected.

    ``address`` (else ``RAY_ADDRESS``) joins an existing cluster (``ray://host:10001`` or
    ``host:6379``); otherwise a local cluster with ``num_cpus`` CPUs (default 2), no dashboard and
    an object store of ``object_store_mb`` MiB (default: Ray's) is started.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    common = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=True,
                  configure_logging=True)
    if address:
        ray.init(address=address, logging_level=logging.WARNING)
    else:
        kw: Dict[str, Any] = dict(num_cpus=num_cpus or DEFAULT_LOCAL_RAY_CPUS, **common)
        if object_store_mb:
            kw["object_store_memory"] = int(object_store_mb) * 1024 * 1024
        ray.init(**kw)
    return True


def shutdown_ray() -> None:
    """Disconnect from (and, if it was started here, stop) Ray."""
    if ray_available():
        import ray

        if ray.is_initialized():
            ray.shutdown()


def ray_cluster_cpus() -> int:
    """CPUs of the connected cluster (1 if unknown)."""
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _ray_call(fn: Callable, shard: Any) -> Any:
    return fn(shard)


def _map_ray(shards: Iterable[Any], map_fn: Callable, merger: _OrderedMerger, workers: int, address: Optional[str],
             max_in_flight: Optional[int], ray_options: Dict[str, Any]) -> None:
    ray = _import_ray()
    ensure_ray(address, num_cpus=workers)
    opts = {"num_cpus": 1, "max_retries": 0, **ray_options}
    remote = ray.remote(**opts)(_ray_call)
    fn_ref = ray.put(map_fn)
    parallel = workers if not (address or os.environ.get("RAY_ADDRESS")) else max(workers, ray_cluster_cpus())
    limit = max(1, max_in_flight or 2 * parallel)
    pending: Dict[Any, int] = {}

    def result(ref: Any) -> Any:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # re-raise the task's own error
            cause = exc.as_instanceof_cause() if hasattr(exc, "as_instanceof_cause") else exc
            raise cause from None

    try:
        _bounded_map(shards, merger, limit, pending, lambda shard: remote.remote(fn_ref, shard),
                     lambda p: ray.wait(list(p), num_returns=1)[0], result)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


ENGINE_KEYS = ("engine", "workers", "address", "shards")


@dataclass(frozen=True)
class EngineParams:
    """The engine switch of a sharded stage (params keys :data:`ENGINE_KEYS`, CLI ``--engine`` ...)."""

    engine: str = "local"
    workers: int = 1
    address: Optional[str] = None
    shards: Optional[int] = None

    @classmethod
    def from_section(cls, section: "ParamsSection") -> "EngineParams":
        """From a params section; errors name the params file, section and key."""
        try:
            engine = check_engine(section.raw("engine", cls.engine))
        except InputError as exc:
            raise section.error("engine", exc.message) from None
        address = section.raw("address")
        return cls(engine, section.integer("workers", cls.workers), str(address) if address else None,
                   section.integer("shards", cls.shards))

    @classmethod
    def from_args(cls, args: Any) -> "EngineParams":
        """From the ``--engine/--workers/--address/--shards`` options (:func:`capaudit.argtypes.add_engine_options`)."""
        return cls(check_engine(args.engine), args.workers, args.address, args.shards)

    def kwargs(self) -> Dict[str, Any]:
        """``{engine, workers, address, shards}`` (the keyword arguments of the sharded runners)."""
        return {"engine": self.engine, "workers": self.workers, "address": self.address, "shards": self.shards}


def engine_from_params(section: Dict[str, Any], where: str = "") -> Dict[str, Any]:
    """``{engine, workers, address, shards}`` from a params section (keys ``engine``, ``workers``,
    ``address``, ``shards``); errors name the section and key."""
    from capaudit.config import ParamsSection

    path, _, name = where.rpartition(": ")
    return EngineParams.from_section(ParamsSection.of(section, name, path or None)).kwargs()


def iter_batches(items: Iterable[Any], size: int) -> Iterable[List[Any]]:
    """Consecutive lists of ``size`` items (the last may be shorter)."""
    batch: List[Any] = []
    for x in items:
        batch.append(x)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


__all__ = ["ENGINES", "ENGINE_KEYS", "EngineParams", "check_engine", "engine_from_params", "ensure_ray", "iter_batches", "map_merge",
           "ray_available", "ray_cluster_cpus", "shutdown_ray"]
