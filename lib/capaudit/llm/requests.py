"""Content-addressed model-call requests (architecture.md "content-addressed model calls").

A request row (one JSONL line) is::

    {request_id, task, task_version, model_hint?, prompt_version, schema, messages: [{role, content}],
     decoding: {temperature, max_tokens, ...}, input: {...}, meta: {...}}

``request_id`` hashes everything that can change an answer: task, task version, model, model
revision, prompt version, schema, decoding settings and the input, so a changed prompt (or
model, schema, decoding) never reuses an old answer. This replaces the reference's
``claimed_cbu_v2:<budget>:<surface>:<row>:<caption_id>`` ids (spec §4.2), which did not
change with the prompt or the model.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from capaudit.io.canonical_json import canonical, canonical_bytes, loads

REQUIRED_FIELDS: Tuple[str, ...] = (
    "request_id",
    "task",
    "task_version",
    "prompt_version",
    "schema",
    "messages",
    "decoding",
    "input",
)
ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


def request_id(
    task: str,
    task_version: str | int,
    model: str,
    revision: Optional[str],
    prompt_version: str | int,
    schema: Mapping[str, Any],
    decoding: Mapping[str, Any],
    input: Mapping[str, Any],  # noqa: A002 - name fixed by the interface
) -> str:
    """blake2b (digest 16 bytes) hex of the canonical JSON (sorted keys, compact) of all arguments.

    The messages are not hashed directly: they are a function of (prompt_version, input);
    bump ``prompt_version`` whenever the prompt text changes.
    """
    payload = {
        "task": task,
        "task_version": task_version,
        "model": model,
        "revision": revision,
        "prompt_version": prompt_version,
        "schema": schema,
        "decoding": decoding,
        "input": input,
    }
    return hashlib.blake2b(canonical_bytes(payload), digest_size=16).hexdigest()


_SCHEMA_MARK = "\u0000capaudit-schema\u0000"
_INPUT_MARK = "\u0000capaudit-input\u0000"


class RequestIdTemplate:
    """:func:`request_id` for many requests that share task, version, model, revision, prompt
    version and decoding: the canonical text of the payload is cut around the schema and the input,
    so each id only needs those two values' canonical bytes (the caller's fast path).

    The fixed parts come from :func:`capaudit.io.canonical_json.canonical` itself (same key order, same
    float text), so ``tmpl.request_id(canonical_bytes(schema), canonical_bytes(input)) ==
    request_id(..., schema, decoding, input)`` for every value (tested).
    """

    __slots__ = ("_parts", "_schema_first")

    def __init__(self, task: str, task_version: str | int, model: str, revision: Optional[str],
                 prompt_version: str | int, decoding: Mapping[str, Any]):
        text = canonical({"task": task, "task_version": task_version, "model": model, "revision": revision,
                          "prompt_version": prompt_version, "schema": _SCHEMA_MARK, "decoding": decoding,
                          "input": _INPUT_MARK}).encode("utf-8")
        ms, mi = canonical(_SCHEMA_MARK).encode("utf-8"), canonical(_INPUT_MARK).encode("utf-8")
        if text.count(ms) != 1 or text.count(mi) != 1:
            raise ValueError("request-id template: a marker occurs in the fixed fields")
        i_s, i_i = text.index(ms), text.index(mi)
        self._schema_first = i_s < i_i
        a, b = (ms, mi) if self._schema_first else (mi, ms)
        head, _, rest = text.partition(a)
        mid, _, tail = rest.partition(b)
        self._parts = (head, mid, tail)

    def canonical_payload(self, schema_canonical: bytes, input_canonical: bytes) -> bytes:
        """The canonical payload bytes, given the canonical bytes of the schema and of the input."""
        head, mid, tail = self._parts
        if self._schema_first:
            return b"".join((head, schema_canonical, mid, input_canonical, tail))
        return b"".join((head, input_canonical, mid, schema_canonical, tail))

    def request_id(self, schema_canonical: bytes, input_canonical: bytes) -> str:
        """:func:`request_id` from the canonical bytes of the schema and of the input."""
        return hashlib.blake2b(self.canonical_payload(schema_canonical, input_canonical),
                               digest_size=16).hexdigest()


def make_request(
    *,
    task: str,
    task_version: str | int,
    model: str,
    revision: Optional[str],
    prompt_version: str | int,
    schema: Mapping[str, Any],
    messages: Sequence[Mapping[str, Any]],
    decoding: Mapping[str, Any],
    input: Mapping[str, Any],  # noqa: A002
    meta: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """Build one request row (see module docstring); ``model_hint`` = ``model``.

    ``meta`` carries bookkeeping that must not change the answer (surface, source_row, ...); it
    is not hashed. ``meta.revision`` records the revision hashed into the id.
    """
    msgs = [dict(m) for m in messages]
    _check_messages(msgs, where="make_request")
    if "max_tokens" not in decoding:
        raise ValueError("make_request: decoding must set max_tokens")
    row: Dict[str, Any] = {
        "request_id": request_id(task, task_version, model, revision, prompt_version, schema, decoding, input),
        "task": task,
        "task_version": task_version,
        "model_hint": model,
        "prompt_version": prompt_version,
        "schema": dict(schema),
        "messages": msgs,
        "decoding": dict(decoding),
        "input": dict(input),
        "meta": {**(dict(meta) if meta else {}), "revision": revision},
    }
    return row


def _check_messages(messages: Any, where: str) -> None:
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"{where}: field 'messages' must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES or "content" not in m:
            raise ValueError(f"{where}: field 'messages[{i}]' must be an object with role in {sorted(ROLES)} and content")


def check_request(row: Any, where: str) -> Dict[str, Any]:
    """Validate the shape of one request row; ``where`` (e.g. ``file:line``) prefixes errors."""
    if not isinstance(row, dict):
        raise ValueError(f"{where}: request row must be a JSON object")
    for field in REQUIRED_FIELDS:
        if field not in row:
            raise ValueError(f"{where}: missing field '{field}'")
    rid = row["request_id"]
    if not isinstance(rid, str) or not rid:
        raise ValueError(f"{where}: field 'request_id' must be a non-empty string")
    if not isinstance(row["schema"], dict):
        raise ValueError(f"{where}: field 'schema' must be a JSON schema object")
    if not isinstance(row["decoding"], dict):
        raise ValueError(f"{where}: field 'decoding' must be an object")
    _check_messages(row["messages"], where)
    return row


def iter_request_lines(path: str | Path) -> Iterator[Tuple[int, bytes]]:
    """Stream ``(line_number, raw_line)`` of a JSONL file, skipping blank lines (1-based numbers).

    A UTF-8 byte-order mark at the start of the file is dropped."""
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if lineno == 1 and line.startswith(b"\xef\xbb\xbf"):
                line = line[3:]
            if line.strip():
                yield lineno, line


def parse_request_line(line: bytes, where: str) -> Dict[str, Any]:
    """Parse and check one JSONL request line."""
    try:
        row = loads(line)
    except ValueError as exc:
        raise ValueError(f"{where}: invalid JSON ({exc})") from None
    return check_request(row, where)


def read_requests(path: str | Path) -> Iterator[Dict[str, Any]]:
    """Stream checked request rows from a JSONL file (memory independent of file size)."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: request file not found")
    for lineno, line in iter_request_lines(path):
        yield parse_request_line(line, f"{path}:{lineno}")


def write_requests(path: str | Path, rows: Sequence[Mapping[str, Any]] | Iterator[Mapping[str, Any]]) -> int:
    """Write request rows as JSONL (UTF-8, one compact object per line), atomically (the file
    appears complete or not at all); returns the row count."""
    from capaudit.io.atomic import atomic_write
    from capaudit.io.canonical_json import dumps_line

    n = 0
    with atomic_write(path, "wb") as fh:
        for row in rows:
            fh.write(dumps_line(dict(row)))
            n += 1
    return n


def count_lines(path: str | Path) -> int:
    """Number of non-blank lines (for progress totals), read in 1 MiB blocks."""
    n = 0
    last = b"\n"
    with open(path, "rb") as fh:
        while True:
            block = fh.read(1 << 20)
            if not block:
                break
            n += block.count(b"\n")
            last = block[-1:]
    if last != b"\n":
        n += 1
    return n


__all__: List[str] = [
    "REQUIRED_FIELDS",
    "request_id",
    "RequestIdTemplate",
    "make_request",
    "check_request",
    "iter_request_lines",
    "parse_request_line",
    "read_requests",
    "write_requests",
    "count_lines",
]
