"""JSON reading and writing shared by every layer: orjson when installed, the standard library
otherwise.

Public functions: :func:`canonical` / :func:`canonical_bytes` (ids and hashes),
:func:`canonical_stdlib` (their definition), :func:`dumps_bytes` / :func:`dumps_line` (compact JSON,
JSONL lines), :func:`loads` (strict) / :func:`loads_lenient` (model output), :func:`cache_key`
(cache identities, never ids); ``HAVE_ORJSON`` and ``ORJSON`` (the orjson module or ``None``) for
callers with their own orjson fast paths; ``JSONDecodeError``.

Canonical JSON (``canonical``, ``canonical_bytes``) is *defined* as the standard library's
``json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``, so ids
never depend on whether orjson is present. With orjson installed the same text is produced by
``orjson.dumps(OPT_SORT_KEYS)`` (several times faster) only for values where the two are proven to
agree (:func:`_orjson_safe`): exact ``dict`` (str keys) / ``list`` / ``tuple`` / ``str`` / ``int`` /
``bool`` / ``None`` trees, and floats whose orjson text equals ``float.__repr__`` (orjson writes
``1e-05`` as ``0.00001``; such floats, NaN and infinities take the standard library). Anything else
— subclasses, enums, dataclasses, datetimes, UUIDs, numpy scalars, non-str keys, ints beyond 64
bits, lone surrogates, nesting deeper than orjson allows — falls back to the standard library, which
then returns its text or raises its error exactly as before (tests/test_judges_perf_equivalence.py).
"""

from __future__ import annotations

import json
from typing import Any

try:  # optional speed-up; results are identical for the JSON we write
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    _orjson = None

HAVE_ORJSON: bool = _orjson is not None
#: the orjson module when installed (callers with their own byte-level fast paths), else ``None``
ORJSON: Any = _orjson


def canonical_stdlib(obj: Any) -> str:
    """The definition of canonical JSON (module docstring): the standard library's text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


#: orjson's nesting limit is 255 levels; deeper values take the standard library
_MAX_DEPTH = 250
_ATOMS = frozenset({str, int, bool, type(None)})


def _float_ok(v: float) -> bool:
    """orjson writes this float exactly as ``json.dumps`` does (``float.__repr__``; finite)."""
    return _orjson is not None and _orjson.dumps(v) == float.__repr__(v).encode("ascii")


def _values_safe(values: Any, depth: int) -> bool:
    """Every value of a container (at ``depth``) is one orjson writes as ``json.dumps`` does."""
    atoms = _ATOMS
    for v in values:
        tv = type(v)
        if tv in atoms:
            continue
        if tv is float:
            if not _float_ok(v):
                return False
        elif not _orjson_safe(v, depth + 1):
            return False
    return True


def _orjson_safe(obj: Any, depth: int = 0) -> bool:
    """True when ``obj`` is a plain JSON tree on which orjson and ``json.dumps`` provably agree
    (module docstring); False sends the value to the standard library."""
    t = type(obj)
    if t is dict:
        return (depth <= _MAX_DEPTH and all(type(k) is str for k in obj)
                and _values_safe(obj.values(), depth))
    if t is list or t is tuple:
        return depth <= _MAX_DEPTH and _values_safe(obj, depth)
    if t in _ATOMS:
        return True
    if t is float:
        return _float_ok(obj)
    return False


def _canonical_fast(obj: Any) -> Any:
    """orjson's canonical bytes when provably equal to the standard library's, else ``None``."""
    if _orjson is None or not _orjson_safe(obj):
        return None
    try:
        return _orjson.dumps(obj, option=_orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: lone surrogate, int beyond 64 bits
        return None


def canonical(obj: Any) -> str:
    """Canonical JSON text: sorted keys, compact separators, UTF-8 (not ASCII-escaped).

    Byte for byte :func:`canonical_stdlib` (module docstring); orjson computes it when it provably
    agrees."""
    fast = _canonical_fast(obj)
    if fast is not None:
        return fast.decode("utf-8")
    return canonical_stdlib(obj)


def canonical_bytes(obj: Any) -> bytes:
    """``canonical(obj).encode("utf-8")`` without the round trip through ``str`` on the fast path."""
    fast = _canonical_fast(obj)
    if fast is not None:
        return fast
    return canonical_stdlib(obj).encode("utf-8")


if _orjson is not None:
    _OPT_LINE = _orjson.OPT_APPEND_NEWLINE | _orjson.OPT_NON_STR_KEYS

    def dumps_bytes(obj: Any) -> bytes:
        """Compact JSON as UTF-8 bytes."""
        return _orjson.dumps(obj, option=_orjson.OPT_NON_STR_KEYS)

    def dumps_line(obj: Any) -> bytes:
        """One JSONL line (compact, UTF-8, trailing newline)."""
        return _orjson.dumps(obj, option=_OPT_LINE)

    def loads(data: bytes | str) -> Any:
        """Parse strict JSON (bytes or str)."""
        return _orjson.loads(data)

    _OPT_SORTED = _orjson.OPT_SORT_KEYS | _orjson.OPT_NON_STR_KEYS

    def cache_key(obj: Any) -> bytes:
        """A fast, key-order-independent identity of a JSON value (for caches, never for ids)."""
        return _orjson.dumps(obj, option=_OPT_SORTED)

    JSONDecodeError: type = _orjson.JSONDecodeError  # subclass of json.JSONDecodeError / ValueError

else:  # pragma: no cover

    def dumps_bytes(obj: Any) -> bytes:
        """Compact JSON as UTF-8 bytes."""
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def dumps_line(obj: Any) -> bytes:
        """One JSONL line (compact, UTF-8, trailing newline)."""
        return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")

    def loads(data: bytes | str) -> Any:
        """Parse strict JSON (bytes or str)."""
        return json.loads(data)

    def cache_key(obj: Any) -> bytes:
        """A key-order-independent identity of a JSON value (for caches, never for ids)."""
        return canonical(obj).encode("utf-8")

    JSONDecodeError = json.JSONDecodeError


def loads_lenient(text: str) -> Any:
    """Parse model output: strict fast path, then ``json.loads(strict=False)`` (control characters
    inside strings allowed, offline-backends §2.3), then the same inside one Markdown code fence.

    Raises ``ValueError`` (``json.JSONDecodeError``) when none of these parse.
    """
    try:
        return loads(text)
    except ValueError:
        pass
    try:
        return json.loads(text, strict=False)
    except ValueError as first:
        stripped = text.strip()
        if stripped.startswith("```"):
            body = stripped[3:]
            newline = body.find("\n")
            if newline >= 0 and body.rstrip().endswith("```"):
                body = body[newline + 1 :].rstrip()[:-3]
                return json.loads(body, strict=False)
        raise first
