"""Stage tables: the rows each stage wrote (``summaries.table_rows``) made into table models.

Every ``paper/tables_<axis>.py`` module registers a builder per table id with :func:`builder`; a
builder takes the rows file (``rows``, ``meta``, ``function``, ``inputs``) and returns a
:class:`~capaudit.paper.table_model.Table`. :func:`render_stage_tables` renders every rows file of a
run to ``tables/<id>.{csv,tex,table.json}``; a rows file no builder knows is an error.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError
from capaudit.summaries.table_rows import iter_table_rows, read_table_rows

from .render import write_table
from .table_model import Column, Provenance, Table

Builder = Callable[[Mapping[str, Any]], Table]
_BUILDERS: Dict[str, Tuple[Builder, str]] = {}
_LOADED = False


def builder(table_id: str, notebook: str) -> Callable[[Builder], Builder]:
    """Register ``fn`` as the builder of ``table_id`` (rows written by ``notebook``); an id ending in
    ``*`` is a prefix (``alttext_funnel_*``: one table per corpus) used when no exact id matches."""
    def register(fn: Builder) -> Builder:
        if table_id in _BUILDERS:
            raise ValueError(f"table {table_id!r} has two builders")
        _BUILDERS[table_id] = (fn, notebook)
        return fn
    return register


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    pkg = Path(__file__).parent
    for m in sorted(pkgutil.iter_modules([str(pkg)]), key=lambda m: m.name):
        if m.name.startswith("tables_"):
            importlib.import_module(f"{__package__}.{m.name}")
    _LOADED = True


def _entry(table: str) -> Optional[Tuple[Builder, str]]:
    """The builder of ``table``: its exact id, else the longest matching prefix pattern."""
    if table in _BUILDERS:
        return _BUILDERS[table]
    prefixes = [k for k in _BUILDERS if k.endswith("*") and table.startswith(k[:-1])]
    return _BUILDERS[max(prefixes, key=len)] if prefixes else None


def known_tables() -> Dict[str, str]:
    """Table id → the notebook whose stage writes its rows."""
    _load()
    return {k: nb for k, (_, nb) in sorted(_BUILDERS.items())}


def provenance(data: Mapping[str, Any], run_dir: Optional[Path] = None, extra_files: Sequence[str] = ()) -> Provenance:
    """The provenance of a rows file: element → rows file (+ summaries) → notebook → function → inputs."""
    _load()
    table = str(data["table"])
    path = Path(str(data.get("path") or f"artifacts/tables/{table}.json"))
    if run_dir is not None:
        try:
            path = path.resolve().relative_to(Path(run_dir).resolve())
        except ValueError:
            pass
    return Provenance(element=table, files=(str(path), *extra_files), notebook=(_entry(table) or (None, "?"))[1],
                      function=str(data["function"]), inputs=tuple(str(i) for i in data.get("inputs", ())))


def build_table(data: Mapping[str, Any], run_dir: Optional[Path] = None) -> Table:
    """The table model of one rows file."""
    _load()
    table = str(data["table"])
    entry = _entry(table)
    if entry is None:
        raise InputError(f"no paper builder for table {table!r} (known: {', '.join(sorted(_BUILDERS))})",
                         path=data.get("path"), field="table")
    fn, _ = entry
    return fn({**data, "provenance": provenance(data, run_dir)})


def stage_table(path: Path, run_dir: Optional[Path] = None) -> Table:
    """The table model of the rows file at ``path``."""
    return build_table({**read_table_rows(path), "path": str(path)}, run_dir)


def render_stage_tables(artifacts_dir: Path, tables_dir: Path, run_dir: Optional[Path] = None) -> List[Table]:
    """Render every stage table of a run (CSV, LaTeX, model JSON); returns the models. A table whose
    stage computed no rows is not rendered (an empty table is not a result), and its files of an
    earlier run are removed so the paper never shows them."""
    out = []
    for data in iter_table_rows(artifacts_dir):
        if not data["rows"]:
            for suffix in (".csv", ".tex", ".table.json"):
                (Path(tables_dir) / f"{data['table']}{suffix}").unlink(missing_ok=True)
            continue
        t = build_table(data, run_dir)
        write_table(t, tables_dir)
        out.append(t)
    return out


def columns(*specs: Tuple[Any, ...]) -> Tuple[Column, ...]:
    """``columns(("key", "Label", "int"), ("key2", "Label 2", "num", 3))``: compact column lists."""
    out = []
    for s in specs:
        key, label, kind, *rest = s
        kw: Dict[str, Any] = {}
        if rest:
            if isinstance(rest[0], int):
                kw["decimals"] = rest.pop(0)
            for extra in rest:
                kw.update(extra)
        out.append(Column(key=key, label=label, kind=kind, **kw))
    return tuple(out)


__all__ = ["Builder", "build_table", "builder", "columns", "known_tables", "provenance", "render_stage_tables",
           "stage_table"]
