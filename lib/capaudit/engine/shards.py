"""Shards: listing and splitting stage inputs (local paths, globs, folders, fsspec URLs).

A :class:`Shard` is one independent piece of input a stage maps over: a whole file, a line-aligned
byte range of a JSONL file, or a range of Parquet row groups. Shards are listed in a deterministic
order (sorted paths, then offsets) and numbered; the engine merges their summaries in that order.

Inputs (:func:`expand_inputs`):

* a local file, a local folder (every ``*.jsonl``, ``*.jsonl.gz``, ``*.ndjson``, ``*.parquet``
  below it), or a glob (``data/*.parquet``, ``**`` allowed);
* an fsspec URL (``s3://bucket/prefix/``, ``gs://...``, ``hf://datasets/org/name/...``,
  ``file://...``): listed and read through :mod:`fsspec` (the protocol's package, e.g. ``s3fs``,
  ``gcsfs`` or ``huggingface_hub``, must be installed where the shards are read).

Splitting (:func:`list_shards`): with ``num_shards`` the total size is divided among the files in
proportion to their bytes (every file gets at least one shard); a plain JSONL file is then cut
into line-aligned byte ranges (a line belongs to the range in which it *starts*), a Parquet file
into runs of row groups, a gzip file stays whole. Without ``num_shards`` pieces of about
``target_bytes`` are made. Every line / row of the input is in exactly one shard.
"""

from __future__ import annotations

import glob as _glob
import gzip
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import EmptyInputError, InputError

PathLike = Union[str, Path]

#: file suffixes a folder or URL prefix is expanded to
SHARD_SUFFIXES: Tuple[str, ...] = (".jsonl", ".jsonl.gz", ".ndjson", ".parquet")
DEFAULT_TARGET_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Shard:
    """One piece of input. ``start``/``stop``: byte offsets (``jsonl``) or row-group indices
    (``parquet``); ``stop = -1`` means "to the end". ``index``/``count`` number the shard."""

    path: str
    format: str  # "jsonl" | "jsonl.gz" | "parquet"
    start: int = 0
    stop: int = -1
    index: int = 0
    count: int = 1

    @property
    def name(self) -> str:
        return f"shard-{self.index:05d}-of-{self.count:05d}"

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        unit = "bytes" if self.format == "jsonl" else "row groups" if self.format == "parquet" else "whole"
        rng = "" if unit == "whole" else f" [{unit} {self.start}:{'end' if self.stop < 0 else self.stop}]"
        return f"{self.path}{rng}"


# ---------------------------------------------------------------------------------------------
# file systems
# ---------------------------------------------------------------------------------------------

def is_url(path: str) -> bool:
    """True for ``scheme://...`` inputs other than plain local paths."""
    return "://" in path and not path.startswith("file://")


def _fs_and_path(path: str):
    import fsspec

    return fsspec.core.url_to_fs(path)


def open_binary(path: str):
    """A binary file object for a local path, ``file://`` or fsspec URL."""
    if path.startswith("file://"):
        path = path[7:]
    if not is_url(path):
        return open(path, "rb")
    import fsspec

    return fsspec.open(path, "rb").open()


def line_at(path: str, offset: int) -> int:
    """1-based number of the line that starts at byte ``offset`` (counted on demand, for errors)."""
    n = 1
    left = offset
    with open_binary(path) as fh:
        while left > 0:
            block = fh.read(min(left, 1 << 20))
            if not block:
                break
            n += block.count(b"\n")
            left -= len(block)
    return n


def file_format(path: str) -> str:
    """``jsonl``, ``jsonl.gz`` or ``parquet`` from the name; InputError otherwise."""
    low = path.lower()
    if low.endswith((".jsonl.gz", ".ndjson.gz")):
        return "jsonl.gz"
    if low.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if low.endswith(".parquet"):
        return "parquet"
    raise InputError(f"cannot shard this file: expected one of {', '.join(SHARD_SUFFIXES)}", path=path)


def _size(path: str) -> int:
    if path.startswith("file://"):
        path = path[7:]
    if not is_url(path):
        return os.path.getsize(path)
    fs, p = _fs_and_path(path)
    return int(fs.size(p))


def expand_inputs(inputs: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    """Input files of paths, folders, globs and fsspec URLs, sorted and de-duplicated."""
    items = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    if not items:
        raise EmptyInputError("no input given")
    out: List[str] = []
    for item in items:
        s = str(item)
        if is_url(s):
            fs, p = _fs_and_path(s)
            proto = s.split("://", 1)[0]
            if _glob.has_magic(p):
                found = sorted(fs.glob(p))
            elif fs.isdir(p):
                found = sorted(f for f in fs.find(p) if f.lower().endswith(SHARD_SUFFIXES))
            else:
                found = [p] if fs.exists(p) else []
            if not found:
                raise InputError("no input file at this URL", path=s)
            out += [f if "://" in f else f"{proto}://{f}" for f in found]
            continue
        local = s[7:] if s.startswith("file://") else s
        local = str(Path(local).expanduser())
        if _glob.has_magic(local):
            found = sorted(p for p in _glob.glob(local, recursive=True) if os.path.isfile(p))
            if not found:
                raise InputError("no file matches this pattern", path=local)
            out += found
        elif os.path.isdir(local):
            found = sorted(str(p) for p in Path(local).rglob("*")
                           if p.is_file() and p.name.lower().endswith(SHARD_SUFFIXES))
            if not found:
                raise InputError(f"folder holds no {', '.join(SHARD_SUFFIXES)} file", path=local)
            out += found
        elif os.path.isfile(local):
            out.append(local)
        else:
            raise InputError("no such file or folder", path=local)
    seen: Dict[str, None] = {}
    for f in out:
        seen.setdefault(f, None)
    return sorted(seen)


def _parquet_row_groups(path: str) -> List[int]:
    import pyarrow.parquet as pq

    with open_binary(path) as fh:
        md = pq.ParquetFile(fh).metadata
        return [md.row_group(i).total_byte_size for i in range(md.num_row_groups)]


def _allocate(sizes: List[int], num_shards: int) -> List[int]:
    """Pieces per file: proportional to size (largest remainder), each >= 1, summing to
    ``max(num_shards, len(sizes))``."""
    n = max(num_shards, len(sizes))
    total = sum(sizes)
    if total == 0:
        base = [1] * len(sizes)
        extra = n - len(sizes)
        for i in range(extra):
            base[i % len(base)] += 1
        return base
    quota = [1 + (n - len(sizes)) * s / total for s in sizes]
    pieces = [int(q) for q in quota]
    left = n - sum(pieces)
    order = sorted(range(len(sizes)), key=lambda i: (-(quota[i] - pieces[i]), i))
    for i in order[:left]:
        pieces[i] += 1
    return pieces


def default_num_shards(inputs: Union[PathLike, Sequence[PathLike]], workers: int = 1,
                       target_bytes: int = DEFAULT_TARGET_BYTES) -> int:
    """Enough shards for pieces of about ``target_bytes``, and at least one per worker."""
    total = sum(_size(f) for f in expand_inputs(inputs))
    return max(int(workers), -(-total // max(1, target_bytes)), 1)


def list_shards(inputs: Union[PathLike, Sequence[PathLike]], num_shards: Optional[int] = None,
                target_bytes: int = DEFAULT_TARGET_BYTES) -> List[Shard]:
    """Shards of ``inputs`` (module docstring): numbered, in path then offset order."""
    files = expand_inputs(inputs)
    fmts = [file_format(f) for f in files]
    sizes = [_size(f) for f in files]
    if num_shards is not None:
        if num_shards < 1:
            raise InputError(f"number of shards must be >= 1, got {num_shards}")
        pieces = _allocate(sizes, num_shards)
    else:
        if target_bytes < 1:
            raise InputError(f"target shard size must be >= 1 byte, got {target_bytes}")
        pieces = [max(1, -(-s // target_bytes)) for s in sizes]
    raw: List[Tuple[str, str, int, int]] = []
    for f, fmt, size, k in zip(files, fmts, sizes, pieces):
        if fmt == "jsonl.gz" or k == 1:
            raw.append((f, fmt, 0, -1))
        elif fmt == "jsonl":
            cuts = [size * i // k for i in range(k + 1)]
            raw += [(f, fmt, cuts[i], cuts[i + 1] if i + 1 < k else -1) for i in range(k)]
        else:  # parquet: runs of row groups balanced by their byte sizes
            groups = _parquet_row_groups(f)
            k = min(k, max(1, len(groups)))
            if k == 1:
                raw.append((f, fmt, 0, -1))
                continue
            cum, acc = [], 0
            for g in groups:
                acc += max(1, g)
                cum.append(acc)
            bounds, G = [0], len(groups)
            for t in range(1, k):  # first group past t/k of the bytes, every run non-empty
                want = next(i for i, c in enumerate(cum) if c >= acc * t / k) + 1
                bounds.append(max(bounds[-1] + 1, min(want, G - (k - t))))
            bounds.append(G)
            raw += [(f, fmt, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    n = len(raw)
    return [Shard(path=p, format=fmt, start=a, stop=b, index=i, count=n) for i, (p, fmt, a, b) in enumerate(raw)]


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------

def iter_shard_lines(shard: Shard) -> Iterator[Tuple[int, bytes]]:
    """``(byte offset, line)`` of every line that starts inside a JSONL shard (gzip: whole file,
    offsets are line numbers)."""
    if shard.format == "jsonl.gz":
        with open_binary(shard.path) as raw, gzip.open(raw, "rb") as fh:
            for i, line in enumerate(fh, start=1):
                yield i, line
        return
    if shard.format != "jsonl":
        raise InputError(f"not a JSONL shard (format {shard.format})", path=shard.path)
    with open_binary(shard.path) as fh:
        pos = shard.start
        if pos > 0:  # the line straddling the cut belongs to the previous shard
            fh.seek(pos - 1)
            skipped = fh.readline()
            pos = pos - 1 + len(skipped)
        stop = shard.stop
        readline = fh.readline
        while stop < 0 or pos < stop:
            line = readline()
            if not line:
                return
            yield pos, line
            pos += len(line)


class ShardWhere:
    """Where a row of a shard stands: ``<file>: line <n>`` (JSONL; for a byte range the number is
    counted only when needed, e.g. for an error message) or ``<file>: row <n>`` (Parquet, 1-based).
    Calling it (or :meth:`line`) gives the number; :attr:`known` is it when already known."""

    __slots__ = ("path", "kind", "offset", "known")

    def __init__(self, path: str, kind: str = "line", known: Optional[int] = None, offset: int = 0):
        self.path, self.kind, self.known, self.offset = path, kind, known, offset

    def line(self) -> int:
        if self.known is None:
            self.known = line_at(self.path, self.offset)
        return self.known

    __call__ = line

    def __str__(self) -> str:
        return f"{self.path}: {self.kind} {self.line()}"

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def open_parquet(path: str):
    """A ``pyarrow.parquet.ParquetFile``, or an InputError naming a file that is not one."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(open_binary(path) if is_url(path) or path.startswith("file://") else path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError for non-Parquet bytes
        raise InputError(f"not a readable Parquet file ({type(exc).__name__}: {exc})", path=path) from None


def iter_shard_text_lines(shard: Shard) -> Iterator[Tuple[str, ShardWhere]]:
    """Decoded non-blank lines of a JSONL shard with their :class:`ShardWhere`, read as the
    whole-file readers read them: a BOM at the start of the file dropped, bytes that are not UTF-8
    an error naming file and line, a corrupt gzip stream an error naming the last good line."""
    import zlib

    from capaudit.io.text import check_line

    gz = shard.format == "jsonl.gz"
    path = shard.path
    last = 0
    try:
        for off, raw in iter_shard_lines(shard):
            last = off
            line = raw.decode("utf-8-sig" if off == (1 if gz else 0) else "utf-8", "surrogateescape")
            where = ShardWhere(path, known=off) if gz else ShardWhere(path, offset=off)
            if not line.isascii():
                check_line(line, path, where.line())
            if line.strip():
                yield line, where
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"truncated or corrupt gzip data after line {last} ({exc})", path=path) from None


def iter_shard_objects(shard: Shard) -> Iterator[Tuple[Dict[str, Any], ShardWhere]]:
    """``(row, where)`` of every row of a JSONL or Parquet shard, with the whole-file readers' values
    and error messages (``<file>: line <n>: not valid JSON (...)``, ``... expected a JSON object``)."""
    if shard.format == "parquet":
        pf = open_parquet(shard.path)
        md = pf.metadata
        stop = md.num_row_groups if shard.stop < 0 else shard.stop
        n = sum(md.row_group(g).num_rows for g in range(shard.start))
        for batch in pf.iter_batches(batch_size=8192, row_groups=list(range(shard.start, stop))):
            for row in batch.to_pylist():
                n += 1
                yield row, ShardWhere(shard.path, "row", n)
        return
    for line, where in iter_shard_text_lines(shard):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(value, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(value).__name__}")
        yield value, where


def iter_shard_records(shard: Shard, columns: Optional[Sequence[str]] = None) -> Iterator[Tuple[Dict[str, Any], str]]:
    """``(row, where)`` for every row of a shard; ``where`` names the file and the line's byte
    offset (JSONL), line number (gzip) or row group and row (Parquet)."""
    if shard.format == "parquet":
        import pyarrow.parquet as pq

        with open_binary(shard.path) as fh:
            pf = pq.ParquetFile(fh)
            stop = pf.metadata.num_row_groups if shard.stop < 0 else shard.stop
            for rg in range(shard.start, stop):
                table = pf.read_row_group(rg, columns=list(columns) if columns else None)
                for i, row in enumerate(table.to_pylist()):
                    yield row, f"{shard.path}: row group {rg} row {i}"
        return
    unit = "line" if shard.format == "jsonl.gz" else "byte"
    try:
        from orjson import loads as fast_loads  # optional: C speed for plain JSON
    except ImportError:  # pragma: no cover
        fast_loads = json.loads
    for off, line in iter_shard_lines(shard):
        if not line.strip():
            continue
        try:
            try:
                row = fast_loads(line)
            except ValueError:  # NaN, lone surrogates, huge integers: the standard parser decides
                row = json.loads(line)
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc})", path=f"{shard.path} ({unit} {off})") from None
        if not isinstance(row, dict):
            raise InputError(f"expected a JSON object, got {type(row).__name__}", path=f"{shard.path} ({unit} {off})")
        yield row, f"{shard.path} ({unit} {off})"


#: A caption rule: ``rule(row, caption_field, where, on_missing) -> (field used, [(index, caption)])``
#: (field ``None`` with no captions: no caption field in the row), e.g.
#: :func:`capaudit.surfaces.row_captions`; the caller supplies it, so the engine knows no loader.
CaptionRule = Callable[[Mapping[str, Any], Optional[str], str, str], Tuple[Optional[str], List[Tuple[int, str]]]]


def iter_shard_captions(shard: Shard, rule: CaptionRule, caption_field: Optional[str] = None,
                        on_missing: str = "error", stats: Optional[Dict[str, Any]] = None,
                        strip: bool = True) -> Iterator[str]:
    """Stripped (``strip=False``: as written) non-blank captions of a shard, each row read with the caption ``rule`` (the
    surfaces loader's per-row rules, spec §2.1: :func:`capaudit.surfaces.row_captions`):
    ``caption_field`` (a string or a list of strings per row) or, unset, the rule's default fields.
    A row whose ``caption_field`` is a plain string is read here without calling the rule (the same
    caption: the value stripped).

    A row without ``caption_field`` is an error naming the file, offset and field unless
    ``on_missing="skip"``. ``stats`` (a dict) counts ``rows``, ``records``,
    ``rows_without_caption`` = ``rows_missing_field`` + ``rows_empty_caption`` (of which
    ``rows_blank_caption``: a caption string empty after ``strip()``, not a null), and keeps the
    field names of the first 1,000 rows (``fields``) and the first row missing the field.
    """
    if on_missing not in ("error", "skip"):
        raise InputError(f"on_missing must be 'error' or 'skip', got {on_missing!r}")
    st = stats if stats is not None else {}
    for k in ("rows", "records", "rows_without_caption", "rows_missing_field", "rows_empty_caption",
              "rows_blank_caption"):
        st.setdefault(k, 0)
    fields: Dict[str, None] = st.setdefault("fields", {})
    cols = [caption_field] if (caption_field and shard.format == "parquet") else None
    rows = ((r, (lambda w=w: w)) for r, w in iter_shard_records(shard, cols)) if shard.format == "parquet" \
        else _jsonl_rows(shard)
    for row, where in rows:
        st["rows"] += 1
        if st["rows"] <= 1000:
            for k in row:
                fields.setdefault(str(k), None)
        if caption_field:  # the common case first: a plain string
            value = row.get(caption_field, _MISSING)
            if type(value) is str:
                kept = value.strip()
                if kept:
                    st["records"] += 1
                    yield kept if strip else value
                else:
                    st["rows_without_caption"] += 1
                    st["rows_empty_caption"] += 1
                    st["rows_blank_caption"] += 1
                continue
        used, caps = rule(row, caption_field, where(), "skip")
        if not caps:
            st["rows_without_caption"] += 1
            if used is None:
                if caption_field and on_missing == "error":
                    raise InputError(f"caption field is missing (fields here: "
                                     f"{', '.join(sorted(str(k) for k in row))}); set on_missing: skip "
                                     f"(CLI: --on-missing skip) to skip rows without it",
                                     path=where(), field=caption_field)
                st["rows_missing_field"] += 1
            else:
                st["rows_empty_caption"] += 1
                st["rows_blank_caption"] += isinstance(row.get(used), str)
            continue
        for _, cap in caps:
            st["records"] += 1
            yield cap


_MISSING = object()


def _jsonl_rows(shard: Shard):
    """``(row, where)`` of a JSONL shard; ``where`` is a callable (built only for errors)."""
    try:
        from orjson import loads as fast_loads
    except ImportError:  # pragma: no cover
        fast_loads = json.loads
    unit = "line" if shard.format == "jsonl.gz" else "byte"
    path = shard.path
    for off, line in iter_shard_lines(shard):
        try:
            row = fast_loads(line)
        except ValueError:
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise InputError(f"not valid JSON ({exc})", path=f"{path} ({unit} {off})") from None
        if type(row) is not dict:
            raise InputError(f"expected a JSON object, got {type(row).__name__}", path=f"{path} ({unit} {off})")
        yield row, (lambda off=off: f"{path} ({unit} {off})")


__all__ = ["CaptionRule", "Shard", "SHARD_SUFFIXES", "default_num_shards", "expand_inputs", "file_format", "ShardWhere", "is_url", "iter_shard_captions", "iter_shard_objects", "iter_shard_text_lines", "line_at", "open_binary", "open_parquet",
           "iter_shard_lines", "iter_shard_records", "list_shards"]
