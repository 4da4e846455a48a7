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
