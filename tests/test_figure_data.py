"""Every figure writer leaves its plotted values beside the figure as a table model
(``figures/<stem>.table.json``): the rows drawn, the figure's axis, notebook, function and caveats."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from capaudit.paper.table_model import Table


def _model(path: Path) -> Table:
    return Table.from_json(json.loads(path.read_text(encoding="utf-8")))


def test_detail_figures_carry_backends_and_caveats(tmp_path: Path) -> None:
    from capaudit.paper.detail_figures import ITMBin, LengthPoint, plot_itm_bins, plot_length_scatter

    pts = [LengthPoint("s", "Surface", str(i), 10 + i, 0.1 * i, 0.2 * i if i % 2 else None) for i in range(5)]
    plot_length_scatter(pts, tmp_path, {"grounding": "COCO instance masks (things-only ICR)", "itm": "offline heuristic"})
    t = _model(tmp_path / "detail_length_scatter.table.json")
    assert (t.axis, t.provenance.notebook) == ("detail", "09_detail")
    assert t.provenance.function == "capaudit.paper.detail_figures.plot_length_scatter"
    assert set(t.caveats) == {"offline backends", "things-only ICR"}
    assert [r["length"] for r in t.rows] == [10, 11, 12, 13, 14] and t.rows[2]["aod"] is None
    assert {c.key: c.kind for c in t.columns}["length"] == "int"
    plot_itm_bins([ITMBin("s", "Surface", "icr", 0, 0.0, 0.5, 3, 0.2, 0.4, 0.05)], tmp_path)
    t = _model(tmp_path / "detail_itm_bins.table.json")
    assert t.rows[0]["itm_mean"] == 0.4 and t.caveats == ()


def test_embed_figures_say_random_init(tmp_path: Path) -> None:
    from capaudit.paper.embed_figures import plot_coverage_density, plot_eigen_spectrum, plot_truncation_curves

    curves = [{"surface": "a", "tokenizer": "clip", "limit": n, "share_over": 1 / n} for n in (16, 77, 248)]
    plot_truncation_curves(curves, tmp_path, backend="CLIP BPE")
    assert _model(tmp_path / "encoder_truncation_curves.table.json").rows == curves
    plot_eigen_spectrum({"a": [3.0, 1.0, 0.0]}, tmp_path, model="tiny (random-init)")
    t = _model(tmp_path / "embedding_spectrum.table.json")
    assert t.caveats == ("random-init encoder",) and [r["rank"] for r in t.rows] == [1, 2]  # the zero is not drawn
    support = [{"surface": "a", "pool": "p", "k": 10, "coverage": 0.5, "density": 0.7, "gallery": 4, "queries": 2}]
    plot_coverage_density(support, tmp_path, model="m")
    assert _model(tmp_path / "embedding_coverage_density.table.json").provenance.notebook == "08_embedding_probes"


def test_alttext_text_and_human_figures(tmp_path: Path) -> None:
    from capaudit.paper.alttext_figures import plot_coverage_curves, plot_domains, plot_funnels, plot_top_tokens
    from capaudit.paper.human_figures import plot_confusion
    from capaudit.paper.text_figures import plot_budget_curves

    funnel = SimpleNamespace(rows=[SimpleNamespace(rule="too short", dropped=3)], kept=7, input_rows=10)
    plot_funnels({"c": {"p": funnel}}, tmp_path / "alttext_funnel")
    t = _model(tmp_path / "alttext_funnel.table.json")
    assert [(r["step"], r["rows"]) for r in t.rows] == [("too short", 3), ("kept", 7)]
    assert t.caveats == ("offline backends",) and t.provenance.notebook == "10_alttext_filters"
    plot_coverage_curves({"coco": {"c": [[1, 5], [10, 2]]}}, tmp_path / "alttext_coverage_curves")
    assert len(_model(tmp_path / "alttext_coverage_curves.table.json").rows) == 2
    tokens = pd.DataFrame({"corpus": ["c"] * 3, "rank": [2, 1, 3], "token": ["b", "a", "c"], "count": [5, 9, 1]})
    plot_top_tokens(tokens, tmp_path / "alttext_top_tokens", top=2)
    assert [r["token"] for r in _model(tmp_path / "alttext_top_tokens.table.json").rows] == ["a", "b"]
    domains = pd.DataFrame({"corpus": ["c"], "site": ["x.org"], "share": [1.0], "urls": [3], "distinct_sites": [1]})
    plot_domains(domains, tmp_path / "alttext_domains")
    assert _model(tmp_path / "alttext_domains.table.json").rows == [{"corpus": "c", "site": "x.org", "share": 1.0,
                                                                     "urls": 3, "distinct_sites": 1}]
    block = {"eligibility": 0.5, "opener_rate": 0.1, "distinct": {"3": 0.9}, "rep": {"4": 0.01}}
    plot_budget_curves({"s": {"budgets": {"16": block, "32": block, "full": block}}}, tmp_path / "budget_curves")
    t = _model(tmp_path / "budget_curves.table.json")
    assert [r["budget"] for r in t.rows] == [16, 32] and t.rows[0]["distinct3"] == 0.9 and t.axis == "text"
    plot_confusion({"j": {"yes": {"yes": 4, "no": 1}, "no": {"no": 2}}}, tmp_path / "human_confusion", simulated=True)
    t = _model(tmp_path / "human_confusion.table.json")
    assert t.caveats == ("simulated annotators",)
    assert sum(r["count"] for r in t.rows) == 7 and {r["judge_answer"] for r in t.rows} == {"yes", "no", "uncertain"}


def test_reference_figures_have_their_data(tmp_path: Path, reference_dir: Path) -> None:
    from capaudit.config import load_config
    from capaudit.paper.run import run_fig1_prompt_support, run_fig2

    if not (reference_dir / "results").is_dir():
        pytest.skip(f"no reference results in {reference_dir}")
    cfg = load_config(Path(__file__).resolve().parents[1] / "params" / "reference.yaml", out_root=tmp_path)
    run_fig2(cfg)
    run_fig1_prompt_support(cfg)
    figs = cfg.out_dir / "figures"
    for stem in ("fig2_left_yield_risk", "fig2_right_budget_sweep", "fig1_right_prompt_support", "fig_prompt_support_heatmap"):
        t = _model(figs / f"{stem}.table.json")
        csv_rows = pd.read_csv(figs / f"{stem}.csv")
        assert len(t.rows) == len(csv_rows) > 0 and list(t.rows[0]) == list(csv_rows.columns), stem
    left = _model(figs / "fig2_left_yield_risk.table.json")
    assert left.provenance.notebook == "paper_fig2" and left.axis == "judges" and left.caveats == ()
