"""Micro-batching for the spaCy stand-ins: requests answered concurrently share one ``nlp.pipe`` call.

``capaudit serve`` runs a backend in ``workers`` threads. With one worker, every request is parsed
on its own (``nlp`` of one text), which costs several times what a batch of the same texts costs.
A :class:`MicroBatcher` lets the threads answering at the same time hand their texts to one of
them, which runs the batch function on all that are waiting (at most ``max_batch``) while the
others wait for their result. Results are per text, and the spaCy stand-ins give the same result for
a text whatever batch it is in (tests compare the served graphs and units with in-process ones),
so batching changes no answer. The batch runs under ``lock`` (shared by the backends that share a
spaCy pipeline, so one pipeline never runs in two threads at once).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable, List, Optional, Sequence, Tuple


class MicroBatcher:
    """``batcher(item) -> result`` from any thread; ``fn(items) -> results`` (same order) runs the batches."""

    def __init__(self, fn: Callable[[Sequence[Any]], Sequence[Any]], max_batch: int = 64,
                 lock: Optional[Any] = None):
        self.fn = fn
        self.max_batch = max(1, int(max_batch))
        self.lock = lock if lock is not None else threading.RLock()
        self._cv = threading.Condition()
        self._pending: List[Tuple[Any, Future]] = []
        self._running = False

    def __call__(self, item: Any) -> Any:
        fut: Future = Future()
        with self._cv:
            self._pending.append((item, fut))
        while not fut.done():
            with self._cv:
                if fut.done():
                    break
                if self._running:  # another thread is running a batch; ours may be in the next one
                    self._cv.wait(timeout=1.0)
                    continue
                self._running = True
                batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
            try:
                with self.lock:
                    results = list(self.fn([x for x, _ in batch]))
                if len(results) != len(batch):
                    raise RuntimeError(f"batch function gave {len(results)} results for {len(batch)} items")
                for (_, f), r in zip(batch, results):
                    f.set_result(r)
            except BaseException as exc:  # every waiter of the batch gets the error
                for _, f in batch:
                    if not f.done():
                        f.set_exception(exc)
            finally:
                with self._cv:
                    self._running = False
                    self._cv.notify_all()
        return fut.result()


__all__ = ["MicroBatcher"]
