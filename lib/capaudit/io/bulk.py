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


#: glibc ``mallopt`` parameter numbers and defaults
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_DEFAULT_TRIM_THRESHOLD = 128 * 1024
_MMAP_THRESHOLD_MAX = 32 << 20  # the ceiling glibc's own dynamic threshold reaches on 64-bit
_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


@contextmanager
def kept_heap(trim_mib: int = 256) -> Iterator[bool]:
    """Let glibc's allocator keep freed memory while arrays of a few MiB are allocated and freed
    block after block (prompt support): arrays up to 32 MiB come from the heap, and the heap is
    handed back to the system only above ``trim_mib`` MiB free. By default glibc returns that
    memory and faults it in again, page by page, for the next block (about 300,000 page faults,
    a sixth of the run, for 250,000 caption pairs on one worker; more with workers). Forked workers
    inherit the setting.

    Yields whether it was applied: only with glibc on Linux, and not when the user set a
    ``MALLOC_*_`` tuning variable (their choice stands). On the way out the trim threshold is set
    back to glibc's default (and free memory handed back); the mmap threshold stays at 32 MiB,
    the ceiling glibc's own adjustment reaches, no longer adjusted for the rest of the process."""
    import os
    import sys

    mallopt = trim = None
    if sys.platform.startswith("linux") and not any(v in os.environ for v in _USER_SETTINGS):
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            mallopt, trim = libc.mallopt, libc.malloc_trim
        except (OSError, AttributeError):
            mallopt = None
    applied = bool(mallopt and mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX) == 1
                   and mallopt(_M_TRIM_THRESHOLD, int(trim_mib) << 20) == 1)
    try:
        yield applied
    finally:
        if applied:
            mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)
            trim(0)


__all__ = ["paused_gc", "kept_heap"]
