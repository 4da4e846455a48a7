"""What the HTML report reads from a run folder, and what the manuscript shows.

* tables: ``tables/<id>.table.json`` (the models every table of the run writes beside its ``.tex``);
* figures: ``figures/<stem>.png`` with ``figures/<stem>.table.json`` (the plotted rows);
* ``numbers.json`` (the quoted numbers), the executed notebooks and their stamps;
* the manuscript's elements (``paper/main.tex``): the tables and figures the PDF shows when their file
  exists, so the report can say which of them this run did not produce.

A file that cannot be read is an :class:`~capaudit.errors.InputError` naming it (and the field).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from capaudit.errors import InputError

from .table_model import Table


@dataclass(frozen=True)
class FigureEntry:
    """One figure of the run: its PNG and (when its writer left one) the model of its plotted rows."""

    stem: str
    png: Path
    data: Optional[Table]


@dataclass(frozen=True)
class NotebookRun:
    """An executed notebook of the run: name, stamp (sha256 of notebook + inputs) and date."""

    name: str
    stamp: str
    date: str


@dataclass(frozen=True)
class ManuscriptElement:
    """A table or figure ``paper/main.tex`` includes: kind, the file name it reads, its stem, line."""

    kind: str
    file: str
    line: int

    @property
    def stem(self) -> str:
        return Path(self.file).stem


@dataclass
class RunContent:
    """Everything of one run the report shows."""

    run_dir: Path
    tables: List[Table]
    figures: List[FigureEntry]
    numbers: Optional[Dict[str, Any]]
    notebooks: List[NotebookRun]
    tex_without_model: List[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.tables and not self.figures

    def date(self) -> str:
        """The newest output of the run (tables, figures, executed notebooks), UTC."""
        files = [p for d in ("tables", "figures", "notebooks") for p in (self.run_dir / d).glob("*") if p.is_file()]
        if not files:
            return "unknown"
        return _utc(max(p.stat().st_mtime for p in files))


def _utc(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def read_model(path: Path) -> Table:
    """One ``*.table.json``; a file that is not a table model is refused, naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"unreadable table model ({exc})", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"table model is not valid JSON ({exc.msg}); rerun the notebook that wrote it",
                         path=path, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("table model must be a JSON object", path=path)
    for key in ("id", "title", "axis", "columns", "rows", "provenance"):
        if key not in data:
            raise InputError("table model has no such key; rerun the notebook that wrote it", path=path, field=key)
    try:
        return Table.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a table model ({exc})", path=path) from None


def read_numbers(path: Path) -> Optional[Dict[str, Any]]:
    """``numbers.json`` (name → value, text, source, description), ``None`` when the run has none."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg})", path=path, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("numbers map must be a JSON object", path=path)
    for name, entry in data.items():
        if not isinstance(entry, dict) or "text" not in entry:
            raise InputError("each number needs a 'text'", path=path, field=name)
    return data


def read_notebooks(run_dir: Path) -> List[NotebookRun]:
    """The executed notebooks of the run (``notebooks/<name>.ipynb``) with their stamps."""
    out = []
    for nb in sorted((run_dir / "notebooks").glob("*.ipynb")):
        if nb.name.startswith(".") or nb.name.endswith(".failed.ipynb"):
            continue
        stamp = run_dir / "stamps" / f"{nb.stem}.sha256"
        out.append(NotebookRun(nb.stem, stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else "",
                               _utc(nb.stat().st_mtime)))
    return out


def read_run(run_dir: Path) -> RunContent:
    """The tables, figures, numbers and notebooks of ``run_dir`` (missing folders: nothing of that kind)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError("no such run folder: run the run's notebooks first (make paper)", path=run_dir)
    tables = [read_model(p) for p in sorted((run_dir / "tables").glob("*.table.json"))]
    with_model = {t.id for t in tables}
    figures = []
    for png in sorted((run_dir / "figures").glob("*.png")):
        model = png.with_name(f"{png.stem}.table.json")
        figures.append(FigureEntry(png.stem, png, read_model(model) if model.is_file() else None))
    bare = [p.name for p in sorted((run_dir / "tables").glob("*.tex")) if p.stem not in with_model and p.name != "numbers.tex"]
    return RunContent(run_dir, tables, figures, read_numbers(run_dir / "numbers.json"), read_notebooks(run_dir), bare)


_INCLUDE = re.compile(r"\\(tablerows|tabfileinput|tabfilelong|includefig)(?:\[[^\]]*\])?\{([^}#]+)\}")


def manuscript_elements(main_tex: Path) -> List[ManuscriptElement]:
    """Every ``\\tablerows``, ``\\tabfileinput``, ``\\tabfilelong`` (tables) and ``\\includefig``
    (figures) of the manuscript, in order, once each (comment lines skipped)."""
    out: List[ManuscriptElement] = []
    seen = set()
    for i, line in enumerate(Path(main_tex).read_text(encoding="utf-8").splitlines(), start=1):
        code = re.split(r"(?<!\\)%", line, maxsplit=1)[0]
        for m in _INCLUDE.finditer(code):
            kind = "figure" if m.group(1) == "includefig" else "table"
            if (kind, m.group(2)) not in seen:
                seen.add((kind, m.group(2)))
                out.append(ManuscriptElement(kind, m.group(2), i))
    return out


def in_run(element: ManuscriptElement, run_dir: Path) -> bool:
    """Whether the run has the element's file (the PDF shows it then)."""
    return (Path(run_dir) / ("figures" if element.kind == "figure" else "tables") / element.file).is_file()


__all__ = ["FigureEntry", "ManuscriptElement", "NotebookRun", "RunContent", "in_run", "manuscript_elements",
           "read_model", "read_numbers", "read_notebooks", "read_run"]
