"""Table rows a stage computed, for the paper layer to render (stages write no LaTeX, HTML or CSV).

``<artifacts>/tables/<table>.json`` = ``{"table", "stage", "function", "inputs", "rows", "meta"}``:
the rows (plain JSON values, NaN as null), the function that computed them and its inputs (the
provenance the report links every number to), and ``meta`` (definitions, backends and counts the
table's notes print). ``paper.stage_tables`` turns each into a table model.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic

PathLike = Union[str, Path]
_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def rows_path(artifacts_dir: PathLike, table: str) -> Path:
    return Path(artifacts_dir) / "tables" / f"{table}.json"


def _plain(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item") and not isinstance(v, (list, dict, str)):  # numpy scalars
        return _plain(v.item())
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def write_table_rows(artifacts_dir: PathLike, table: str, stage: str, rows: Sequence[Mapping[str, Any]],
                     function: str, inputs: Sequence[str] = (), meta: Optional[Mapping[str, Any]] = None) -> Path:
    """Write one table's rows (atomically); ``function`` is the dotted name that computed them."""
    if not _ID.match(table):
        raise InputError("table ids are letters, digits, '_', '.' and '-' (they name files)", field=table)
    payload = {"table": table, "stage": stage, "function": function, "inputs": [str(i) for i in inputs],
               "rows": [_plain(dict(r)) for r in rows], "meta": _plain(dict(meta or {}))}
    return write_json_atomic(rows_path(artifacts_dir, table), payload)


def read_table_rows(path: PathLike) -> Dict[str, Any]:
    """One rows file, checked for its keys."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"unreadable table rows ({exc})", path=p) from None
    for k in ("table", "stage", "function", "rows"):
        if k not in data:
            raise InputError(f"table rows file has no {k!r}", path=p, field=k)
    if not isinstance(data["rows"], list):
        raise InputError("'rows' is not a list", path=p, field="rows")
    data.setdefault("meta", {})
    data.setdefault("inputs", [])
    return data


def iter_table_rows(artifacts_dir: PathLike) -> Iterator[Dict[str, Any]]:
    """Every rows file of a run, by table id."""
    for p in sorted((Path(artifacts_dir) / "tables").glob("*.json")):
        yield {**read_table_rows(p), "path": str(p)}


def rows_frame(rows: List[Mapping[str, Any]]) -> Any:
    """The rows as a pandas DataFrame (for a notebook's display)."""
    import pandas as pd

    return pd.DataFrame(list(rows))


__all__ = ["iter_table_rows", "read_table_rows", "rows_frame", "rows_path", "write_table_rows"]
