"""The HTML of the report: one self-contained page (inline CSS and script, figures as data URIs).

Pages (one shown at a time, picked by the URL's ``#``): a summary, one page per audit axis, the
quoted numbers and the provenance (one row ``id="prov-<id>"`` per element). The script sorts a table
by the ``data-sort`` values of the clicked column (missing values last), shows the page holding the
anchor a link points at and opens the ``<details>`` around it. A Content-Security-Policy lets the page
load nothing but itself and ``data:`` images.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple

from .render import to_html
from .table_model import CAVEATS, Provenance, Table

e = html.escape

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"

CSS = """
:root{--fg:#1d1d1f;--muted:#5f6368;--line:#d0d4d9;--bg:#fff;--accent:#1f5fa8;--warn:#fff4e5;--warnline:#e8a33d}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:14px 24px;border-bottom:1px solid var(--line)}
header h1{font-size:20px;margin:0 0 4px}
header .meta{color:var(--muted);font-size:13px}
nav{position:sticky;top:0;background:#f6f7f9;border-bottom:1px solid var(--line);padding:6px 18px;z-index:2}
nav a{display:inline-block;padding:4px 10px;margin:2px;border-radius:4px;color:var(--accent);text-decoration:none}
nav a.current{background:var(--accent);color:#fff}
nav a .n{font-size:11px;opacity:.75}
main{padding:8px 24px 48px;max-width:1400px}
.js .page{display:none}.js .page.active{display:block}
.page>h2{font-size:18px;border-bottom:2px solid var(--accent);padding-bottom:4px}
figure{margin:20px 0;padding:0}
figure.table,figure.chart{border:1px solid var(--line);border-radius:6px;padding:10px 12px;overflow-x:auto}
figcaption{font-weight:600;margin-bottom:6px}
figcaption .id{font-weight:400;color:var(--muted);font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
table{border-collapse:collapse;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid #eceef1;text-align:left;vertical-align:top}
th{background:#f6f7f9;position:relative;min-width:4em}
.scroll{overflow-x:auto}
table.sortable th:not(.prov):not(.nosort){cursor:pointer}
th[aria-sort=ascending]::after{content:" \\25B2";font-size:10px}
th[aria-sort=descending]::after{content:" \\25BC";font-size:10px}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.prov a,th.prov{font-size:11px;color:var(--muted)}
.unit{color:var(--muted);font-weight:400}
ul.caveats{list-style:none;padding:6px 10px;margin:8px 0;background:var(--warn);border-left:4px solid var(--warnline)}
ul.notes{color:var(--muted);font-size:12px;margin:6px 0;padding-left:18px}
figure.chart img{max-width:min(100%,900px);height:auto;display:block;background:#fff}
details{margin-top:8px}
summary{cursor:pointer;color:var(--accent)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:12px}
.card{border:1px solid var(--line);border-radius:6px;padding:10px 12px}
.card h3{margin:0 0 4px;font-size:15px}
.card a{color:var(--accent)}
.muted{color:var(--muted)}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
tr:target,tr.target{background:#fff8c5}
.warnbox{background:var(--warn);border-left:4px solid var(--warnline);padding:8px 12px}
"""

SCRIPT = """
(function(){
  document.documentElement.classList.add('js');
  function pageOf(el){ return el && (el.classList.contains('page') ? el : el.closest('.page')); }
  function show(id){
    var el = id ? document.getElementById(decodeURIComponent(id)) : null;
    var page = pageOf(el) || document.querySelector('.page');
    document.querySelectorAll('.page').forEach(function(p){ p.classList.toggle('active', p === page); });
    document.querySelectorAll('nav a').forEach(function(a){
      a.classList.toggle('current', a.getAttribute('href') === '#' + page.id); });
    document.querySelectorAll('.target').forEach(function(t){ t.classList.remove('target'); });
    if (el && el !== page) {
      for (var d = el.closest('details'); d; d = d.parentElement.closest('details')) { d.open = true; }
      el.classList.add('target');
      el.scrollIntoView({block: 'center'});
    } else { window.scrollTo(0, 0); }
  }
  function key(cell){ var v = cell ? cell.getAttribute('data-sort') : null; return v === null ? '' : v; }
  function sortBy(table, col, th){
    var numeric = (th.getAttribute('data-kind') || 'text') !== 'text';
    var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
    table.querySelectorAll('thead th').forEach(function(h){ h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.forEach(function(r){ Array.prototype.forEach.call(r.cells, function(c){
      if (c.textContent === '' && key(c) !== '') { c.textContent = key(c); } }); });
    rows.sort(function(a, b){
      var x = key(a.cells[col]), y = key(b.cells[col]);
      if (x === '' || y === '') { return (x === '') - (y === ''); }
      var a = parseFloat(x), b = parseFloat(y);
      if (numeric && !isNaN(a) && !isNaN(b)) { return dir * (a - b); }
      return dir * x.localeCompare(y, undefined, {numeric: true});
    });
    rows.forEach(function(r){ body.appendChild(r); });
  }
  document.querySelectorAll('table.sortable').forEach(function(table){
    table.querySelectorAll('thead th').forEach(function(th, col){
      if (th.classList.contains('prov') || th.classList.contains('nosort')) { return; }
      th.tabIndex = 0;
      th.addEventListener('click', function(){ sortBy(table, col, th); });
      th.addEventListener('keydown', function(ev){ if (ev.key === 'Enter') { sortBy(table, col, th); } });
    });
  });
  window.addEventListener('hashchange', function(){ show(location.hash.slice(1)); });
  show(location.hash.slice(1));
})();
"""


def data_uri(png: Path) -> str:
    """A PNG as a ``data:`` URI (the report fetches nothing)."""
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


def plain_tex(text: Any) -> str:
    """A quoted number's LaTeX text as plain text (``$4{,}467$`` → ``4,467``)."""
    s = str(text)
    for a, b in (("{,}", ","), (r"\%", "%"), (r"\pm", "±"), (r"\to", "→"), (r"\times", "×"), (r"\_", "_"),
                 (r"\,", " "), ("~", " ")):
        s = s.replace(a, b)
    s = re.sub(r"\\(?:mathbf|textbf|mathrm|text|emph)\{([^}]*)\}", r"\1", s)
    return s.replace("$", "").strip()


def caveat_list(caveats: Iterable[str]) -> str:
    items = "".join(f'<li class="caveat"><b>{e(c)}</b>: {e(CAVEATS.get(c, ""))}</li>' for c in caveats)
    return f'<ul class="caveats">{items}</ul>' if items else ""


def table_block(table: Table) -> str:
    """A table of an axis page (``data-report-table``: the test counts these)."""
    return (f'<div class="element" data-report-table="{e(table.id)}">'
            + to_html(table).replace("</figcaption>", f' <span class="id">{e(table.id)}</span></figcaption>', 1)
            + "</div>")


def figure_data_id(stem: str) -> str:
    """The id of a figure's data table (figures and tables may share a name)."""
    return f"fig-{stem}"


def figure_block(stem: str, png: Path, data: Optional[Table]) -> str:
    """A figure, its caveats and its data table one click away (``<details>``)."""
    title = data.title if data is not None else stem.replace("_", " ")
    caveats = caveat_list(data.caveats) if data is not None else ""
    if data is not None:
        t = replace(data, id=figure_data_id(stem), caveats=())  # the caveats are shown under the figure
        body = (f'<details class="figure-data"><summary>Data of this figure ({len(data.rows)} rows)</summary>'
                f"{to_html(t)}</details>")
    else:
        body = '<p class="muted">This figure\'s writer left no data table (figures/<code>' + e(stem) + '.table.json</code>).</p>'
    return (f'<figure class="chart" id="figure-{e(stem)}" data-report-figure="{e(stem)}">'
            f'<figcaption>{e(title)} <span class="id">{e(stem)}</span></figcaption>'
            f'<img alt="{e(title)}" src="{data_uri(png)}">{caveats}{body}</figure>')


def page(page_id: str, title: str, body: str) -> str:
    return f'<section class="page" id="page-{e(page_id)}"><h2>{e(title)}</h2>{body}</section>'


def provenance_rows(entries: Sequence[Tuple[str, str, str, str, Provenance, bool]]) -> str:
    """One row ``id="prov-<anchor>"`` per element: (anchor, name, kind, href of the element shown,
    provenance, whether its notebook was executed in this run)."""
    rows = []
    for anchor, name, kind, shown, p, ran in entries:
        files = "<br>".join(f"<code>{e(f)}</code>" for f in p.files)
        inputs = "<br>".join(f"<code>{e(i)}</code>" for i in p.inputs) or '<span class="muted">none named</span>'
        nb = f"<code>{e(p.notebook)}</code>" + ("" if ran else ' <span class="muted">(not executed in this run)</span>')
        rows.append(f'<tr id="prov-{e(anchor)}"><td data-sort="{e(name)}"><a href="{e(shown)}">{e(name)}</a></td>'
                    f'<td data-sort="{e(kind)}">{e(kind)}</td><td data-sort="{e(p.element)}"><code>{e(p.element)}</code></td>'
                    f'<td>{files}</td><td data-sort="{e(p.notebook)}">{nb}</td>'
                    f'<td data-sort="{e(p.function)}"><code>{e(p.function)}</code></td><td>{inputs}</td></tr>')
    return ('<div class="scroll"><table class="sortable provenance"><thead><tr><th data-kind="text">Shown as</th>'
            '<th data-kind="text">Kind</th><th data-kind="text">Paper element</th><th class="nosort">Files</th>'
            '<th data-kind="text">Notebook</th><th data-kind="text">Function</th><th class="nosort">Inputs</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def numbers_table(numbers: Mapping[str, Mapping[str, Any]]) -> str:
    """The quoted numbers (macro, printed text, description, source), each row linked to its provenance."""
    rows = []
    for name, n in numbers.items():
        value = n.get("value")
        sort = e(str(value)) if isinstance(value, (int, float)) and not isinstance(value, bool) else e(plain_tex(n["text"]))
        rows.append(f'<tr id="number-{e(name)}"><td data-sort="{e(name)}"><code>\\{e(name)}</code></td>'
                    f'<td class="num" data-sort="{sort}">{e(plain_tex(n["text"]))}</td>'
                    f'<td data-sort="{e(str(n.get("description", "")))}">{e(str(n.get("description", "")))}</td>'
                    f'<td data-sort="{e(str(n.get("source", "")))}">{e(str(n.get("source", "")))}</td>'
                    '<td class="prov"><a href="#prov-numbers" title="provenance">src</a></td></tr>')
    return ('<figure class="table" id="table-numbers"><figcaption>Numbers quoted in the text</figcaption>'
            '<table class="sortable"><thead><tr><th data-kind="text">Macro</th><th data-kind="num">Printed</th>'
            '<th data-kind="text">What</th><th data-kind="text">Source</th><th class="prov">provenance</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></figure>')


def document(title: str, meta: str, nav: Sequence[Tuple[str, str, int]], pages: Sequence[str]) -> str:
    """The whole page: header, navigation (page id, label, element count), pages."""
    links = "".join(f'<a href="#page-{e(pid)}">{e(label)}' + (f' <span class="n">{n}</span>' if n else "") + "</a>"
                    for pid, label, n in nav)
    return ("<!DOCTYPE html>\n"
            f'<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{e(title)}</title>'
            f"<style>{CSS}</style></head><body>"
            f'<header><h1>{e(title)}</h1><div class="meta">{meta}</div></header>'
            f'<nav>{links}</nav><main>{"".join(pages)}</main>'
            f"<script>{SCRIPT}</script></body></html>\n")


__all__ = ["CSP", "caveat_list", "data_uri", "document", "figure_block", "figure_data_id", "numbers_table", "page",
           "plain_tex", "provenance_rows", "table_block"]

