"""capaudit.argtypes: budget and positive-integer argument values."""

import argparse

import pytest

from capaudit.argtypes import budget, positive_int


def test_budget_values():
    assert budget("64") == 64 and budget("1") == 1
    assert budget("full") is None and budget("ALL") is None and budget("none") is None
    for bad in ("0", "-3", "sixty", "6.5"):
        with pytest.raises(argparse.ArgumentTypeError, match="budget"):
            budget(bad)


def test_positive_int_values():
    assert positive_int("5000") == 5000
    for bad in ("0", "-1", "x"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive integer"):
            positive_int(bad)
