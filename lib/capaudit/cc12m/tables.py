"""Row tables of the bridge (joined table, image manifest): JSONL or Parquet, chosen by suffix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Sequence, Tuple, Union

from capaudit.errors import InputError
from capaudit.io.atomic import atomic_path
from capaudit.surfaces.readers import iter_json_lines, read_parquet

PathLike = Union[str, Path]
TABLE_SUFFIXES = (".jsonl", ".parquet")


def table_format(path: PathLike) -> str:
    """``jsonl`` or ``parquet`` from the suffix of ``path``; anything else is refused."""
    suffix = Path(path).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(f"expected a .jsonl or .parquet file name, got suffix {suffix or 'none'!r}", path=path)
    return suffix[1:]


def write_table_to(rows: Sequence[Mapping[str, Any]], path: PathLike, fmt: str) -> None:
    """Write ``rows`` to ``path`` (no atomicity: the caller gives a temporary path)."""
    if fmt == "jsonl":
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: Dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    table = pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows]) if rows else pa.table({})
    pq.write_table(table, str(path))


def write_table(rows: Sequence[Mapping[str, Any]], path: PathLike) -> Path:
    """Write ``rows`` atomically as JSONL or Parquet (by the suffix of ``path``)."""
    fmt = table_format(path)
    with atomic_path(path) as tmp:
        write_table_to(rows, tmp, fmt)
    return Path(path)


def read_table(path: PathLike) -> Iterator[Tuple[Dict[str, Any], str, int]]:
    """``(row, "FILE: line N", N)`` of a JSONL or Parquet table."""
    p = Path(path)
    if not p.is_file():
        raise InputError("file not found", path=p)
    if table_format(p) == "jsonl":
        for lineno, row in iter_json_lines(p):
            yield dict(row), f"{p}: line {lineno}", lineno
    else:
        for n, (row, where) in enumerate(read_parquet(p), start=1):
            yield dict(row), where, n


def read_rows(path: PathLike) -> List[Tuple[Dict[str, Any], str, int]]:
    return list(read_table(path))


__all__ = ["TABLE_SUFFIXES", "table_format", "write_table_to", "write_table", "read_table", "read_rows"]
