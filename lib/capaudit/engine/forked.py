"""Run independent tasks on several cores with ``fork`` (results returned by pickle), else in turn.

Used where results do not depend on the order of work: loading each judge's answers, the
caption-bootstrap replicate blocks of :mod:`capaudit.judges.cells` (each block re-derives its
generator state, so the draws are those of one sequential run), and indexing request files while
responses are merged (:mod:`capaudit.claims.summarize`). Only on Linux (``fork`` start method),
from a process that is not itself a daemonic worker; the first task of each wave runs in this
process. A task that fails in a child is run again here, so the error raised is the one a
sequential run raises, in the same task order.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Callable, List, Optional, Sequence, TypeVar

T = TypeVar("T")


def default_workers() -> int:
    """The usable CPU count (affinity-aware where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def fork_ok() -> bool:
    """Whether tasks may run in forked children here: Linux, ``fork`` available, and this process
    not a daemonic worker (which may not have children)."""
    if not sys.platform.startswith("linux"):
        return False
    import multiprocessing as mp

    return "fork" in mp.get_all_start_methods() and not mp.current_process().daemon


def _child(task: Callable[[], Any], conn: Any) -> None:
    try:
        result = ("ok", task())
    except BaseException:  # noqa: BLE001 - re-raised by the parent's own run of the task
        result = ("error", None)
    try:
        conn.send(result)
    except Exception:  # noqa: BLE001 - unpicklable result: the parent runs the task itself
        conn.send(("error", None))
    conn.close()


def run_tasks(tasks: Sequence[Callable[[], T]], workers: Optional[int] = None) -> List[T]:
    """``[t() for t in tasks]``, up to ``workers`` (default: the CPU count) at a time."""
    n = len(tasks)
    workers = default_workers() if workers is None else max(1, int(workers))
    if n <= 1 or workers <= 1 or not fork_ok():
        return [t() for t in tasks]
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    out: List[Any] = [None] * n
    for wave in range(0, n, workers):
        ids = list(range(wave, min(n, wave + workers)))
        procs = []
        try:
            for i in ids[1:]:
                recv, send = ctx.Pipe(duplex=False)
                with warnings.catch_warnings():  # Python >= 3.12 warns on fork with threads (BLAS pools idle here)
                    warnings.simplefilter("ignore", DeprecationWarning)
                    p = ctx.Process(target=_child, args=(tasks[i], send), daemon=True)
                    p.start()
                send.close()
                procs.append((i, p, recv))
            out[ids[0]] = tasks[ids[0]]()
            for i, p, recv in procs:
                try:
                    status, value = recv.recv()
                except (EOFError, OSError):
                    status, value = "error", None
                recv.close()
                p.join()
                out[i] = value if status == "ok" else tasks[i]()
        finally:
            for _, p, recv in procs:
                if p.is_alive():
                    p.terminate()
                    p.join()
    return out


__all__ = ["run_tasks", "default_workers", "fork_ok"]
