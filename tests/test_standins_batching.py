"""The stand-ins' micro-batcher: concurrent requests share one batch call, each gets its own result."""

from __future__ import annotations

import threading
import time

import pytest

from capaudit.standins.batching import MicroBatcher


def test_concurrent_items_share_batches_and_get_their_results():
    sizes = []

    def fn(items):
        sizes.append(len(items))
        time.sleep(0.02)  # while a batch runs, the others queue up for the next one
        return [x * 2 for x in items]

    b = MicroBatcher(fn, max_batch=8)
    out = {}
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, b(i))) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert out == {i: 2 * i for i in range(40)}
    assert sum(sizes) == 40 and max(sizes) <= 8 and max(sizes) > 1
    assert b(5) == 10  # one thread alone: a batch of one


def test_an_error_reaches_every_waiter_of_its_batch_and_the_next_batch_runs():
    calls = []

    def fn(items):
        calls.append(list(items))
        if "bad" in items:
            raise ValueError("no")
        return [x.upper() for x in items]

    b = MicroBatcher(fn)
    with pytest.raises(ValueError):
        b("bad")
    assert b("ok") == "OK"
    bad = MicroBatcher(lambda items: [])
    with pytest.raises(RuntimeError, match="0 results for 1 items"):
        bad("x")
