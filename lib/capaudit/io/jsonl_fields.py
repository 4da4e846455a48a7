"""String fields of a block of JSON lines, found in the bytes (numpy; no JSON object per line).

A line is *plain* when it is a flat object whose values are all strings, written without escapes
or other spacing: ``{"k1": "v1", "k2": "v2"}`` (``:`` and ``,`` each followed by at most one
space), with no backslash and no byte below 0x20 anywhere in it, each wanted field a key exactly
once, and the block valid UTF-8. A JSON string with no backslash is its own bytes, so the value
of a wanted field of a plain line is exactly the UTF-8 bytes between its quotes: what a JSON
parser gives, read without one. Every other line (escapes, numbers, nulls, nesting, other
spacing, a byte-order mark, a blank line) is not plain, and the caller parses it as JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Iterator, Sequence

import numpy as np

_QUOTE, _BACKSLASH, _NEWLINE = 34, 92, 10
_COLON, _COMMA, _SPACE, _OPEN, _CLOSE = 58, 44, 32, 123, 125


@dataclass(frozen=True)
class FieldSpans:
    """Per line of a block: where it is, whether it is plain, and (plain lines) each wanted
    field's value as the byte span ``[starts[i, j], ends[i, j])`` of the block."""

    line_starts: np.ndarray  # int64, first byte of each line
    line_ends: np.ndarray  # int64, the line's end (its newline, or the block's end)
    plain: np.ndarray  # bool per line
    starts: np.ndarray  # int64 (lines, fields); meaningful where plain
    ends: np.ndarray

    @property
    def lines(self) -> int:
        return int(self.line_starts.size)


def read_line_blocks(fh: BinaryIO, size: int = 1 << 22) -> Iterator[bytes]:
    """Blocks of whole lines (about ``size`` bytes each, the last line completed) of a binary file."""
    while True:
        block = fh.read(size)
        if not block:
            return
        if not block.endswith(b"\n"):
            block += fh.readline()
        yield block


def valid_utf8(block: bytes) -> bool:
    """Whether ``block`` is valid UTF-8 as Python's strict decoder reads it (no surrogates, no
    overlong forms, nothing past U+10FFFF; Arrow's validator, a test compares it with Python's)."""
    if block.isascii():
        return True
    import pyarrow as pa

    offsets = pa.py_buffer(np.array([0, len(block)], np.int64).tobytes())
    try:
        pa.LargeStringArray.from_buffers(1, offsets, pa.py_buffer(block)).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def plain_string_fields(block: bytes, fields: Sequence[str]) -> FieldSpans:
    """The lines of ``block`` (split at ``\\n``; a final newline ends the last line) and, for the
    plain ones, the byte spans of the values of ``fields`` (see the module's definition)."""
    buf = np.frombuffer(block, np.uint8)
    low = np.flatnonzero(buf < 0x20)  # the newlines and the control bytes, in one pass
    is_nl = buf[low] == _NEWLINE
    nl = low[is_nl]
    line_starts = np.concatenate([[0], nl + 1]).astype(np.int64)
    line_ends = np.concatenate([nl, [buf.size]]).astype(np.int64)
    if block.endswith(b"\n") or not block:  # a final newline ends the last line; no bytes, no line
        line_starts, line_ends = line_starts[:-1], line_ends[:-1]
    n, k = line_starts.size, len(fields)
    starts = np.zeros((n, k), np.int64)
    ends = np.zeros((n, k), np.int64)
    if n == 0 or k == 0 or not valid_utf8(block):
        return FieldSpans(line_starts, line_ends, np.zeros(n, bool), starts, ends)
    # a backslash or a control byte (other than the newlines themselves) makes a line not plain
    bad = low[~is_nl]
    if b"\\" in block:
        bad = np.sort(np.concatenate([bad, np.flatnonzero(buf == _BACKSLASH)]))
    plain = np.searchsorted(bad, line_ends) == np.searchsorted(bad, line_starts) if bad.size else np.ones(n, bool)
    q = np.flatnonzero(buf == _QUOTE)
    qfirst = np.searchsorted(q, line_starts)
    qcount = np.searchsorted(q, line_ends) - qfirst
    plain &= (qcount > 0) & (qcount % 4 == 0)
    plain &= buf[line_starts.clip(max=max(buf.size - 1, 0))] == _OPEN
    after = np.append(buf, np.zeros(2, np.uint8))  # the bytes after a quote, read past the end safely
    names = [np.frombuffer(f.encode("utf-8"), np.uint8) for f in fields]
    cand = np.flatnonzero(plain)
    for m in np.unique(qcount[cand] // 4).tolist():  # lines of m key-value pairs, as a matrix of quotes
        rows = cand[qcount[cand] == 4 * m]
        quotes = q[qfirst[rows][:, None] + np.arange(4 * m)]  # with no backslash, every quote is a delimiter
        ok = quotes[:, 0] == line_starts[rows] + 1  # '{' then the first key
        for j in range(2 * m - 1):  # ':' after a key, ',' after a value but the last: a space may follow
            a, b = quotes[:, 2 * j + 1], quotes[:, 2 * j + 2]
            ok &= (after[a + 1] == (_COLON if j % 2 == 0 else _COMMA)) & ((b == a + 2) | ((b == a + 3) & (after[a + 2] == _SPACE)))
        ok &= (after[quotes[:, -1] + 1] == _CLOSE) & (quotes[:, -1] + 2 == line_ends[rows])
        for f, name in enumerate(names):
            hits = np.zeros(rows.size, np.int64)
            for j in range(m):
                ko, kc = quotes[:, 4 * j], quotes[:, 4 * j + 1]
                same = kc - ko - 1 == name.size
                if name.size and same.any():
                    at = np.flatnonzero(same)
                    same[at] = (buf[ko[at][:, None] + 1 + np.arange(name.size)] == name).all(axis=1)
                hits += same
                starts[rows[same], f] = quotes[same, 4 * j + 2] + 1
                ends[rows[same], f] = quotes[same, 4 * j + 3]
            ok &= hits == 1
        plain[rows] = ok
    return FieldSpans(line_starts, line_ends, plain, starts, ends)


def body_mask(size: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A bool mask of ``size`` bytes, true inside the disjoint spans ``[starts, ends)``."""
    order = np.argsort(starts, kind="stable")
    edges = np.empty(2 * starts.size + 2, np.int64)
    edges[0], edges[-1] = 0, size
    edges[1:-1:2], edges[2:-1:2] = starts[order], ends[order]
    inside = np.zeros(edges.size - 1, bool)
    inside[1::2] = True
    return np.repeat(inside, np.diff(edges))
