"""The one table model and its three renderings (CSV, LaTeX, HTML), and stage number formats."""

from __future__ import annotations

import json
import math

import pytest

from capaudit.errors import InputError
from capaudit.paper.fmt import tex_escape
from capaudit.paper.numbers import fragment_text
from capaudit.paper.render import to_csv, to_html, to_latex, write_table
from capaudit.paper.stage_tables import build_table, columns, known_tables, render_stage_tables
from capaudit.paper.table_model import Column, Provenance, Table
from capaudit.summaries.numbers_fragments import write_numbers_fragment
from capaudit.summaries.table_rows import read_table_rows, write_table_rows

PROV = Provenance(element="t", files=("artifacts/tables/t.json",), notebook="05_judges", function="m.f", inputs=("x",))


def _table(**kw):
    rows = [{"g": "A_1", "n": 4467, "m": 0.123456, "s": 0.01, "r": 0.924, "d": -1.5, "flag": True},
            {"g": "A_1", "n": 12, "m": float("nan"), "s": 0.02, "r": None, "d": 2.0, "flag": False},
            {"g": "B&C", "n": 1000000, "m": 1.0, "s": None, "r": 0.5, "d": 0.0, "flag": False}]
    cols = columns(("g", "Group", "text", {"group": True}), ("n", "N", "int"),
                   ("m", "Mean", "pm", 2, {"std_key": "s", "mark_key": "flag"}), ("r", "Rate", "pct", 1),
                   ("d", "Delta", "signed", 2))
    return Table(id="t", title="T", axis="judges", columns=cols, rows=rows, provenance=PROV, **kw)


def test_latex_rows_shape_formats_escapes_groups_and_missing():
    tex = to_latex(_table(notes=("a note_x",), footnotes=("after",)))
    lines = tex.splitlines()
    assert lines[0] == "% a note_x"
    assert lines[1] == r"% columns: Group & N & Mean & Rate & Delta"
    assert lines[2] == r"A\_1 & $4{,}467$ & $0.12 \pm 0.01$$^{\dagger}$ & $92.4\%$ & $-1.50$ \\"
    # the repeated group value is blank; a missing mean and rate print "--", never 0
    assert lines[3] == r" & $12$ & -- & -- & $+2.00$ \\"
    assert lines[4] == r"\addlinespace[0.2em]"
    assert lines[5] == r"B\&C & $1{,}000{,}000$ & $1.00$ & $50.0\%$ & $+0.00$ \\"
    assert lines[6] == "% after"


def test_latex_tabular_shape_has_booktabs_and_spec():
    tex = to_latex(_table(latex="tabular"))
    assert r"\begin{tabular}{lrrrr}" in tex and r"\toprule" in tex and tex.rstrip().endswith(r"\end{tabular}")
    assert "% columns:" not in tex


def test_caveat_travels_into_latex_and_html():
    t = _table(caveats=("offline judges",))
    assert "% offline judges: answers come from capaudit's offline heuristic judges" in to_latex(t)
    assert 'class="caveat"' in to_html(t)
    with pytest.raises(ValueError, match="unknown caveat"):
        _table(caveats=("nonsense",))


def test_csv_keeps_raw_values_and_leaves_missing_empty():
    lines = to_csv(_table()).splitlines()
    assert lines[0] == "g,n,m,s,r,d,flag"
    assert lines[1] == "A_1,4467,0.123456,0.01,0.924,-1.5,True"
    assert lines[2] == "A_1,12,,0.02,,2.0,False"


def test_html_escapes_sorts_and_links_provenance():
    h = to_html(_table())
    assert "B&amp;C" in h and 'data-sort="4467"' in h and "4,467" in h and "0.12 ± 0.01†" in h
    assert h.count('href="#prov-t"') == 3
    assert h.count("<tr") == 4  # header + 3 rows


def test_model_json_round_trip_and_nan_is_null(tmp_path):
    t = _table(caveats=("simulated annotators",))
    paths = write_table(t, tmp_path)
    data = json.loads(paths["model"].read_text())
    assert data["rows"][1]["m"] is None
    back = Table.from_json(data)
    assert back.columns == t.columns and back.caveats == t.caveats and back.provenance == t.provenance
    assert to_latex(back) == to_latex(Table(**{**t.__dict__, "rows": [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in t.rows]}))


def test_column_kinds_are_checked():
    with pytest.raises(ValueError, match="kind"):
        Column("x", "X", "weird")
    with pytest.raises(ValueError, match="std_key"):
        Column("x", "X", "pm")


def test_tex_escape_is_one_rule():
    assert tex_escape(r"a_b & c\d {x} 50% <p> ~^ #$") == (
        r"a\_b \& c\textbackslash{}d \{x\} 50\% \textless{}p\textgreater{} \textasciitilde{}\textasciicircum{} \#\$")


def test_stage_rows_to_table_files(tmp_path):
    art, tables = tmp_path / "artifacts", tmp_path / "tables"
    rows = [{"judge": "j", "judge_label": "Judge_1 (offline)", "surface_label": "S", "responses": 3, "questions": 10,
             "supported_cap": 1.5, "supported_cap_std": 0.2, "risk": 0.1, "risk_std": 0.01, "uncertain_rate": 0.0}]
    p = write_table_rows(art, "judges_summary", "judges", rows, function="capaudit.judges.stage_report.summary_rows",
                         inputs=["artifacts/judges/cells.json"], meta={"offline_judges": ["j"]})
    assert read_table_rows(p)["rows"] == rows
    out = render_stage_tables(art, tables, run_dir=tmp_path)
    assert [t.id for t in out] == ["judges_summary"]
    tex = (tables / "judges_summary.tex").read_text()
    assert r"Judge\_1 (offline) & S & $3$ & $10$ & $1.50 \pm 0.20$ & $0.100 \pm 0.010$ & $0.000$ \\" in tex
    assert out[0].provenance.files[0] == "artifacts/tables/judges_summary.json"
    assert out[0].provenance.notebook == "05_judges" and out[0].provenance.inputs == ("artifacts/judges/cells.json",)
    assert "judges_summary" in known_tables()


def test_unknown_stage_table_is_refused(tmp_path):
    write_table_rows(tmp_path, "no_such_table", "x", [{"a": 1}], function="m.f")
    with pytest.raises(InputError, match="no paper builder for table 'no_such_table'"):
        build_table(read_table_rows(tmp_path / "tables" / "no_such_table.json"))


@pytest.mark.parametrize("fmt,value,text", [("int", 4467, "4{,}467"), ("num:2", 0.125, "0.12"), ("num:1", 3.0, "3.0"),
                                            ("pct:1", 0.924, r"92.4\%"), ("signed:2", 1.5, "+1.50"),
                                            ("text", "a_b", r"a\_b"), ("list", ["x_1", "y"], r"x\_1, y")])
def test_fragment_formats(fmt, value, text):
    assert fragment_text({"value": value, "format": fmt}) == text


def test_fragment_refuses_printed_text_and_missing_values(tmp_path):
    with pytest.raises(InputError, match="writes no printed form"):
        write_numbers_fragment(tmp_path, "s", {"X": {"value": 1, "format": "int", "text": "1"}})
    with pytest.raises(InputError, match="format"):
        write_numbers_fragment(tmp_path, "s", {"X": {"value": 1, "format": "num"}})
    with pytest.raises(InputError, match="no value"):
        fragment_text({"value": float("nan"), "format": "num:2"}, "X")


def test_ci_kind_prints_the_interval_small_and_never_invents_bounds():
    col = Column("m", "Mean", "ci", 2, lo_key="lo", hi_key="hi")
    t = Table(id="c", title="C", axis="detail", columns=(col,), provenance=PROV,
              rows=[{"m": 0.5, "lo": 0.41, "hi": 0.6}, {"m": 0.5, "lo": None, "hi": 0.6}, {"m": None, "lo": 0.1, "hi": 0.2}])
    body = [ln for ln in to_latex(t).splitlines() if not ln.startswith("%")]
    assert body == [r"$0.50$ {\scriptsize [0.41, 0.60]} \\", r"$0.50$ \\", r"-- \\"]
    assert "0.50 [0.41, 0.60]" in to_html(t)
    with pytest.raises(ValueError, match="lo_key"):
        Column("m", "M", "ci")


def test_a_table_without_rows_is_not_rendered_and_its_old_files_go(tmp_path):
    art, tables = tmp_path / "artifacts", tmp_path / "tables"
    tables.mkdir()
    (tables / "judges_summary.tex").write_text("stale\n")
    write_table_rows(art, "judges_summary", "judges", [], function="m.f", meta={"offline_judges": []})
    assert render_stage_tables(art, tables, run_dir=tmp_path) == []
    assert not (tables / "judges_summary.tex").exists()


def test_table_ids_may_name_corpora_with_dots_and_dashes(tmp_path):
    p = write_table_rows(tmp_path, "alttext_funnel_my-corpus.v2", "alttext", [{"rule": "r"}], function="m.f")
    assert p.name == "alttext_funnel_my-corpus.v2.json"
    with pytest.raises(InputError, match="table ids"):
        write_table_rows(tmp_path, "../x", "alttext", [{"rule": "r"}], function="m.f")
