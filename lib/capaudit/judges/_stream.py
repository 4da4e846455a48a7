"""Streaming answered-wins merge of response stores (same selection as :func:`capaudit.llm.store.merge`).

``llm.store.merge`` keeps every winning row in memory; a judge run of a million requests does not
fit that way. :func:`scan_winners` keeps, per request id, only ``(ok, started_at, file, offset)``
and picks the winner with the store's rule (an answered row beats a failed one; among answered
rows the earliest ``started_at``, among failed rows the latest; exact ties by the rows' canonical
JSON, re-read from disk). :func:`iter_winners` then yields the winning rows in file order, and
:func:`read_at` fetches one by location. Same file semantics as the store: blank lines skipped, a
torn last line (no newline) ignored, any other unreadable line is an error naming file and line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence, Set, Tuple, Union

from capaudit.errors import InputError
from capaudit.llm._json import canonical, loads
from capaudit.llm.store import store_files

PathLike = Union[str, Path]
#: request_id -> (ok, started_at, file index, byte offset, line number)
Winners = Dict[str, Tuple[bool, str, int, int, int]]


def expand(paths: Sequence[PathLike]) -> List[Path]:
    """The JSONL files of every store path (files or sharded directories), in order."""
    out: List[Path] = []
    for p in paths:
        out += store_files(p)
    return out


def _parse(line: bytes, file: Path, lineno: int) -> Any:
    try:
        row = loads(line)
    except ValueError as exc:
        if not line.endswith(b"\n"):
            return None  # torn tail of an interrupted write
        raise InputError(f"unreadable response row ({exc})", path=file, line=lineno) from None
    if not isinstance(row, dict) or not isinstance(row.get("request_id"), str):
        raise InputError("response row needs a string field 'request_id'", path=file, line=lineno)
    if not isinstance(row.get("ok"), bool):
        raise InputError("response row needs a boolean field 'ok'", path=file, line=lineno, field="ok")
    return row


def _lines(file: Path) -> Iterator[Tuple[int, int, bytes]]:
    """``(offset, lineno, line)`` of the non-blank lines of ``file``."""
    with open(file, "rb") as fh:
        off = 0
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield off, lineno, line
            off += len(line)


def read_at(files: Sequence[Path], file_index: int, offset: int) -> Dict[str, Any]:
    """The row stored at ``offset`` of ``files[file_index]``."""
    with open(files[file_index], "rb") as fh:
        fh.seek(offset)
        line = fh.readline()
    return loads(line)


class RowReader:
    """Random access to stored rows with the files kept open (use as a context manager)."""

    def __init__(self, files: Sequence[Path]):
        self.files = list(files)
        self._fh: Dict[int, Any] = {}

    def read(self, file_index: int, offset: int) -> Dict[str, Any]:
        fh = self._fh.get(file_index)
        if fh is None:
            fh = self._fh[file_index] = open(self.files[file_index], "rb")
        fh.seek(offset)
        return loads(fh.readline())

    def close(self) -> None:
        for fh in self._fh.values():
            fh.close()
        self._fh.clear()

    def __enter__(self) -> "RowReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def scan_winners(files: Sequence[Path]) -> Winners:
    """One winning location per request id (module docstring)."""
    win: Winners = {}
    for fi, file in enumerate(files):
        for off, lineno, line in _lines(file):
            row = _parse(line, file, lineno)
            if row is None:
                break
            rid = row["request_id"]
            ok = row["ok"]
            sa = str(row.get("started_at") or "")
            cur = win.get(rid)
            if cur is None:
                win[rid] = (ok, sa, fi, off, lineno)
                continue
            cok, csa = cur[0], cur[1]
            if ok != cok:
                better = ok
            elif sa != csa:
                better = sa < csa if ok else sa > csa
            else:
                better = canonical(row) < canonical(read_at(files, cur[2], cur[3]))
            if better:
                win[rid] = (ok, sa, fi, off, lineno)
    return win


def iter_winners(files: Sequence[Path], winners: Winners) -> Iterator[Tuple[Dict[str, Any], Path, int]]:
    """``(row, file, line)`` of every winning row, in file order (only winners are parsed)."""
    by_file: Dict[int, Set[int]] = {}
    for ok, sa, fi, off, lineno in winners.values():
        by_file.setdefault(fi, set()).add(off)
    for fi, file in enumerate(files):
        offs = by_file.get(fi)
        if not offs:
            continue
        for off, lineno, line in _lines(file):
            if off in offs:
                yield loads(line), file, lineno


__all__ = ["expand", "scan_winners", "iter_winners", "read_at", "RowReader", "Winners"]
