"""The run's HTML report: ``outputs/<run>/report/index.html`` from the same table models and figures
as the PDF (``capaudit report --params P``, ``make report``; ``make paper`` builds it after the PDF).

One self-contained file (figures embedded, no network): a summary page, a page per audit axis with
every table (sortable) and figure (its data table one click away), the caveats that travel with the
data beside the numbers they qualify, the quoted numbers, and a provenance row per element that every
table row links to. A run with no table and no figure is refused: no empty report is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from capaudit.errors import InputError
from capaudit.io.atomic import write_text_atomic

from . import report_html as H
from .absent_reasons import AbsentReasons, reasons_for_params
from .manuscript import PAPER_DIR
from .report_inputs import FigureEntry, ManuscriptElement, RunContent, in_run, manuscript_elements, read_run
from .table_model import CAVEATS, Provenance, Table

#: audit axes in report order: key, page title, other spellings of the key
AXES: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = (
    ("text", "Surfaces & text", ("surfaces", "text_stats", "surface")),
    ("prompts", "Prompt support", ("prompt_support", "prompt")),
    ("claims", "Claims", ("claim",)),
    ("judges", "Judges", ("judge",)),
    ("real_judges", "Real judges", ("realjudges", "real")),
    ("detail", "Detail", ("details",)),
    ("alttext", "Alt-text", ("alt_text", "alt-text")),
    ("human", "Human verification", ("human_verification", "humans")),
    ("embed", "Embedding", ("embedding", "embeddings", "encoder")),
    ("recap", "Recaptioning", ("recaptioning",)),
)
_ALIASES = {alias: key for key, _, aliases in AXES for alias in (key, *aliases)}

NUMBERS_PROVENANCE = Provenance(element="numbers", files=("numbers.json", "tables/numbers.tex"), notebook="paper_numbers",
                                function="capaudit.paper.run.run_numbers",
                                inputs=("paper.inputs", "artifacts/numbers/*.json"))


def axis_key(axis: str) -> str:
    """The report page of a table's ``axis`` (known spellings folded; an unknown axis gets its own page)."""
    a = axis.strip().lower().replace(" ", "_")
    return _ALIASES.get(a, a)


def axis_title(key: str) -> str:
    return next((title for k, title, _ in AXES if k == key), key.replace("_", " ").capitalize())


def _order(ids: Sequence[str], manuscript: Sequence[ManuscriptElement]) -> List[str]:
    """Ids in manuscript order, then the ones it does not show (sorted)."""
    pos: Dict[str, int] = {}
    for i, m in enumerate(manuscript):
        pos.setdefault(m.stem, i)
    return sorted(ids, key=lambda x: (pos.get(x, len(pos)), x))


class Report:
    """The pages of one run's report."""

    def __init__(self, content: RunContent, manuscript: Sequence[ManuscriptElement], params: Optional[str],
                 reasons: Optional[AbsentReasons] = None):
        self.c = content
        self.reasons = reasons or AbsentReasons()
        self.manuscript = list(manuscript)
        self.params = params
        self.tables = {t.id: t for t in content.tables}
        self.figures = {f.stem: f for f in content.figures}
        self.ran = {n.name for n in content.notebooks}

    def axes(self) -> List[str]:
        """Axis keys with at least one element, known axes first."""
        present = {axis_key(t.axis) for t in self.c.tables}
        present |= {axis_key(f.data.axis) for f in self.c.figures if f.data is not None}
        known = [k for k, _, _ in AXES if k in present]
        return known + sorted(present - set(known)) + (["other"] if any(f.data is None for f in self.c.figures) else [])

    def on_axis(self, key: str) -> Tuple[List[Table], List[FigureEntry]]:
        tables = [self.tables[i] for i in _order([t.id for t in self.c.tables if axis_key(t.axis) == key],
                                                  self.manuscript)]
        stems = [f.stem for f in self.c.figures
                 if (axis_key(f.data.axis) if f.data is not None else "other") == key]
        return tables, [self.figures[s] for s in _order(stems, self.manuscript)]

    # --- pages ------------------------------------------------------------------------------------

    def axis_page(self, key: str) -> str:
        tables, figures = self.on_axis(key)
        caveats = sorted({c for t in tables for c in t.caveats} | {c for f in figures if f.data for c in f.data.caveats})
        head = (f'<p class="muted">{len(tables)} table{"s" * (len(tables) != 1)}, '
                f'{len(figures)} figure{"s" * (len(figures) != 1)}. Click a column header to sort; '
                f'"src" leads to the row\'s provenance.</p>')
        if caveats:
            head += "<p>Caveats on this page:</p>" + H.caveat_list(caveats)
        body = "".join(H.table_block(t) for t in tables) + "".join(H.figure_block(f.stem, f.png, f.data) for f in figures)
        return H.page(key, axis_title(key), head + body)

    def summary_page(self) -> str:
        cards = []
        for key in self.axes():
            tables, figures = self.on_axis(key)
            links = [f'<li><a href="#table-{H.e(t.id)}">{H.e(t.title)}</a></li>' for t in tables]
            links += [f'<li><a href="#figure-{H.e(f.stem)}">{H.e(f.data.title if f.data else f.stem)}</a> (figure)</li>'
                      for f in figures]
            cav = sorted({c for t in tables for c in t.caveats} | {c for f in figures if f.data for c in f.data.caveats})
            cards.append(f'<div class="card"><h3><a href="#page-{H.e(key)}">{H.e(axis_title(key))}</a></h3>'
                         f'<div class="muted">{len(tables)} tables, {len(figures)} figures'
                         + (f' · caveats: {H.e(", ".join(cav))}' if cav else "") + f"</div><ul>{''.join(links)}</ul></div>")
        body = f'<div class="cards">{"".join(cards)}</div>'
        body += self._caveats_section() + self._absent_section()
        return H.page("summary", "Summary", body)

    def _caveats_section(self) -> str:
        where: Dict[str, List[str]] = {}
        for t in self.c.tables:
            for c in t.caveats:
                where.setdefault(c, []).append(f'<a href="#table-{H.e(t.id)}">{H.e(t.id)}</a>')
        for f in self.c.figures:
            for c in f.data.caveats if f.data else ():
                where.setdefault(c, []).append(f'<a href="#figure-{H.e(f.stem)}">{H.e(f.stem)}</a> (figure)')
        if not where:
            return "<h3>Caveats</h3><p>No table or figure of this run carries a caveat.</p>"
        items = "".join(f'<li class="caveat"><b>{H.e(c)}</b>: {H.e(CAVEATS.get(c, ""))} — {", ".join(els)}</li>'
                        for c, els in sorted(where.items()))
        return f'<h3>Caveats that travel with the data</h3><ul class="caveats">{items}</ul>'

    def _absent_section(self) -> str:
        out = ""
        absent = [m for m in self.manuscript if not in_run(m, self.c.run_dir)]
        if absent:
            why = self.reasons.elements
            items = "".join(f"<li><code>{H.e(m.file)}</code> ({m.kind})"
                            + (f": {H.e(why[m.file])}" if m.file in why else "") + "</li>" for m in absent)
            out += (f"<h3>Not produced by this run</h3><p>{len(absent)} of the manuscript's {len(self.manuscript)} "
                    f"tables and figures have no file in this run (the PDF leaves them out too)"
                    + (", each with the reason" if all(m.file in why for m in absent) else "") + ".</p>"
                    f"<details><summary>The {len(absent)} files</summary><ul>{items}</ul></details>")
        if self.reasons.unrendered_inputs:
            items = "".join(f"<li><code>{H.e(f)}</code>: {H.e(r)}</li>" for f, r in self.reasons.unrendered_inputs.items())
            out += ("<h3>Inputs no element renders</h3><p>Files this run is given that no table or figure shows, "
                    f"and why:</p><ul>{items}</ul>")
        if self.c.tex_without_model:
            items = "".join(f"<li><code>{H.e(n)}</code></li>" for n in self.c.tex_without_model)
            out += (f'<div class="warnbox"><b>Tables without a model:</b> these LaTeX tables of the run have no '
                    f"<code>.table.json</code>, so this report cannot show them:<ul>{items}</ul></div>")
        bare = [f.stem for f in self.c.figures if f.data is None]
        if bare:
            out += ('<div class="warnbox"><b>Figures without data:</b> '
                    + ", ".join(f"<code>{H.e(s)}</code>" for s in bare) + " (shown without a data table)</div>")
        if self.c.numbers is None:
            out += '<p class="muted">No <code>numbers.json</code> in this run (paper_numbers did not run).</p>'
        return out

    def provenance_page(self) -> str:
        entries = [(t.id, t.id, "table", f"#table-{t.id}", t.provenance, t.provenance.notebook in self.ran)
                   for t in sorted(self.c.tables, key=lambda t: t.id)]
        entries += [(H.figure_data_id(f.stem), f.stem, "figure", f"#figure-{f.stem}", f.data.provenance,
                     f.data.provenance.notebook in self.ran) for f in self.c.figures if f.data is not None]
        if self.c.numbers is not None:
            entries.append(("numbers", "numbers", "numbers", "#table-numbers", NUMBERS_PROVENANCE,
                            "paper_numbers" in self.ran))
        nbs = "".join(f"<tr><td><code>{H.e(n.name)}</code></td><td>{H.e(n.date)}</td><td><code>{H.e(n.stamp[:16])}</code></td></tr>"
                      for n in self.c.notebooks)
        notebooks = ('<h3>Notebooks executed in this run</h3><table><thead><tr><th>Notebook</th><th>Executed</th>'
                     f'<th>Stamp (sha256 of notebook and inputs)</th></tr></thead><tbody>{nbs}</tbody></table>'
                     if nbs else '<p class="muted">No executed notebook in this run folder.</p>')
        return H.page("provenance", "Provenance",
                      "<p>Paper element → files → notebook → function → inputs, one row per element.</p>"
                      + H.provenance_rows(entries) + notebooks)

    def html(self) -> str:
        axes = self.axes()
        nav = [("summary", "Summary", 0)]
        nav += [(k, axis_title(k), sum(map(len, self.on_axis(k)))) for k in axes]
        pages = [self.summary_page()] + [self.axis_page(k) for k in axes]
        if self.c.numbers is not None:
            nav.append(("numbers", "Numbers", len(self.c.numbers)))
            pages.append(H.page("numbers", "Numbers quoted in the text", H.numbers_table(self.c.numbers)))
        nav.append(("provenance", "Provenance", 0))
        pages.append(self.provenance_page())
        run = self.c.run_dir.name
        meta = (f"run <b>{H.e(run)}</b> · params <code>{H.e(self.params or 'not given')}</code> · "
                f"newest output {H.e(self.c.date())} · {len(self.c.tables)} tables, {len(self.c.figures)} figures")
        return H.document(f"capaudit report: {run}", meta, nav, pages)


def build_report(run_dir: Path, params: Optional[str] = None, manuscript: Optional[Path] = None,
                 out: Optional[Path] = None) -> Path:
    """Write ``<run_dir>/report/index.html`` (or ``out``) atomically; returns its path. A run without
    a table model and without a figure is refused (:class:`InputError`)."""
    content = read_run(Path(run_dir))
    if content.empty:
        raise InputError("this run has no table models (tables/*.table.json) and no figures (figures/*.png): "
                         "nothing to report; run its notebooks first (make paper)", path=run_dir)
    main_tex = Path(manuscript) if manuscript is not None else PAPER_DIR / "main.tex"
    elements = manuscript_elements(main_tex) if main_tex.is_file() else []
    target = Path(out) if out is not None else Path(run_dir) / "report" / "index.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(target, Report(content, elements, params, reasons_for_params(params)).html())


__all__ = ["AXES", "Report", "axis_key", "axis_title", "build_report"]
