"""A :class:`~capaudit.paper.table_model.Table` as CSV, LaTeX and HTML: one set of formatters.

LaTeX numbers use ``paper.fmt`` (reference-spec §5.5), text the one escaping rule ``tex_escape``;
HTML prints the same numbers in plain text with a ``data-sort`` value per cell. A missing value
(None or NaN) is printed as ``--`` / ``n/a`` and left empty in the CSV: never a zero.
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.io.atomic import write_json_atomic, write_text_atomic

from .fmt import ADDLINESPACE, tex_escape
from .table_model import CAVEATS, Column, Table

MISSING_TEX = "--"
MISSING_HTML = "n/a"


def missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


# --- one number format per kind: (number text, is math) ---------------------------------------------

def _number(col: Column, v: Any, row: Mapping[str, Any]) -> Optional[str]:
    """The number of a cell as plain text (``-`` for minus), or None when it is missing."""
    if missing(v):
        return None
    d = col.decimals
    if col.kind == "int":
        return format(int(v), ",")
    if col.kind == "num":
        return f"{float(v):.{d}f}"
    if col.kind == "signed":
        return f"{float(v):+.{d}f}"
    if col.kind == "pct":
        return f"{100 * float(v):.{d}f}%"
    if col.kind == "sci":
        return f"{float(v):.{d}e}"
    if col.kind == "pm":
        s = row.get(col.std_key or "")
        return f"{float(v):.{d}f}" + ("" if missing(s) else f" ± {float(s):.{d}f}")
    if col.kind == "ci":
        lo, hi = row.get(col.lo_key or ""), row.get(col.hi_key or "")
        return f"{float(v):.{d}f}" + ("" if missing(lo) or missing(hi) else f" [{float(lo):.{d}f}, {float(hi):.{d}f}]")
    if col.kind == "count_of":
        n = row.get(col.std_key or "")
        return f"{int(v):,}" + ("" if missing(n) else f"/{int(n):,}")
    raise ValueError(col.kind)


def tex_cell(col: Column, row: Mapping[str, Any]) -> str:
    """One LaTeX cell."""
    v = row.get(col.key)
    if col.kind == "text":
        text = MISSING_TEX if missing(v) else tex_escape(v)
    else:
        n = _number(col, v, row)
        if n is None:
            text = MISSING_TEX
        elif col.kind in ("int", "count_of"):
            text = "$" + n.replace(",", "{,}") + "$"
        elif col.kind == "ci":
            est, _, interval = n.partition(" ")
            text = f"${est}$" + (rf" {{\scriptsize {interval}}}" if interval else "")
        else:
            text = "$" + n.replace("%", r"\%").replace(" ± ", r" \pm ").replace("e+", r"\mathrm{e}{+}").replace("e-", r"\mathrm{e}{-}") + "$"
    if col.mark_key and row.get(col.mark_key):
        text += r"$^{\dagger}$"
    return text


def html_cell(col: Column, row: Mapping[str, Any]) -> str:
    v = row.get(col.key)
    text = (MISSING_HTML if missing(v) else str(v)) if col.kind == "text" else (_number(col, v, row) or MISSING_HTML)
    if col.mark_key and row.get(col.mark_key):
        text += "†"
    return text


def _grouped(table: Table) -> List[Dict[str, Any]]:
    """Rows with the repeated values of ``group`` columns blanked, and a group-start flag."""
    gcols = [c.key for c in table.columns if c.group]
    out, prev = [], None
    for r in table.rows:
        key = tuple(r.get(k) for k in gcols)
        out.append({"row": r, "start": bool(gcols) and prev is not None and key != prev,
                    "blank": set(gcols) if gcols and key == prev else set()})
        prev = key
    return out


# --- LaTeX ----------------------------------------------------------------------------------------

def to_latex(table: Table) -> str:
    """The table file the manuscript reads: ``%`` note lines, then rows (``\\tablerows``) or a whole
    booktabs tabular (``\\tabfileinput``), then ``%`` footnote lines."""
    lines = [f"% {n}" for n in table.notes]
    for c in table.caveats:
        lines.append(f"% {c}: {CAVEATS[c]}")
    header = [c.tex_label if c.tex_label is not None else tex_escape(c.label) for c in table.columns]
    if table.latex == "rows" and table.columns_line:
        lines.append("% columns: " + " & ".join(header))
    body = []
    for g in _grouped(table):
        if g["start"]:
            body.append(ADDLINESPACE)
        body.append(" & ".join("" if c.key in g["blank"] else tex_cell(c, g["row"]) for c in table.columns) + r" \\")
    if table.latex == "tabular":
        spec = "".join("r" if c.numeric else "l" for c in table.columns)
        lines += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule",
                  *body, r"\bottomrule", r"\end{tabular}"]
    else:
        lines += body
    lines += [f"% {f}" for f in table.footnotes]
    return "\n".join(lines) + "\n"


# --- CSV ------------------------------------------------------------------------------------------

def to_csv(table: Table) -> str:
    """Every row key (or ``csv_columns``), raw values; missing values empty."""
    import csv

    keys = table.csv_keys()
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(keys)
    for r in table.rows:
        w.writerow(["" if missing(r.get(k)) else _csv_value(r.get(k)) for k in keys])
    return buf.getvalue()


def _csv_value(v: Any) -> Any:
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (list, tuple, dict)):
        import json

        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    return v


# --- HTML -----------------------------------------------------------------------------------------

def to_html(table: Table, provenance_href: str = "") -> str:
    """A sortable ``<table>`` (the report's script sorts by ``data-sort``), caption, notes and caveats
    beside it, and a provenance link per row."""
    e = html.escape
    head = "".join(
        f'<th data-kind="{c.kind}" scope="col">{e(c.label)}{f" <span class=unit>({e(c.unit)})</span>" if c.unit else ""}</th>'
        for c in table.columns)
    prov = provenance_href or f"#prov-{table.id}"
    rows = []
    for i, g in enumerate(_grouped(table)):
        cells = []
        for c in table.columns:
            v = g["row"].get(c.key)
            sort = "" if missing(v) else e(str(v), quote=True)
            shown = "" if c.key in g["blank"] else e(html_cell(c, g["row"]))
            cls = ' class="num"' if c.numeric else ""
            cells.append(f'<td{cls} data-sort="{sort}">{shown}</td>')
        rows.append(f'<tr id="{e(table.id)}-r{i}">{"".join(cells)}'
                    f'<td class="prov"><a href="{e(prov)}" title="provenance">src</a></td></tr>')
    notes = "".join(f"<li>{e(n)}</li>" for n in (*table.notes, *table.footnotes))
    caveats = "".join(f'<li class="caveat"><b>{e(c)}</b>: {e(CAVEATS[c])}</li>' for c in table.caveats)
    return (f'<figure class="table" id="table-{e(table.id)}" data-table="{e(table.id)}">'
            f'<figcaption>{e(table.title)}</figcaption>'
            f'<table class="sortable"><thead><tr>{head}<th class="prov">provenance</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
            + (f'<ul class="caveats">{caveats}</ul>' if caveats else "")
            + (f'<ul class="notes">{notes}</ul>' if notes else "")
            + "</figure>")


# --- files ----------------------------------------------------------------------------------------

def write_table(table: Table, tables_dir: Path) -> Dict[str, Path]:
    """``<id>.csv``, ``<id>.tex`` and the model ``<id>.table.json`` (the report's input), atomically."""
    tables_dir = Path(tables_dir)
    tables_dir.mkdir(parents=True, exist_ok=True)
    return {"csv": write_text_atomic(tables_dir / f"{table.id}.csv", to_csv(table)),
            "tex": write_text_atomic(tables_dir / f"{table.id}.tex", to_latex(table)),
            "model": write_json_atomic(tables_dir / f"{table.id}.table.json", table.to_json())}


__all__ = ["MISSING_HTML", "MISSING_TEX", "html_cell", "missing", "tex_cell", "to_csv", "to_html", "to_latex",
           "write_table"]
