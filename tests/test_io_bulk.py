"""paused_gc: the cyclic collector is off inside, and back to its previous state after, whatever happens."""

from __future__ import annotations

import gc

import pytest

from capaudit.io.bulk import paused_gc


def test_collector_paused_and_restored():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError):
        with paused_gc():
            raise KeyError("x")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_kept_heap_applies_with_glibc_and_leaves_a_users_setting_alone(monkeypatch):
    import platform
    import sys

    from capaudit.io.bulk import kept_heap

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    with kept_heap() as applied:
        assert applied == glibc
        big = bytearray(8 << 20)  # allocations work as ever inside
        assert len(big) == 8 << 20
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    with kept_heap() as applied:
        assert applied is False
