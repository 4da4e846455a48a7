"""JSON helpers for the model-call layer: orjson when installed, the standard library otherwise.

Canonical JSON (``canonical``) is the standard library's ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False)`` so ids never depend on whether orjson is present.
"""

from __future__ import annotations

import json
from typing import Any

try:  # optional speed-up; results are identical for the JSON we write
    import orjson as _orjson
except ImportError:  # pragma: no cover - exercised only without orjson
    _orjson = None

HAVE_ORJSON = _orjson is not None


def canonical(obj: Any) -> str:
    """Canonical JSON text: sorted keys, compact separators, UTF-8 (not ASCII-escaped)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


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
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    def dumps_line(obj: Any) -> bytes:
        return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")

    def loads(data: bytes | str) -> Any:
        return json.loads(data)

    def cache_key(obj: Any) -> bytes:
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
