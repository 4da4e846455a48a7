"""The paper elements that print their own LaTeX (VQA tables, headline, lexical window, policy CBU,
real judges) also write each table's model (``tables/<id>.table.json``, ``<id>.csv``): the same rows,
every number of a model row printed on the same line of the ``.tex``, provenance that names real
files and functions; the ``.tex`` bytes stay as pinned (test_paper_layer G1)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, List

import pytest
import yaml

from capaudit.config import load_config
from capaudit.paper.table_model import Column, Table

REPO = Path(__file__).resolve().parents[1]
ELEMENT_TABLES = ("cc12m_denominators", "excl_count_relation", "vqa_by_type", "policy_control", "vqa_mean_std",
                  "vqa_questions", "headline", "lexical_window", "policy_cbu")


def _model(path: Path) -> Table:
    return Table.from_json(json.loads(path.read_text(encoding="utf-8")))


def _printed(col: Column, v: Any, row: dict) -> List[str]:
    """How the LaTeX body prints a model value (each must appear on the row's line)."""
    d = col.decimals
    if col.kind == "int":
        return [format(int(v), ",").replace(",", "{,}")]
    if col.kind == "pct":
        return [f"{100 * v:.{d}f}\\%"]
    if col.kind == "signed":
        return [f"{v:+.{d}f}"]
    if col.kind == "pm":
        return [f"{v:.{d}f} \\pm {row[col.std_key]:.{d}f}"]
    return [f"{v:.{d}f}"]


def assert_model_matches_tex(tables: Path, table_id: str) -> Table:
    """Every number of the model's rows is printed on the matching line of ``<id>.tex``."""
    t = _model(tables / f"{table_id}.table.json")
    lines = [x for x in (tables / f"{table_id}.tex").read_text(encoding="utf-8").splitlines()
             if x and not x.startswith("%") and not x.startswith("\\addlinespace") and x != "\\midrule"]
    assert len(lines) == len(t.rows), table_id
    for line, row in zip(lines, t.rows):
        for col in t.columns:
            v = row.get(col.key)
            if v is None:
                continue
            if col.numeric:
                for s in _printed(col, v, row):
                    assert s in line, (table_id, col.key, s, line)
            elif col.key in ("judge", "policy", "type", "vqa"):
                assert str(v).replace("_", "\\_") in line, (table_id, col.key, v, line)
    assert (tables / f"{table_id}.csv").read_text(encoding="utf-8").count("\n") == len(t.rows) + 1
    return t


def _function_exists(dotted: str) -> bool:
    module, _, name = dotted.rpartition(".")
    return callable(getattr(importlib.import_module(module), name, None))


@pytest.fixture(scope="module")
def reference_tables(tmp_path_factory, reference_dir: Path) -> Path:
    if not (reference_dir / "results").is_dir():
        pytest.skip(f"no reference results in {reference_dir}")
    from capaudit.paper.run import run_all

    cfg = load_config(REPO / "params" / "reference.yaml", out_root=tmp_path_factory.mktemp("out"))
    run_all(cfg, ["vqa_tables", "headline", "lexical_window", "policy_cbu"])
    return cfg.out_dir / "tables"


@pytest.mark.parametrize("table_id", ELEMENT_TABLES)
def test_reference_models_print_as_their_latex(reference_tables: Path, reference_dir: Path, table_id: str) -> None:
    t = assert_model_matches_tex(reference_tables, table_id)
    assert t.caveats == () and t.rows
    p = t.provenance
    assert p.notebook == f"paper_{p.element}" and _function_exists(p.function)
    assert all((REPO / f).is_file() for f in p.files), p.files  # paths of paper.inputs, from the repository root
    assert all(i.startswith("paper.inputs.") for i in p.inputs)


def test_reference_model_values(reference_tables: Path) -> None:
    head = {r["comparison"]: r for r in _model(reference_tables / "headline.table.json").rows}
    assert (round(head["DataComp"]["sup_a_ref"], 2), round(head["DataComp"]["sup_a_ours"], 2)) == (8.49, 13.73)
    den = _model(reference_tables / "cc12m_denominators.table.json")
    assert [r["surface"] for r in den.rows if r["short_captions"]] == ["CC12M-Qwen3-VL"]
    assert den.footnotes == ("† captions shorter than B",)
    q = _model(reference_tables / "vqa_questions.table.json")
    assert q.rows[1]["surface"] == "Recap-DataComp" and "\\citep" not in json.dumps(q.rows)
    assert _model(reference_tables / "vqa_by_type.table.json").rows[-1]["type"] == "all types"


def test_our_runs_models_name_offline_judges_and_follow_the_policy_surfaces(tmp_path: Path) -> None:
    from test_paper_generic import demo_like

    from capaudit.io.atomic import write_text_atomic
    from capaudit.paper.run import run_headline, run_policy_cbu, run_vqa_tables
    from capaudit.summaries.cells import format_cells
    from capaudit.summaries.vqa_layout import write_vqa_layout

    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"run": "mini", "out_root": str(tmp_path / "out"), "paper": {"inputs": {
        "cells": "{run_dir}/artifacts/judges/cells.json", "vqa_layout": "{run_dir}/artifacts/judges/vqa_layout.json"}}}))
    cfg = load_config(params)
    tables = cfg.dirs()["tables"]
    art = cfg.dirs()["artifacts"] / "judges"
    for policy in (True, False):
        cells, layout = demo_like(policy=policy)
        write_text_atomic(art / "cells.json", format_cells(cells))
        write_vqa_layout(layout, art / "vqa_layout.json")
        run_vqa_tables(cfg)
        run_headline(cfg)
        run_policy_cbu(cfg)
        assert (tables / "policy_control.table.json").exists() is policy
        assert (tables / "policy_cbu.table.json").exists() is policy and (tables / "policy_cbu.csv").exists() is policy
    cells, layout = demo_like(policy=True)
    write_text_atomic(art / "cells.json", format_cells(cells))
    write_vqa_layout(layout, art / "vqa_layout.json")
    run_vqa_tables(cfg)
    run_headline(cfg)
    run_policy_cbu(cfg)
    for tid in ("cc12m_denominators", "excl_count_relation", "vqa_by_type", "policy_control", "vqa_mean_std",
                "vqa_questions", "headline"):
        t = assert_model_matches_tex(tables, tid)
        assert t.caveats == ("offline judges",) and t.notes[0].startswith("judges: A = capaudit-offline-annotation-judge")
        assert t.provenance.files == ("artifacts/judges/cells.json", "artifacts/judges/vqa_layout.json")
        assert _function_exists(t.provenance.function) and t.provenance.function.startswith("capaudit.paper.vqa_generic.")
    assert_model_matches_tex(tables, "policy_cbu")
    by_type = _model(tables / "vqa_by_type.table.json")
    assert by_type.rows[1]["yes_a_ours"] is None  # attribute: no question, "--" in LaTeX, missing here
    assert [c.label for c in by_type.columns][1] == "Annot. (offline) ours yes"


def test_real_judges_models(tmp_path: Path) -> None:
    from capaudit.paper.real_judges import render

    summary = {
        "source": "DSG release (test)",
        "settings": {"calibration": {"level": 0.95}},
        "reproduction": {
            "correlation": [
                {"vqa": "pali-17b", "question_set": "dsg", "spearman": 0.5712, "published_spearman": 0.571,
                 "kendall": 0.4581, "published_kendall": 0.458, "reproducible": True, "equal": True},
                {"vqa": "mplug-large", "question_set": "tifa", "spearman": 0.2533, "published_spearman": 0.352,
                 "kendall": 0.1827, "published_kendall": None, "reproducible": False, "equal": False}],
            "dsg1k": [{"category": "tifa", "items": 160, "score": 88.1112, "published_score": 88.1, "equal": True}]},
        "agreement": {"images": 10, "all_judges": {"dsg": {"judges": ["a", "b", "c"], "by_type": {
            "__all__": {"questions": 30, "exact_all_rate": 0.8, "fleiss_kappa": 0.45, "gwet_ac1": 0.86,
                        "krippendorff_alpha": 0.45, "pairs": {}},
            "real_user": {"questions": 12, "exact_all_rate": 0.75, "fleiss_kappa": None, "gwet_ac1": 0.8,
                          "krippendorff_alpha": 0.4}}}}},
        "yes_rates": [{"judge": j, "category": c, "questions": 20, "yes_rate": y}
                      for j, c, y in (("a", "__all__", 0.9), ("b", "__all__", 0.85), ("a", "entity", 0.95),
                                      ("b", "entity", 0.8))],
        "calibration": {"judge": "c", "coverage": [
            {"group": g, "n": n, "subsets": 30, "ppi_coverage": 0.93, "human_coverage": 0.96, "ppi_width": 0.7 / n,
             "human_width": 0.77 / n, "relative_width": 0.91} for g in ("m1", "m2") for n in (20, 50)]},
    }
    tables, figures = tmp_path / "tables", tmp_path / "figures"
    tables.mkdir()
    render(summary, tables, figures)
    for tid in ("real_judges_correlation", "real_judges_dsg1k", "real_judges_agreement", "real_judges_yes_rates",
                "real_judges_coverage"):
        t = assert_model_matches_tex(tables, tid)
        assert t.axis == "real_judges" and t.caveats == ("published answers",)
        assert t.provenance.files == ("artifacts/real_judges/summary.json",) and _function_exists(t.provenance.function)
    corr = _model(tables / "real_judges_correlation.table.json")
    assert [r["status"] for r in corr.rows] == ["✓", "no answer key"] and corr.rows[1]["published_kendall"] is None
    assert "pali-17b & DSG & 0.571 & 0.571 & 0.458 & 0.458 & \\checkmark" in (tables / "real_judges_correlation.tex").read_text()
    cal = _model(figures / "real_judges_calibration.table.json")
    assert len(cal.rows) == 4 and cal.caveats == ("published answers",)
