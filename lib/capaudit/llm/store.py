"""Append-only, resumable response store (JSONL, optionally sharded into part files).

A response row::

    {request_id, ok, status, attempts, started_at, elapsed_sec, model, usage, response_text,
     parsed, error, error_kind, request_hash?}

``error_kind`` is one of ``http | timeout | connection | parse | schema | rule`` (``None`` when
``ok``). Rows are only ever appended. Several rows may exist for one request id (a failure, then a
later success after ``--resume``); ``merge`` picks one row per id **independently of file
order**: an answered row (``ok: true``) is never replaced by an unanswered one; among answered
rows the earliest ``started_at`` wins, among failed rows the latest (its reason is the freshest);
exact ties are broken by the row's canonical JSON. This fixes the reference's last-row-wins merge
(spec §4.4, §13.5).

Layout: ``path`` ending in ``.jsonl`` (or any existing file) is a single file. A directory (an
existing one, or a path ending in ``/``) is a sharded store: every ``*.jsonl`` inside is read, and
each writer appends to its own ``part-<utc time>-<pid>.jsonl``, so several processes may write
concurrently. A single file is locked (``flock``) while written, and its writer also holds the
exclusive lock file ``<store>.lock`` beside it (:mod:`capaudit.io.lock`); :meth:`ResponseStore.lock`
takes that lock explicitly, before anything is sent (``capaudit llm run`` does, for file and
directory stores alike), so a second writer is refused (:class:`~capaudit.errors.LockHeldError`)
without writing a byte. Writes are buffered and flushed +
fsynced every ``batch_rows`` rows or ``batch_sec`` seconds and on ``close``; a crash loses at most
the unflushed batch (those requests are asked again on resume). A torn last line (a crash in the
middle of a write) is ignored when reading and cut off before the next append.

Who answered: beside the rows the client records the model card of the requested model at each
endpoint (:mod:`capaudit.llm.cards`), in ``<store>.models.json`` beside a file store
(``responses.jsonl`` → ``responses.models.json``) or ``answerers-<pid>.models.json`` inside a
directory store (one per writing process), merged across resumed runs and several URLs
(:func:`record_answerers`). :func:`answered_by` reads them back: the cards every stage derives
its labels, caveats and offline flags from.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from capaudit.errors import LockHeldError
from capaudit.io.lock import ExclusiveLock, lock_path_for
from capaudit.io.canonical_json import canonical, dumps_line, loads

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

ERROR_KINDS = ("http", "timeout", "connection", "parse", "schema", "rule", "empty", "context", "image")
ROW_FIELDS = (
    "request_id", "ok", "status", "attempts", "started_at", "elapsed_sec", "model", "usage",
    "response_text", "parsed", "error", "error_kind",
)


def _is_dir_path(path: Path, raw: str) -> bool:
    return path.is_dir() or raw.endswith(("/", os.sep))


def store_files(path: str | Path) -> List[Path]:
    """The JSONL files that make up the store at ``path`` (sorted; empty when nothing exists)."""
    raw = str(path)
    p = Path(path)
    if _is_dir_path(p, raw):
        return sorted(p.glob("*.jsonl")) if p.is_dir() else []
    return [p] if p.exists() else []


def iter_rows(path: str | Path) -> Iterator[Dict[str, Any]]:
    """Stream the rows of a store file or directory, in file order.

    A last line without its newline (torn write) is skipped; any other unreadable line raises
    ``ValueError`` naming the file and line.
    """
    for row, _ in iter_rows_with_lines(path):
        yield row


def iter_rows_with_lines(path: str | Path) -> Iterator[Tuple[Dict[str, Any], bytes]]:
    """:func:`iter_rows` with each row's raw JSONL line."""
    for file in store_files(path):
        with open(file, "rb") as fh:
            lineno = 0
            for line in fh:
                lineno += 1
                if not line.strip():
                    continue
                try:
                    row = loads(line)
                except ValueError as exc:
                    if not line.endswith(b"\n"):
                        break  # torn tail of an interrupted write
                    raise ValueError(f"{file}:{lineno}: unreadable response row ({exc})") from None
                if not isinstance(row, dict) or not isinstance(row.get("request_id"), str):
                    raise ValueError(f"{file}:{lineno}: response row needs a string field 'request_id'")
                if not isinstance(row.get("ok"), bool):
                    raise ValueError(f"{file}:{lineno}: response row needs a boolean field 'ok'")
                yield row, line


def rank_better(a_ok: bool, a_started: str, b_ok: bool, b_started: str) -> Optional[bool]:
    """:func:`_better` on (ok, started_at) alone; ``None`` when only the rows' canonical JSON decides."""
    if a_ok != b_ok:
        return a_ok
    if a_started != b_started:
        return a_started < b_started if a_ok else a_started > b_started
    return None


def _better(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    """True when row ``a`` should be kept over row ``b`` for the same id (a total order)."""
    r = rank_better(a["ok"], str(a.get("started_at") or ""), b["ok"], str(b.get("started_at") or ""))
    return canonical(a) < canonical(b) if r is None else r


def merge(*paths: str | Path) -> Dict[str, Dict[str, Any]]:
    """One row per request id over all ``paths`` (files or sharded directories).

    The result does not depend on the order of ``paths`` or of rows inside them (module docstring).
    """
    out: Dict[str, Dict[str, Any]] = {}
    for path in paths:
        for row in iter_rows(path):
            rid = row["request_id"]
            cur = out.get(rid)
            if cur is None or _better(row, cur):
                out[rid] = row
    return out


def merge_lines(*paths: str | Path) -> Dict[str, bytes]:
    """:func:`merge` keeping each winning row as its raw JSONL line (``loads`` it when needed):
    the same winners, at a fraction of the memory of parsed rows (for summaries of millions)."""
    best: Dict[str, Tuple[bool, str, bytes]] = {}
    for path in paths:
        for row, line in iter_rows_with_lines(path):
            rid = row["request_id"]
            started = str(row.get("started_at") or "")
            cur = best.get(rid)
            if cur is not None:
                r = rank_better(row["ok"], started, cur[0], cur[1])
                if not (canonical(row) < canonical(loads(cur[2])) if r is None else r):
                    continue
            best[rid] = (row["ok"], started, line)
    return {rid: v[2] for rid, v in best.items()}


def scan_ids(*paths: str | Path) -> Tuple[Set[str], Set[str]]:
    """``(answered, failed)`` id sets: failed = ids with a failed row and no answered row."""
    answered: Set[str] = set()
    seen_failed: Set[str] = set()
    for path in paths:
        for row in iter_rows(path):
            (answered if row["ok"] else seen_failed).add(row["request_id"])
    return answered, seen_failed - answered


class ResponseStore:
    """Append-only response store at ``path`` (see module docstring)."""

    def __init__(self, path: str | Path, batch_rows: int = 256, batch_sec: float = 1.0):
        self.path = Path(path)
        self._sharded = _is_dir_path(self.path, str(path))
        self.batch_rows = max(1, int(batch_rows))
        self.batch_sec = float(batch_sec)
        self._fh = None
        self._buf: List[bytes] = []
        self._last_flush = time.monotonic()
        self.rows_written = 0
        self._lock: Optional[ExclusiveLock] = None

    # -- locking ------------------------------------------------------------------------------
    @property
    def lock_path(self) -> Path:
        """The lock file beside the store (``resp.jsonl.lock``, ``store.lock`` for ``store/``)."""
        return lock_path_for(self.path)

    def lock(self) -> "ResponseStore":
        """Take the store's exclusive lock now (before anything is sent); idempotent.

        Raises :class:`~capaudit.errors.LockHeldError` when another process holds it. Released by
        :meth:`close`.
        """
        if self._lock is None:
            lk = ExclusiveLock(self.lock_path, what=f"response store {self.path}")
            lk.acquire()
            self._lock = lk
        return self

    # -- reading ------------------------------------------------------------------------------
    def files(self) -> List[Path]:
        """Files currently in the store."""
        return store_files(self.path if not self._sharded else str(self.path) + os.sep)

    def rows(self) -> Iterator[Dict[str, Any]]:
        """All rows in file order (flushes pending writes first)."""
        self.flush()
        for f in self.files():
            yield from iter_rows(f)

    def scan(self) -> Tuple[Set[str], Set[str]]:
        """``(answered_ids, failed_ids)`` in one pass."""
        self.flush()
        return scan_ids(*self.files())

    def answered_ids(self) -> Set[str]:
        """Ids with at least one ``ok: true`` row."""
        return self.scan()[0]

    def failed_ids(self) -> Set[str]:
        """Ids with a failed row and no answered row."""
        return self.scan()[1]

    def merge(self, *paths: str | Path) -> Dict[str, Dict[str, Any]]:
        """``merge`` of this store and ``paths``: one row per id, order independent."""
        self.flush()
        return merge(*self.files(), *paths)

    # -- writing ------------------------------------------------------------------------------
    def _open(self) -> None:
        if self._sharded:
            self.path.mkdir(parents=True, exist_ok=True)
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            target = self.path / f"part-{stamp}-{os.getpid()}.jsonl"
            n = 1
            while target.exists():
                target = self.path / f"part-{stamp}-{os.getpid()}-{n}.jsonl"
                n += 1
        else:
            target = self.path
            self.lock()  # single file: one writer (the lock file beside it), taken before the file opens
            if target.parent and not target.parent.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
        fh = open(target, "a+b")
        if fcntl is not None:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                raise LockHeldError(f"{target}: response store is being written by another process") from None
        _cut_torn_tail(fh)
        self._fh = fh
        self.target = target

    def append(self, row: Dict[str, Any]) -> None:
        """Append one response row (buffered; flushed + fsynced in batches)."""
        rid = row.get("request_id")
        if not isinstance(rid, str) or not isinstance(row.get("ok"), bool):
            raise ValueError(f"{self.path}: response row needs string 'request_id' and boolean 'ok': {row!r:.200}")
        self._buf.append(dumps_line(row))
        if len(self._buf) >= self.batch_rows or time.monotonic() - self._last_flush >= self.batch_sec:
            self.flush()

    def flush(self) -> None:
        """Write buffered rows, flush and fsync."""
        self._last_flush = time.monotonic()
        if not self._buf:
            return
        if self._fh is None:
            self._open()
        data = b"".join(self._buf)
        n = len(self._buf)
        self._buf.clear()
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.rows_written += n

    def close(self) -> None:
        """Flush and release the file and the lock."""
        try:
            self.flush()
        finally:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def __enter__(self) -> "ResponseStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _cut_torn_tail(fh: Any) -> None:
    """Truncate a partial last line (no trailing newline) so the next append starts clean."""
    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    if size == 0:
        return
    fh.seek(size - 1)
    if fh.read(1) == b"\n":
        return
    pos = size
    block = 1 << 16
    while pos > 0:
        start = max(0, pos - block)
        fh.seek(start)
        chunk = fh.read(pos - start)
        idx = chunk.rfind(b"\n")
        if idx >= 0:
            fh.truncate(start + idx + 1)
            break
        pos = start
    else:
        fh.truncate(0)
    fh.seek(0, os.SEEK_END)


MODELS_SUFFIX = ".models.json"


def models_path(path: str | Path) -> Path:
    """The file this process records the answering models in (module docstring)."""
    raw = str(path)
    p = Path(path)
    if _is_dir_path(p, raw):
        return p / f"answerers-{os.getpid()}{MODELS_SUFFIX}"
    name = p.name
    for ext in (".jsonl.gz", ".jsonl", ".ndjson"):
        if name.endswith(ext):
            name = name[: -len(ext)]
            break
    return p.with_name(name + MODELS_SUFFIX)


def _read_models(path: Path) -> List[Dict[str, Any]]:
    try:
        data = loads(path.read_bytes())
    except (OSError, ValueError):
        return []
    cards = data.get("answered_by") if isinstance(data, dict) else None
    return [c for c in cards if isinstance(c, dict)] if isinstance(cards, list) else []


def _card_key(card: Mapping[str, Any]) -> Tuple[str, str]:
    return str(card.get("model", "")), str(card.get("url", ""))


def record_answerers(path: str | Path, cards: Sequence[Mapping[str, Any]], fresh: bool = False) -> Path:
    """Merge ``cards`` (one per model and URL, :func:`capaudit.llm.cards.fetch_card`) into the store's
    models file: a card replaces the earlier one of the same model and URL, except that an unknown
    card never replaces a known one (a server that once declared its model and now says nothing has
    not changed models); a card of a server that did not answer (``reachable: False``) is not
    recorded. ``fresh``: the store holds no row yet, so an earlier file (a store deleted by hand) is
    replaced, not merged."""
    from capaudit.io.atomic import write_json_atomic

    target = models_path(path)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    merged = {} if fresh else {_card_key(c): c for c in _read_models(target)}
    for c in cards:
        if c.get("reachable") is False:
            continue
        old = merged.get(_card_key(c))
        if c.get("kind") == "unknown" and old is not None and old.get("kind") != "unknown":
            continue
        merged[_card_key(c)] = {**dict(c), "recorded_at": now}
    target.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(target, {"answered_by": [merged[k] for k in sorted(merged)]})
    return target


def answered_by(path: str | Path) -> List[Dict[str, Any]]:
    """The model cards recorded for the store at ``path`` (a file store's ``<store>.models.json``;
    every ``*.models.json`` inside a directory store): one per distinct card (model, kind, version,
    label, caveat), with the URLs that declared it under ``urls``; sorted by model. Empty when
    nothing was recorded (a store written before cards were recorded)."""
    raw = str(path)
    p = Path(path)
    files = sorted(p.glob(f"*{MODELS_SUFFIX}")) if _is_dir_path(p, raw) else [models_path(p)]
    out: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    for f in files:
        for c in _read_models(f):
            key = tuple(str(c.get(k, "")) for k in ("model", "kind", "version", "label", "caveat"))
            card = out.setdefault(key, {k: v for k, v in c.items() if k not in ("url", "recorded_at")} | {"urls": []})
            if c.get("url") and c["url"] not in card["urls"]:
                card["urls"].append(c["url"])
    return [out[k] for k in sorted(out)]


@contextmanager
def restricted_to(path: str | Path, ids: Set[str]) -> Iterator[Path]:
    """The file store at ``path`` seen with only the rows whose ids are in ``ids`` (latest row per
    id): the store itself when it holds no other id, else a temporary file beside it, removed after."""
    p = Path(path)
    rows = merge(p)
    if set(rows) <= ids:
        yield p
        return
    tmp = p.with_name(p.name + ".current.tmp")
    with open(tmp, "wb") as fh:
        for rid in sorted(rows):
            if rid in ids:
                fh.write(dumps_line(rows[rid]))
    try:
        yield tmp
    finally:
        tmp.unlink()


def open_store(path: str | Path, **kwargs: Any) -> ResponseStore:
    """``ResponseStore(path, **kwargs)``."""
    return ResponseStore(path, **kwargs)


__all__ = ["ERROR_KINDS", "MODELS_SUFFIX", "ROW_FIELDS", "ResponseStore", "answered_by", "merge", "models_path",
           "restricted_to",
           "record_answerers", "merge_lines", "rank_better", "scan_ids", "iter_rows", "iter_rows_with_lines", "store_files", "open_store"]
