"""Writing one figure's files: ``<name>.pdf``, ``<name>.png`` (200 dpi), ``<name>.csv`` (the plotted rows)
and ``<name>.table.json`` (the same rows as a table model: the HTML report shows it beside the figure).

PDF and PNG carry no timestamps or software version, so a rerun writes the same bytes. Every figure
writer passes a :class:`FigureInfo` (title, audit axis, notebook, function, caveats) with its rows to
:func:`write_figure_data`, directly or through :func:`save_figure_files`.
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.io.atomic import write_json_atomic

from .table_model import Column, Provenance, Table


@dataclass(frozen=True)
class FigureInfo:
    """What the report says about a figure: its title, audit axis, the notebook and function that
    draw it, the caveats that travel with its data and notes (backends, definitions)."""

    title: str
    axis: str
    notebook: str
    function: str
    caveats: Tuple[str, ...] = ()
    notes: Tuple[str, ...] = ()
    inputs: Tuple[str, ...] = ()


def _plain(v: Any) -> Any:
    if hasattr(v, "item") and not isinstance(v, (str, bytes, list, dict)):  # numpy scalars
        return v.item()
    return v


def plain_rows(rows: Sequence[Any]) -> List[Dict[str, Any]]:
    """Dataclass or mapping rows as plain dicts (numpy scalars as Python numbers)."""
    return [{k: _plain(v) for k, v in (asdict(r) if is_dataclass(r) else dict(r)).items()} for r in rows]


def _kind(values: Sequence[Any]) -> Tuple[str, int]:
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not present or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in present):
        return "text", 2
    if all(isinstance(v, int) for v in present):
        return "int", 0
    tiny = any(0 < abs(v) < 1e-3 for v in present)
    return ("sci", 3) if tiny else ("num", 3)


def infer_columns(rows: Sequence[Mapping[str, Any]]) -> Tuple[Column, ...]:
    """One column per key (first-seen order): whole numbers ``int``, other numbers ``num`` with three
    decimals (``sci`` where some value is below 0.001), anything else text."""
    keys: Dict[str, None] = {}
    for r in rows:
        for k in r:
            keys.setdefault(k, None)
    out = []
    for k in keys:
        kind, d = _kind([r.get(k) for r in rows])
        out.append(Column(key=k, label=k.replace("_", " "), kind=kind, decimals=d))
    return tuple(out)


def figure_table(name: str, rows: Sequence[Any], info: FigureInfo, files: Sequence[str] = ()) -> Table:
    """The plotted rows of figure ``name`` as a table model."""
    data = plain_rows(rows)
    prov = Provenance(element=name, files=tuple(files) or (f"figures/{name}.pdf", f"figures/{name}.png"),
                      notebook=info.notebook, function=info.function, inputs=info.inputs)
    return Table(id=name, title=info.title, axis=info.axis, columns=infer_columns(data), rows=data, provenance=prov,
                 notes=info.notes, caveats=info.caveats)


def write_figure_data(out_dir: Path, name: str, rows: Sequence[Any], info: FigureInfo) -> Path:
    """``out_dir/<name>.table.json``: the figure's plotted rows as a table model (atomically)."""
    out_dir = Path(out_dir)
    files = [f"figures/{name}.{ext}" for ext in ("pdf", "png", "csv") if (out_dir / f"{name}.{ext}").exists()]
    return write_json_atomic(out_dir / f"{name}.table.json", figure_table(name, rows, info, files).to_json())


def save_figure_files(fig: Any, out_dir: Path, name: str, rows: Sequence[Mapping[str, Any]],
                      info: Optional[FigureInfo] = None) -> Dict[str, Path]:
    """Save ``fig`` as ``out_dir/<name>.pdf`` and ``.png`` and ``rows`` as ``<name>.csv`` (columns: the
    first row's keys) and, given ``info``, ``<name>.table.json``; returns the paths by suffix."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"pdf": out_dir / f"{name}.pdf", "png": out_dir / f"{name}.png", "csv": out_dir / f"{name}.csv"}
    fig.savefig(paths["pdf"], bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
    fig.savefig(paths["png"], bbox_inches="tight", dpi=200, metadata={"Software": None})
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        names = list(rows[0]) if rows else []
        w = csv.DictWriter(fh, fieldnames=names, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(dict(r))
    if info is not None:
        paths["model"] = write_figure_data(out_dir, name, rows, info)
    return paths


__all__ = ["FigureInfo", "figure_table", "infer_columns", "plain_rows", "save_figure_files", "write_figure_data"]
