"""Strict readers of the reference study's published summaries (``paper.inputs`` of the reference run).

The adapters ``reference_inputs_<axis>.py`` turn a published TSV/CSV/JSON into the rows of the
table and figure models our own stages produce for the same manuscript element. Every value is taken
as published (parsed, never re-rounded); a missing file, a missing column or a value that does not
parse is refused with one line naming the file, the row (1 = header) and the field
(:class:`~capaudit.errors.InputError`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import InputError

PathLike = Union[str, Path]
#: one published row: its 1-based row number in the file (1 = header) and its cells by column
Row = Tuple[int, Dict[str, str]]


def read_text(path: PathLike, what: str = "published summary") -> str:
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} not found (set CAPAUDIT_REFERENCE_DIR or fix paper.inputs)", path=p) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"unreadable {what} ({exc})", path=p) from None


def read_delimited(path: PathLike, required: Sequence[str], delimiter: str = "\t") -> List[Row]:
    """The rows of a published TSV (``delimiter="\\t"``) or CSV, each with its row number; a missing
    required column is refused naming the header row and the column."""
    text = read_text(path)
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = list(reader.fieldnames or [])
    for col in required:
        if col not in header:
            raise InputError(f"column is missing (columns present: {', '.join(header) or 'none'})",
                             path=path, line=1, field=col)
    out: List[Row] = []
    for r in reader:
        lineno = reader.line_num  # the physical line where the record ends (blank lines, multi-line cells)
        if not any((v or "").strip() for v in r.values() if isinstance(v, str)):
            continue
        if None in r or any(r.get(c) is None for c in header):
            raise InputError(f"expected {len(header)} cells", path=path, line=lineno)
        out.append((lineno, {k: v for k, v in r.items() if k is not None}))
    if not out:
        raise InputError("no data rows", path=path, line=1)
    return out


def read_json(path: PathLike) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg})", path=path, line=exc.lineno) from None


def number(path: PathLike, row: Row, field: str) -> float:
    """A finite number of a published row."""
    lineno, cells = row
    raw = cells.get(field)
    try:
        v = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"expected a number, got {raw!r}", path=path, line=lineno, field=field) from None
    if not math.isfinite(v):
        raise InputError(f"expected a finite number, got {raw!r}", path=path, line=lineno, field=field)
    return v


def integer(path: PathLike, row: Row, field: str) -> int:
    """A whole number of a published row (``223.0`` is 223; ``223.5`` is refused)."""
    v = number(path, row, field)
    if v != int(v):
        raise InputError(f"expected a whole number, got {row[1].get(field)!r}", path=path, line=row[0], field=field)
    return int(v)


def text(path: PathLike, row: Row, field: str) -> str:
    """A non-empty text cell of a published row."""
    raw = (row[1].get(field) or "").strip()
    if not raw:
        raise InputError("expected a non-empty value", path=path, line=row[0], field=field)
    return raw


def json_number(path: PathLike, obj: Mapping[str, Any], key: str, loc: str) -> float:
    """A finite number ``obj[key]`` of a published JSON file (``loc`` names where ``obj`` is)."""
    where = f"{loc}.{key}" if loc else key
    if not isinstance(obj, Mapping) or key not in obj:
        raise InputError("required field is missing", path=path, field=where)
    v = obj[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        raise InputError(f"expected a finite number, got {v!r}", path=path, field=where)
    return v


def json_int(path: PathLike, obj: Mapping[str, Any], key: str, loc: str) -> int:
    v = json_number(path, obj, key, loc)
    if not isinstance(v, int):
        raise InputError(f"expected an integer, got {v!r}", path=path, field=f"{loc}.{key}" if loc else key)
    return v


def json_mapping(path: PathLike, obj: Any, key: Optional[str], loc: str) -> Mapping[str, Any]:
    """``obj[key]`` (or ``obj`` itself when ``key`` is None) as a JSON object."""
    where = f"{loc}.{key}" if key and loc else (key or loc or "(top level)")
    value = obj.get(key) if key is not None and isinstance(obj, Mapping) else (obj if key is None else None)
    if not isinstance(value, Mapping):
        raise InputError("expected a JSON object" + ("" if value is not None else " (missing)"), path=path, field=where)
    return value


__all__ = ["Row", "integer", "json_int", "json_mapping", "json_number", "number", "read_delimited", "read_json",
           "read_text", "text"]
