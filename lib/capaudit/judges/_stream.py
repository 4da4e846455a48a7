"""Streaming answered-wins merge of response stores (same selection as :func:`capaudit.llm.store.merge`).

``llm.store.merge`` keeps every winning row in memory; a judge run of a million requests does not
fit that way. :func:`scan_winners` keeps, per request id, only ``(ok, started_at, file, offset)``
and picks the winner with the store's rule (an answered row beats a failed one; among answered
rows the earliest ``started_at``, among failed rows the latest; exact ties by the rows' canonical
JSON, re-read from disk). :func:`iter_winners` then yields the winning rows in file order, and
:func:`read_at` fetches one by location. Same file semantics as the store: blank lines skipped, a
torn last line (no newline) is not read, any other unreadable line is an error naming file and line.

A torn (cut) last line is never dropped silently: the readers record it as a :class:`CutLine` and
the commands decide with :func:`check_cut_lines` — an error naming file and line, or, for a store
that is still being written (its lock held by a running writer), a count said out loud.
"""

from __future__ import annotations

import errno
import gc
import mmap
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from capaudit.errors import InputError
from capaudit.io.lock import lock_held, lock_path_for
from capaudit.io.canonical_json import canonical, loads
from capaudit.llm.store import rank_better, store_files

PathLike = Union[str, Path]
_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")
#: request_id -> (ok, started_at, file index, byte offset, line number)
Winners = Dict[str, Tuple[bool, str, int, int, int]]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a loop builds millions of small acyclic objects
    (each collection would re-scan everything kept so far); restored on exit. Reference
    counting still frees everything as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class BlockWriter:
    """Append-only binary file writer for outputs of gigabytes (a million judge requests is ~3 GB).

    Data is gathered in page-aligned buffers of ``block`` bytes and written in whole blocks with
    ``O_DIRECT`` where the OS and file system accept it — bypassing the page cache, whose copy and
    write-back cost several seconds of CPU per GB here and are then paid again by the ``fsync`` of
    :func:`capaudit.io.atomic.atomic_path` — else with plain writes (``O_DIRECT`` refused at open or
    at the first write: ``EINVAL``). With ``background`` (default) a writer thread writes one
    buffer while the caller fills the other (``os.write`` releases the GIL). The last, partial
    block is written without ``O_DIRECT``. The bytes in the file are exactly the bytes given to
    :meth:`write`, in order; a write error is raised by the next :meth:`write` or by :meth:`close`.
    """

    def __init__(self, path: PathLike, block: int = 1 << 22, background: bool = True):
        if block <= 0 or block % mmap.PAGESIZE:
            raise ValueError(f"BlockWriter: block must be a positive multiple of {mmap.PAGESIZE}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)
        direct = getattr(os, "O_DIRECT", 0)
        self.fd = -1
        if direct:
            try:
                self.fd = os.open(path, flags | direct, 0o666)
            except OSError:
                self.fd = -1
        self.direct = self.fd >= 0
        if self.fd < 0:
            self.fd = os.open(path, flags, 0o666)
        self._bufs = [mmap.mmap(-1, block) for _ in range(2 if background else 1)]
        self._views = [memoryview(b) for b in self._bufs]
        self._cur = 0
        self._buf = self._bufs[0]
        self._pos = 0
        self.bytes = 0
        self._error: Any = None
        self._thread: Any = None
        if background:
            import queue
            import threading

            self._todo: Any = queue.Queue()
            self._free: Any = queue.Queue()
            self._free.put(1)
            self._thread = threading.Thread(target=self._run, name="capaudit-block-writer", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            i = self._todo.get()
            if i is None:
                return
            try:
                if self._error is None:
                    self._write_all(self._views[i])
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                self._error = exc
            self._free.put(i)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _flush_full(self) -> None:
        """Write the current (full) buffer, or hand it to the writer thread and take the other."""
        if self._thread is None:
            self._write_all(self._views[self._cur])
            return
        self._check()
        self._todo.put(self._cur)
        self._cur = self._free.get()
        self._buf = self._bufs[self._cur]
        self._check()

    def write(self, data: bytes) -> None:
        n = len(data)
        pos = self._pos
        buf = self._buf
        size = len(buf)
        self.bytes += n
        if pos + n < size:
            buf[pos:pos + n] = data
            self._pos = pos + n
            return
        view = memoryview(data)
        start = 0
        while pos + (n - start) >= size:
            k = size - pos
            self._buf[pos:size] = view[start:start + k]
            start += k
            self._flush_full()
            pos = 0
        self._buf[0:n - start] = view[start:]
        self._pos = n - start

    def _write_all(self, view: memoryview) -> None:
        done = 0
        while done < len(view):
            try:
                done += os.write(self.fd, view[done:])
            except OSError as exc:
                if not self.direct or exc.errno != errno.EINVAL:
                    raise
                self._buffered()  # the file system refuses O_DIRECT writes: plain writes from here on
                continue
            if self.direct and done % mmap.PAGESIZE and done < len(view):
                self._buffered()  # a short direct write left the file offset unaligned

    def _buffered(self) -> None:
        import fcntl

        fcntl.fcntl(self.fd, fcntl.F_SETFL, fcntl.fcntl(self.fd, fcntl.F_GETFL) & ~getattr(os, "O_DIRECT", 0))
        self.direct = False

    def close(self) -> None:
        if self.fd < 0:
            return
        try:
            if self._thread is not None:
                self._todo.put(None)
                self._thread.join()
                self._thread = None
                self._check()
            if self._pos:
                if self.direct:
                    self._buffered()
                self._write_all(self._views[self._cur][:self._pos])
                self._pos = 0
        finally:
            for v in self._views:
                v.release()
            for b in self._bufs:
                b.close()
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "BlockWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def expand(paths: Sequence[PathLike]) -> List[Path]:
    """The JSONL files of every store path (files or sharded directories), in order."""
    out: List[Path] = []
    for p in paths:
        out += store_files(p)
    return out


def store_file_list(paths: Sequence[PathLike], what: str = "response") -> Tuple[List[Path], List[str]]:
    """:func:`expand` that refuses a path holding no file; also returns, per file, the store path
    it came from (for :class:`CutLine` and the empty-store check)."""
    files: List[Path] = []
    stores: List[str] = []
    for p in paths:
        found = store_files(p)
        if not found:
            kind = "store folder has no .jsonl file" if Path(p).is_dir() else "file not found"
            raise InputError(f"{what} {kind}", path=p)
        files += found
        stores += [str(p)] * len(found)
    return files, stores


@dataclass(frozen=True)
class CutLine:
    """A last line without its newline that is not JSON: a write cut short (or still going on)."""

    file: str
    line: int
    store: str

    def being_written(self) -> bool:
        """True while the store's writer holds its lock (``capaudit llm run`` and the stages do)."""
        return lock_held(lock_path_for(self.store))


def check_cut_lines(cut: Sequence[CutLine], allow_in_progress: bool = False) -> List[CutLine]:
    """Refuse cut last lines: an :class:`InputError` naming file and line, unless
    ``allow_in_progress`` and the store is still being written — those are returned, for the
    caller to count out loud."""
    kept: List[CutLine] = []
    for c in cut:
        if c.being_written():
            if allow_in_progress:
                kept.append(c)
                continue
            raise InputError(f"last line is cut (no newline, not JSON): the store {c.store} is still being "
                             "written; wait for its run to finish", path=c.file, line=c.line)
        raise InputError(f"last line is cut (no newline, not JSON): a write was interrupted; resume the run that "
                         f"writes {c.store} (it drops the cut line and asks that request again) or delete the line",
                         path=c.file, line=c.line)
    return kept


def check_not_empty(rows_per_store: Dict[str, int], what: str = "response") -> None:
    """An :class:`InputError` naming the first store (file or folder) that holds no row."""
    for store, n in rows_per_store.items():
        if n == 0:
            raise InputError(f"no {what} row (empty {'store' if Path(store).is_dir() else 'file'})", path=store)


def check_utf8(line: bytes, file: PathLike, lineno: int) -> None:
    """An :class:`InputError` naming file, line and byte when ``line`` is not valid UTF-8."""
    from capaudit.io.text import check_line

    if not line.isascii():
        check_line(line.decode("utf-8", "surrogateescape"), file, lineno)


def _parse(line: bytes, file: Path, lineno: int) -> Any:
    try:
        row = loads(line)
    except ValueError as exc:
        if not line.endswith(b"\n"):
            return None  # torn tail of an interrupted write
        check_utf8(line, file, lineno)
        raise InputError(f"unreadable response row ({exc})", path=file, line=lineno) from None
    if not isinstance(row, dict) or not isinstance(row.get("request_id"), str):
        raise InputError("response row needs a string field 'request_id'", path=file, line=lineno)
    if not isinstance(row.get("ok"), bool):
        raise InputError("response row needs a boolean field 'ok'", path=file, line=lineno, field="ok")
    return row


def json_lines(path: Path) -> Iterator[Tuple[int, Any]]:
    """``(lineno, value)`` of the non-blank lines of a JSONL file; a line that is not JSON is an
    :class:`InputError` naming file and line (no torn-tail tolerance: these are inputs, not stores)."""
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                value = loads(line)
            except ValueError as exc:
                check_utf8(line, path, lineno)
                raise InputError(f"invalid JSON ({exc})", path=path, line=lineno) from None
            yield lineno, value


def _lines(file: Path) -> Iterator[Tuple[int, int, bytes]]:
    """``(offset, lineno, line)`` of the non-blank lines of ``file``."""
    ws = _WHITESPACE
    with open(file, "rb", buffering=1 << 20) as fh:
        off = 0
        for lineno, line in enumerate(fh, 1):
            if line[0] not in ws or line.strip():  # (a line starting with a non-blank is not blank)
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


def scan_winners(files: Sequence[Path], cut: Optional[List[CutLine]] = None,
                 stores: Optional[Sequence[str]] = None, rows: Optional[Dict[str, int]] = None) -> Winners:
    """One winning location per request id (module docstring). A cut last line is appended to
    ``cut`` (``stores[i]`` names the store of ``files[i]``); ``rows`` counts rows per store."""
    with gc_paused():
        return _scan_winners(files, cut, stores, rows)


def _scan_winners(files: Sequence[Path], cut: Optional[List[CutLine]], stores: Optional[Sequence[str]],
                  rows: Optional[Dict[str, int]]) -> Winners:
    win: Winners = {}
    for fi, file in enumerate(files):
        store = stores[fi] if stores is not None else str(file)
        if rows is not None:
            rows.setdefault(store, 0)
        for off, lineno, line in _lines(file):
            row = _parse(line, file, lineno)
            if row is None:
                if cut is not None:
                    cut.append(CutLine(str(file), lineno, store))
                break
            if rows is not None:
                rows[store] += 1
            rid = row["request_id"]
            ok = row["ok"]
            sa = str(row.get("started_at") or "")
            cur = win.get(rid)
            if cur is None:
                win[rid] = (ok, sa, fi, off, lineno)
                continue
            better = rank_better(ok, sa, cur[0], cur[1])
            if better is None:
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


__all__ = ["check_utf8", "expand", "store_file_list", "CutLine", "check_cut_lines", "check_not_empty", "scan_winners", "iter_winners", "read_at", "RowReader", "Winners", "gc_paused", "BlockWriter"]
