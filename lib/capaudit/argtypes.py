"""argparse value types shared by the subcommands."""

from __future__ import annotations

import argparse
from typing import Callable, Optional, Tuple


def _int_at_least(text: str, minimum: int, expected: str) -> int:
    """``int(text)`` if it is >= ``minimum``; else an ArgumentTypeError ``expected <expected>, got ...``."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def budget(text: str) -> Optional[int]:
    """A text budget B: a positive integer, or ``full``/``none``/``all`` for the whole caption (None)."""
    if text.lower() in ("full", "none", "all"):
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"budget must be a positive integer or 'full', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"budget must be >= 1, got {value}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """A number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _interval(lo: float, hi: float, lo_open: bool, hi_open: bool) -> str:
    return f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def _inside(v: float, lo: float, hi: float, lo_open: bool, hi_open: bool) -> bool:
    return (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi)


def number_in(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> Callable[[str], float]:
    """Argument type: one number in the interval (``number_in(0, 1, hi_open=True)`` is [0, 1))."""
    def parse(text: str) -> float:
        message = f"expected a number in {_interval(lo, hi, lo_open, hi_open)}, got {text!r}"
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(message) from None
        if not _inside(value, lo, hi, lo_open, hi_open):
            raise argparse.ArgumentTypeError(message)
        return value
    return parse


def numbers_in(lo: float, hi: float, what: str, *, lo_open: bool = False,
               hi_open: bool = False) -> Callable[[str], Tuple[float, ...]]:
    """Argument type: comma-separated numbers (at least one), each in the interval."""
    def parse(text: str) -> Tuple[float, ...]:
        message = f"expected comma-separated {what} in {_interval(lo, hi, lo_open, hi_open)}, got {text!r}"
        try:
            values = tuple(float(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(message) from None
        if not values or not all(_inside(v, lo, hi, lo_open, hi_open) for v in values):
            raise argparse.ArgumentTypeError(message)
        return values
    return parse


def nonnegative_float(text: str) -> float:
    """A finite number >= 0 (``--temperature``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def positive_ints(text: str) -> Tuple[int, ...]:
    """Comma-separated positive integers (at least one), e.g. ``16,32,64``."""
    message = f"expected comma-separated positive integers, got {text!r}"
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(message) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(message)
    return values


def name_value(text: str) -> Tuple[str, str]:
    """``NAME=VALUE`` with both parts non-empty."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def name_positive_int(text: str) -> Tuple[str, int]:
    """``NAME=N`` with N a positive integer."""
    name, value = name_value(text)
    try:
        return name, positive_int(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected NAME=N with a positive integer N, got {text!r}") from None


def add_engine_options(p: argparse.ArgumentParser, same: str = "numbers",
                       shards_default: str = "one per worker locally, ~128 MiB pieces on Ray") -> None:
    """``--workers``, ``--engine``, ``--address``, ``--shards``: the engine switch of every sharded stage."""
    p.add_argument("--workers", type=positive_int, default=1,
                   help=f"processes (local engine) or concurrent tasks (ray engine); same {same} for any value")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="where shards run: this machine (default) or Ray (a local cluster unless --address)")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (default: RAY_ADDRESS; unset: start a local cluster)")
    p.add_argument("--shards", type=positive_int, default=None,
                   help=f"cut the input into this many shards (default: {shards_default})")
