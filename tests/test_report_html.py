"""The run's HTML report (``capaudit report``): built from the table models and figures of a run,
self-contained (no request leaves the file), every table row linked to a provenance row, caveats beside
the tables and figures they qualify, every table and figure the PDF shows for the run present; and in
headless Chromium: no console error, no external request, every page navigable, a table sorts, a
figure's data opens, a provenance link lands on its row, a screenshot of each page kept under the run."""

from __future__ import annotations

import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest

from capaudit.config import load_config
from capaudit.errors import InputError
from capaudit.paper.figure_files import FigureInfo, save_figure_files
from capaudit.paper.render import write_table
from capaudit.paper.report import axis_key, build_report
from capaudit.paper.report_inputs import in_run, manuscript_elements
from capaudit.paper.stage_tables import columns
from capaudit.paper.table_model import Provenance, Table

from _browser import CHROMIUM, FLAGS

REPO = Path(__file__).resolve().parents[1]
MAIN_TEX = REPO / "paper" / "main.tex"
MAX_SHOT_HEIGHT = 16_000  # px: a very long page is kept from its top


class _Links(HTMLParser):
    """Every id, every href/src, and the report's table/figure markers of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: Set[str] = set()
        self.duplicates: List[str] = []
        self.refs: List[Tuple[str, str]] = []
        self.tables: List[str] = []
        self.figures: List[str] = []
        self.csp = ""

    def handle_starttag(self, tag: str, attrs) -> None:
        a: Dict[str, str] = {k: v or "" for k, v in attrs}
        if "id" in a:
            if a["id"] in self.ids:
                self.duplicates.append(a["id"])
            self.ids.add(a["id"])
        for k in ("href", "src", "action", "srcset", "poster", "data"):
            if k in a:
                self.refs.append((tag, a[k]))
        if "data-report-table" in a:
            self.tables.append(a["data-report-table"])
        if "data-report-figure" in a:
            self.figures.append(a["data-report-figure"])
        if tag == "meta" and a.get("http-equiv", "").lower() == "content-security-policy":
            self.csp = a.get("content", "")


def _parse(path: Path) -> _Links:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _plot(out: Path, name: str, rows, info: FigureInfo) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([r["x"] for r in rows], [r["y"] for r in rows], marker="o")
    save_figure_files(fig, out, name, rows, info)
    plt.close(fig)


def small_run(root: Path) -> Path:
    """A run folder written by the real writers: two tables (one with a caveat and a missing value),
    a figure with its data and caveat, and a figure whose writer left no data table."""
    run = root / "small"
    prov = Provenance("judges_summary", ("artifacts/tables/judges_summary.json",), "05_judges",
                      "capaudit.judges.stage.summary_rows", ("data/coco_mini",))
    write_table(Table(id="judges_summary", title="Judged claims per judge and surface", axis="judges",
                      columns=columns(("judge", "Judge", "text", {"group": True}), ("surface", "Surface", "text"),
                                      ("risk", "Risk", "num", 3), ("questions", "Questions", "int")),
                      rows=[{"judge": "annotation (offline)", "surface": "b", "risk": 0.25, "questions": 12},
                            {"judge": "annotation (offline)", "surface": "a", "risk": None, "questions": 3},
                            {"judge": "ref-caption (offline)", "surface": "c", "risk": 0.1, "questions": 40}],
                      provenance=prov, notes=("offline judges are heuristics, not VLMs",), caveats=("offline judges",)),
                run / "tables")
    write_table(Table(id="text_stats", title="Text budget <B=64>", axis="surfaces",
                      columns=columns(("surface", "Surface", "text"), ("eligibility", "Eligibility", "pct", 1)),
                      rows=[{"surface": "s & t", "eligibility": 0.5}],
                      provenance=Provenance("text_stats", ("artifacts/tables/text_stats.json",), "02_text_stats",
                                            "capaudit.text.stage.rows")), run / "tables")
    _plot(run / "figures", "human_confusion", [{"x": 0, "y": 3}, {"x": 1, "y": 5}],
          FigureInfo("Judge vs human", "human", "11_human_agreement", "capaudit.paper.human_figures.plot_confusion",
                     ("simulated annotators",)))
    _plot(run / "figures", "budget_curves", [{"x": 16, "y": 0.5}, {"x": 32, "y": 0.9}],
          FigureInfo("Budget curves", "text", "02_text_stats", "capaudit.paper.text_figures.plot_budget_curves"))
    (run / "figures" / "budget_curves.table.json").unlink()  # a writer that leaves no data
    return run


def _check_self_contained(page: _Links) -> None:
    assert page.csp.startswith("default-src 'none'") and page.duplicates == []
    for tag, ref in page.refs:
        assert not re.match(r"\s*(https?:|//|file:|ftp:)", ref, re.I), (tag, ref[:80])  # nothing to fetch
        if tag == "img":
            assert ref.startswith("data:image/png;base64,"), ref[:40]
        else:
            assert ref.startswith("#") and ref[1:] in page.ids, (tag, ref)  # every in-page link resolves


# --- the builder -----------------------------------------------------------------------------------

def test_empty_run_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    run = tmp_path / "empty"
    (run / "tables").mkdir(parents=True)
    (run / "tables" / "numbers.tex").write_text("% numbers\n")
    with pytest.raises(InputError, match="nothing to report"):
        build_report(run)
    assert not (run / "report" / "index.html").exists()
    with pytest.raises(InputError, match="no such run folder"):
        build_report(tmp_path / "absent")


def test_a_broken_model_is_named(tmp_path: Path) -> None:
    run = small_run(tmp_path)
    (run / "tables" / "bad.table.json").write_text('{"id": "bad", "title": "t"}')
    with pytest.raises(InputError, match=r"bad\.table\.json field 'axis'"):
        build_report(run)
    (run / "tables" / "bad.table.json").write_text("{not json")
    with pytest.raises(InputError, match=r"bad\.table\.json:1: table model is not valid JSON"):
        build_report(run)


def test_report_is_self_contained_with_provenance_and_caveats(tmp_path: Path) -> None:
    run = small_run(tmp_path)
    (run / "tables" / "orphan.tex").write_text("a & b \\\\\n")  # LaTeX without a model: said, not hidden
    manuscript = tmp_path / "main.tex"
    manuscript.write_text("\\tablerows{judges_summary.tex}\n% \\tablerows{commented.tex}\n"
                          "\\includefig[0.5\\textwidth]{human_confusion.pdf}\n\\tablerows{recap_summary.tex}\n")
    out = build_report(run, params="params/small.yaml", manuscript=manuscript)
    assert out == run / "report" / "index.html"
    page = _parse(out)
    _check_self_contained(page)
    html = out.read_text(encoding="utf-8")
    # every table row links to its element's provenance row, which names file, notebook, function, input
    assert html.count('href="#prov-judges_summary"') == 3 and "prov-judges_summary" in page.ids
    row = re.search(r'<tr id="prov-judges_summary">(.*?)</tr>', html).group(1)
    for part in ("artifacts/tables/judges_summary.json", "05_judges", "capaudit.judges.stage.summary_rows", "data/coco_mini"):
        assert part in row
    assert 'href="#prov-fig-human_confusion"' in html and "prov-fig-human_confusion" in page.ids
    # caveats beside the table and the figure they qualify, and listed on the summary
    table = re.search(r'<figure class="table" id="table-judges_summary".*?</figure>', html, re.S).group(0)
    assert "offline judges</b>: answers come from capaudit" in table and "offline heuristic judges" in table
    figure = re.search(r'<figure class="chart" id="figure-human_confusion".*?</figure>', html, re.S).group(0)
    assert "simulated annotators</b>: human labels are SIMULATED" in figure.split("<details")[0]
    assert "<details" in figure and "Data of this figure (2 rows)" in figure
    summary = re.search(r'<section class="page" id="page-summary">.*?</section>', html, re.S).group(0)
    assert "simulated annotators" in summary and "offline judges" in summary
    # the missing value is "n/a" (never 0), text is escaped, the axis alias lands on the text page
    assert ">n/a<" in table and "s &amp; t" in html and "Text budget &lt;B=64&gt;" in html
    assert 'id="page-text"' in html and axis_key("surfaces") == "text"
    # what the run did not produce, and what it cannot show, are said
    assert "recap_summary.tex" in summary and "commented.tex" not in html
    assert "orphan.tex" in summary and "budget_curves" in summary
    assert sorted(page.tables) == ["judges_summary", "text_stats"]
    assert sorted(page.figures) == ["budget_curves", "human_confusion"]
    assert "params/small.yaml" in html and "run <b>small</b>" in html


def test_cli_prints_the_path_and_refuses_in_one_line(tmp_path: Path, capsys) -> None:
    from capaudit.cli import main

    small_run(tmp_path)
    params = tmp_path / "small.yaml"
    params.write_text(f"run: small\nout_root: {tmp_path}\nnotebooks: []\n")
    assert main(["report", "--params", str(params)]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "small" / "report" / "index.html")
    params.write_text(f"run: nothing\nout_root: {tmp_path}\nnotebooks: []\n")
    (tmp_path / "nothing" / "figures").mkdir(parents=True)
    assert main(["report", "--params", str(params)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("capaudit report: error: ") and "nothing to report" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, reference_dir: Path) -> Path:
    """The reference run's paper elements (tables, figures, numbers) and its report."""
    if not (reference_dir / "results").is_dir():
        pytest.skip(f"no reference results in {reference_dir}")
    from capaudit.paper.run import run_all

    cfg = load_config(REPO / "params" / "reference.yaml", out_root=tmp_path_factory.mktemp("out"))
    run_all(cfg)
    build_report(cfg.out_dir, params="params/reference.yaml")
    return cfg.out_dir


def _pdf_elements(run: Path) -> Tuple[Set[str], Set[str]]:
    """Stems of the tables and figures the PDF shows for ``run`` (manuscript elements whose file exists)."""
    shown = [m for m in manuscript_elements(MAIN_TEX) if in_run(m, run)]
    return {m.stem for m in shown if m.kind == "table"}, {m.stem for m in shown if m.kind == "figure"}


def test_reference_report_has_every_table_and_figure_of_the_pdf(reference_run: Path) -> None:
    page = _parse(reference_run / "report" / "index.html")
    _check_self_contained(page)
    tables, figures = _pdf_elements(reference_run)
    assert len(tables) == 18 and len(figures) == 7
    assert tables <= set(page.tables) and figures <= set(page.figures)
    html = (reference_run / "report" / "index.html").read_text(encoding="utf-8")
    assert html.count("<details class=\"figure-data\">") == 7  # every figure's data one click away
    assert 'id="prov-numbers"' in html and "caNumCells" in html


# --- in headless Chromium ----------------------------------------------------------------------------

def _demo_run() -> Path:
    run = REPO / "outputs" / "demo"
    if not any((run / "tables").glob("*.table.json")):
        pytest.skip("outputs/demo has no table models: run `make paper` first")
    build_report(run, params="params/demo.yaml")
    return run


def _browse(run: Path) -> Dict[str, object]:
    """Open the run's report in headless Chromium and walk it; screenshots to ``report/screenshots``."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    index = run / "report" / "index.html"
    shots = run / "report" / "screenshots"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    errors: List[str] = []
    requests: List[str] = []
    out: Dict[str, object] = {}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
        page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url[:80]}"))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(index.as_uri())
        pages = page.eval_on_selector_all("nav a", "as => as.map(a => a.getAttribute('href').slice(1))")
        assert pages[0] == "page-summary" and pages[-1] == "page-provenance"
        for pid in pages:
            page.click(f"nav a[href='#{pid}']")
            page.wait_for_selector(f"section#{pid}.active", state="visible", timeout=5_000)
            assert page.eval_on_selector_all(
                "section.page", "ps => ps.filter(p => p.offsetParent !== null).length") == 1, pid
            height = min(page.evaluate("document.documentElement.scrollHeight"), MAX_SHOT_HEIGHT)
            page.screenshot(path=str(shots / f"{pid[len('page-'):]}.png"), full_page=True,
                            clip={"x": 0, "y": 0, "width": 1280, "height": height})
        out["pages"] = pages
        out["tables"] = page.eval_on_selector_all("[data-report-table]", "es => es.map(e => e.dataset.reportTable)")
        out["figures"] = page.eval_on_selector_all("[data-report-figure]", "es => es.map(e => e.dataset.reportFigure)")
        # a table sorts on a header click: ascending, then descending, missing values last
        first = page.locator("[data-report-table] table.sortable").first
        page.goto(index.as_uri() + "#" + first.evaluate("t => t.closest('figure').id"))
        th = first.locator("thead th[data-kind]:not([data-kind=text])").first
        col = th.evaluate("th => th.cellIndex")
        read = f"t => Array.from(t.tBodies[0].rows).map(r => r.cells[{col}].getAttribute('data-sort'))"
        th.click()
        up = first.evaluate(read)
        th.click()
        down = first.evaluate(read)
        nums_up = [float(x) for x in up if x]
        assert nums_up == sorted(nums_up) and [float(x) for x in down if x] == sorted(nums_up, reverse=True)
        assert all(x == "" for x in up[len(nums_up):]) and all(x == "" for x in down[len(nums_up):])
        assert th.get_attribute("aria-sort") == "descending"
        # a figure's data table opens
        if out["figures"]:
            fig = page.locator("figure.chart details.figure-data").first
            page.goto(index.as_uri() + "#" + fig.evaluate("d => d.closest('figure').id"))
            assert not fig.locator("table").is_visible()
            fig.locator("summary").click()
            assert fig.locator("table").is_visible() and fig.locator("tbody tr").count() > 0
        # a row's provenance link lands on its provenance row
        page.goto(index.as_uri() + "#page-summary")
        link = first.locator("td.prov a").first
        target = link.get_attribute("href")
        page.goto(index.as_uri() + "#" + first.evaluate("t => t.closest('figure').id"))
        link.click()
        page.wait_for_selector("section#page-provenance.active", state="visible", timeout=5_000)
        assert page.is_visible(target) and page.evaluate(f"document.querySelector('{target}').classList.contains('target')")
        # every image decoded
        assert page.evaluate("Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
        browser.close()
    out["errors"] = errors
    out["external"] = [u for u in requests if not (u.startswith("file://") or u.startswith("data:"))]
    out["shots"] = sorted(shots.glob("*.png"))
    return out


def _check_browse(run: Path, seen: Dict[str, object]) -> None:
    assert seen["errors"] == [] and seen["external"] == []
    tables, figures = _pdf_elements(run)
    assert tables <= set(seen["tables"]), f"tables of the PDF missing in the report: {sorted(tables - set(seen['tables']))}"
    assert figures <= set(seen["figures"]), f"figures of the PDF missing in the report: {sorted(figures - set(seen['figures']))}"
    assert [p.stem for p in seen["shots"]] == sorted(p[len("page-"):] for p in seen["pages"])
    assert all(p.stat().st_size > 5_000 for p in seen["shots"])


def test_reference_report_in_chromium(reference_run: Path) -> None:
    _check_browse(reference_run, _browse(reference_run))


def test_small_run_report_in_chromium(tmp_path: Path) -> None:
    run = small_run(tmp_path)
    build_report(run, params="params/small.yaml")
    seen = _browse(run)
    assert seen["errors"] == [] and seen["external"] == []
    assert "page-human" in seen["pages"] and "page-other" in seen["pages"]


@pytest.mark.slow
def test_demo_report_in_chromium() -> None:
    """The demo's report (after ``make paper``): every table and figure of its PDF, screenshots kept in
    ``outputs/demo/report/screenshots``."""
    run = _demo_run()
    seen = _browse(run)
    _check_browse(run, seen)
    assert not [f for f in seen["figures"] if not (run / "figures" / f"{f}.table.json").is_file()], \
        "figures of the demo without their data table"
