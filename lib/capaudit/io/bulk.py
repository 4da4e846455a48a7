"""Bulk building of many small objects (summaries over millions of rows)."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while many small, acyclic objects (parsed rows,
    tuples, lists of strings) are built: it would otherwise walk them again and again as they
    grow. Reference counting still frees everything; the collector is re-enabled (if it was on)
    on the way out, whatever happens."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


__all__ = ["paused_gc"]
