"""The detail stage's tables (``paper.tables_detail``) from hand-written rows files: columns, notes
naming the definitions and backends, unified number formats, and missing values printed as ``--``."""

from __future__ import annotations

from capaudit.paper.render import to_csv, to_latex
from capaudit.paper.stage_tables import build_table, known_tables
from capaudit.summaries.table_rows import read_table_rows, write_table_rows

BACKENDS = {"parser": "p_1 (heuristic baseline)", "grounding": "coco-instance-masks", "itm": "annotation-precision (offline)"}
THINGS = {"icr": {"kind": "things-only", "name": "things-only ICR", "note": "COCO instance masks"},
          "relation_ends": "subject", "relation_ends_label": "subject (Eq. 3)"}


def _build(tmp_path, table, rows, meta):
    p = write_table_rows(tmp_path, table, "detail", rows, function=f"capaudit.detail.x.{table}", inputs=["in.jsonl"],
                         meta={"backends": BACKENDS, "offline_backends": ["parser", "itm"], **THINGS, **meta})
    return build_table({**read_table_rows(p), "path": str(p)}, run_dir=tmp_path)


def test_builders_are_registered_for_the_detail_notebook():
    known = known_tables()
    assert {known[t] for t in ("detail_surfaces", "detail_selection", "detail_subgraphs")} == {"09_detail"}


def test_surfaces_table(tmp_path):
    rows = [{"surface": "a", "label": "COCO human", "captions": 1234, "images": 9, "icr_mean": 0.22513,
             "icr_lower": 0.2, "icr_upper": 0.25, "aod_mean": 0.9412, "cd_mean": 0.020912, "length_mean": 10.55},
            {"surface": "b_x", "label": "b_x", "captions": 3, "images": 3, "icr_mean": None, "icr_lower": None,
             "icr_upper": None, "aod_mean": 1.0, "cd_mean": None, "length_mean": 4.0}]
    t = _build(tmp_path, "detail_surfaces", rows, {"length_unit": "lex", "bootstrap": {"n_resamples": 10}})
    tex = to_latex(t).splitlines()
    assert tex[0].startswith("% per-surface mean things-only ICR (Eq. 2), AOD (Eq. 4), CD (Eq. 5)")
    assert "% ICR = things-only ICR (COCO instance masks)" in tex
    assert "% AOD and CD relation count: subject (Eq. 3); length unit: lex" in tex
    assert "% parser: p_1 (heuristic baseline)" in tex and "% grounding: coco-instance-masks" in tex
    assert any(line.startswith("% offline backends:") for line in tex)
    assert "% columns: surface & captions & things-only ICR & AOD & CD & length" in tex
    # an interval is printed small after its estimate; no bounds, the estimate alone
    assert r"COCO human & $1{,}234$ & $0.225$ {\scriptsize [0.200, 0.250]} & $0.94$ & $0.0209$ & $10.6$ \\" in tex
    assert r"b\_x & $3$ & -- & $1.00$ & -- & $4.0$ \\" in tex  # missing ICR and CD: "--", never 0
    assert to_csv(t).splitlines()[0].startswith("surface,label,captions,images,icr_mean,icr_lower,icr_upper")
    assert t.provenance.function == "capaudit.detail.x.detail_surfaces" and t.provenance.notebook == "09_detail"


def test_surfaces_table_without_grounding(tmp_path):
    t = _build(tmp_path, "detail_surfaces", [{"label": "s", "captions": 2, "icr_mean": None, "aod_mean": 0.5,
                                               "cd_mean": None, "length_mean": 3.0}],
               {"icr": {"kind": "none", "name": "ICR (unavailable: no grounding)", "note": "no grounding source"},
                "offline_backends": []})
    tex = to_latex(t)
    assert "% ICR: not computed (no grounding source)" in tex and "offline backends:" not in tex
    assert "things-only ICR:" not in tex


def test_selection_table(tmp_path):
    rows = [{"strategy": "itm_cd", "label": "ITM→CD (method)", "selected": 318, "avg_icr": 0.3534, "avg_aod": 1.0677,
             "avg_length": 10.547, "avg_itm": 1.0},
            {"strategy": "full", "label": "Full", "selected": 795, "avg_icr": None, "avg_aod": 0.94, "avg_length": 10.6,
             "avg_itm": None}]
    t = _build(tmp_path, "detail_selection", rows, {"surface_label": "COCO human", "pool": 795, "k": 0.6, "t": 0.4})
    tex = to_latex(t).splitlines()
    assert tex[0] == "% selection strategies on COCO human (pool 795; K=0.6, T=0.4)"
    assert "% ITM: annotation-precision (offline)" in tex
    assert "% columns: strategy & selected & avg things-only ICR & avg AOD & avg length & avg ITM" in tex
    assert r"ITM→CD (method) & $318$ & $0.353$ & $1.07$ & $10.5$ & $1.000$ \\" in tex
    assert r"Full & $795$ & -- & $0.94$ & $10.6$ & -- \\" in tex


def test_subgraphs_table(tmp_path):
    rows = [{"measure": "icr", "measure_label": "ICR", "fraction": 0.2, "captions": 100, "reached": 12,
             "mean_ratio": 0.20605},
            {"measure": "aod", "measure_label": "AOD", "fraction": 0.8, "captions": 100, "reached": 0,
             "mean_ratio": None}]
    t = _build(tmp_path, "detail_subgraphs", rows, {"tolerance": 0.05, "realiser": "template"})
    tex = to_latex(t).splitlines()
    assert tex[0] == "% controlled subgraphs (tolerance ±0.05); realiser: template"
    assert "% parser: p_1 (heuristic baseline); grounding: coco-instance-masks" in tex
    assert "% columns: measure & target & reached & mean achieved ratio" in tex
    assert r"ICR & $20\%$ & $12/100$ & $0.206$ \\" in tex
    assert r"AOD & $80\%$ & $0/100$ & -- \\" in tex


def test_rows_without_their_definitions_are_refused(tmp_path):
    import pytest

    from capaudit.errors import InputError

    p = write_table_rows(tmp_path, "detail_selection", "detail", [{"label": "Full", "selected": 1}],
                         function="m.f", meta={"backends": BACKENDS, **THINGS})
    with pytest.raises(InputError, match="no meta 'surface_label'") as e:
        build_table({**read_table_rows(p), "path": str(p)})
    assert e.value.field == "meta.surface_label" and str(p) in str(e.value)


def test_a_parser_served_by_the_test_vlm_gives_its_caveat(tmp_path):
    """The parser's caveat follows from the recorded card's kind, not from words in its label."""
    from capaudit.detail.backends import offline_backends

    class Parser:
        def __init__(self, offline):
            self.offline = offline

    names = {"parser": "capaudit-test-vlm via the model-call layer", "grounding": "coco-instance-masks",
             "itm": "annotation-precision (offline)"}
    assert offline_backends(names, Parser(True)) == ["parser", "itm"]
    assert offline_backends(names, Parser(False)) == ["itm"]
    assert offline_backends({**names, "parser": "p (heuristic)"}, None) == ["parser", "itm"]  # no parser: its label
    rows = [{"surface": "a", "label": "a", "captions": 3, "images": 3, "icr_mean": None, "icr_lower": None,
             "icr_upper": None, "aod_mean": 1.0, "cd_mean": None, "length_mean": 4.0}]
    t = _build(tmp_path, "detail_surfaces", rows, {"length_unit": "lex", "bootstrap": {"n_resamples": 10},
                                                   "parser_kinds": ["random-vision test model"]})
    assert "random-vision test model" in t.caveats and "offline backends" in t.caveats
    t = _build(tmp_path, "detail_surfaces", rows, {"length_unit": "lex", "bootstrap": {"n_resamples": 10},
                                                   "parser_kinds": ["heuristic"]})
    assert "random-vision test model" not in t.caveats
