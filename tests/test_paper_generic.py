"""The paper layer on our own runs: cells laid out by ``vqa_layout.json`` (hand-computed tables),
numbers with stage fragments, ``{run_dir}`` inputs, and the one manuscript serving both runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
import yaml

from capaudit.config import load_config
from capaudit.errors import InputError
from capaudit.paper.figures import yield_risk_points
from capaudit.paper.inputs import paper_inputs
from capaudit.paper.numbers import build_numbers
from capaudit.paper.vqa_generic import (
    all_generic_tables,
    comparison_rows,
    headline_tex,
    policy_control_tex,
    policy_rows,
    vqa_by_type_tex,
    vqa_mean_std_tex,
)
from capaudit.summaries.cells import Agreement, Cell, CellsFile, CellStats, Extraction, SliceAgreement, TypeCounts
from capaudit.summaries.numbers_fragments import read_numbers_fragments, write_numbers_fragment
from capaudit.summaries.vqa_layout import (Comparison, LayoutJudge, LayoutSlice, LayoutSurface, VqaLayout,
                                          parse_vqa_layout, read_vqa_layout, write_vqa_layout)

REPO = Path(__file__).resolve().parents[1]
JA, JB = "capaudit-offline-annotation-judge", "capaudit-offline-refcaption-judge"


def _cell(judge: str, surface: str, responses: int, types: Dict[str, Tuple[int, int, int]], std=(0.1, 0.01)) -> Cell:
    y = sum(v[0] for v in types.values())
    n = sum(v[1] for v in types.values())
    u = sum(v[2] for v in types.values())
    ex = {t: v for t, v in types.items() if t not in ("count", "relation")}
    ye, ne, ue = (sum(v[i] for v in ex.values()) for i in range(3))
    return Cell("S", judge, surface, CellStats.from_counts(responses, y, n, u, *std),
                CellStats.from_counts(responses, ye, ne, ue, *std),
                {t: TypeCounts(*v) for t, v in sorted(types.items())})


def demo_like(policy: bool = False) -> Tuple[CellsFile, VqaLayout]:
    """A small judged slice: ours (a), ref (b), a control (neg), optionally a policy surface."""
    surfaces = [("a", "ours"), ("b", "ref"), ("neg", "control")] + ([("naive", "ours")] if policy else [])
    data = {
        (JA, "a"): (4, {"object": (6, 1, 1), "count": (1, 1, 0)}),
        (JA, "b"): (4, {"object": (4, 2, 2), "relation": (0, 1, 1)}),
        (JA, "neg"): (2, {"object": (1, 3, 0)}),
        (JB, "a"): (4, {"object": (7, 0, 1), "count": (2, 0, 0)}),
        (JB, "b"): (4, {"object": (5, 0, 3), "relation": (1, 0, 1)}),
        (JB, "neg"): (2, {"object": (2, 2, 0)}),
        (JA, "naive"): (4, {"object": (3, 0, 1)}),
        (JB, "naive"): (4, {"object": (2, 1, 1)}),
    }
    cells = [_cell(j, s, *data[(j, s)]) for j in (JA, JB) for s, _ in surfaces]
    ag = SliceAgreement((JA, JB), {"__all__": Agreement(20, 15, 0.75), "count": Agreement(2, 1, 0.5),
                                   "object": Agreement(16, 12, 0.75), "relation": Agreement(2, 2, 1.0)})
    ext = {"S": {"a": Extraction(5, 5, 1, 0, 0), "b": Extraction(5, 4, 0, 1, 1)}}
    claimed = {"a": {"captions": 5.0, "cbu_per_cap": 6.2, "cbu_per_100_lex": 50.0},
               "b": {"captions": 5.0, "cbu_per_cap": 5.1, "cbu_per_100_lex": 48.0},
               "naive": {"captions": 4.0, "cbu_per_cap": 3.5, "cbu_per_100_lex": 40.0}}
    layout = VqaLayout(
        judges=[LayoutJudge(JA, "Annot. (offline)", "annotation judge (offline)", "offline"),
                LayoutJudge(JB, "Ref.-cap. (offline)", "reference-caption judge (offline)", "offline")],
        slices=[LayoutSlice("S", [LayoutSurface(s, f"Surface {s}", r, "Naive" if s == "naive" else None,
                                                "COCO" if s == "naive" else None, 0.25 if s == "a" else None, 64,
                                                claimed.get(s)) for s, r in surfaces])],
        comparisons=[Comparison("AB", "B vs A", "S", "a", "b")], agreement_slice="S", denominators_slice="S")
    return CellsFile(cells=cells, judge_agreement={"S": ag}, extraction=ext), layout


def test_layout_round_trip_and_errors(tmp_path: Path) -> None:
    _, layout = demo_like()
    p = write_vqa_layout(layout, tmp_path / "vqa_layout.json")
    assert read_vqa_layout(p) == layout
    bad = layout.to_dict()
    bad["comparisons"][0]["key"] = "A-B"
    with pytest.raises(ValueError, match=r"comparisons\[0\]\.key: letters only"):
        parse_vqa_layout(bad, "x.json")
    bad = layout.to_dict()
    bad["slices"][0]["surfaces"][0]["role"] = "hero"
    with pytest.raises(ValueError, match=r"surfaces\[0\]\.role: expected one of"):
        parse_vqa_layout(bad, "x.json")


def test_generic_tables_by_hand() -> None:
    cells, layout = demo_like()
    # A a: yes 6+1, no 1+1, questions 10 over 4 captions; A b: yes 4, no 2+1, questions 10
    # B a: yes 7+2, no 0, questions 10; B b: yes 5+1, no 0, questions 10
    # headline: claimed 5.10 -> 6.20; A sup 4/4 -> 7/4, risk 3/10 -> 2/10; B sup 6/4 -> 9/4, risk 0 -> 0
    assert headline_tex(cells, layout) == ("B vs A & $5.10 \\to \\mathbf{6.20}$ & $1.00 \\to \\mathbf{1.75}$ & "
                                           "$0.300 \\to \\mathbf{0.200}$ & $1.50 \\to \\mathbf{2.25}$ & "
                                           "$0.000 \\to \\mathbf{0.000}$ \\\\\n")
    rows = comparison_rows(cells, layout)
    assert rows[0].excl_sup_ours == (6 / 4, 7 / 4) and rows[0].excl_risk_ref == (2 / 8, 0 / 8)
    by_type = vqa_by_type_tex(cells, layout).splitlines()
    # object, A ours: 6/8 yes, 1/8 no; A refs 4/8, 2/8; B ours 7/8, 0; B refs 5/8, 0; agreement 75.0 %
    assert by_type[0] == ("object & $0.750$ & $0.125$ & $0.500$ & $0.250$ & $0.875$ & $0.000$ & $0.625$ & $0.000$ "
                          "& $75.0\\%$ \\\\")
    assert by_type[1].startswith("attribute & -- & --") and by_type[1].endswith("& -- \\\\")
    assert by_type[-1] == "all types & \\multicolumn{8}{c}{} & $75.0\\%$ \\\\"
    ms = vqa_mean_std_tex(cells, layout).splitlines()
    assert ms[0] == "S & Surface a & $1.75 \\pm 0.10$ & $0.200 \\pm 0.010$ & $2.25 \\pm 0.10$ & $0.000 \\pm 0.010$ \\\\"
    t = all_generic_tables(cells, layout)
    assert set(t) == {"cc12m_denominators.tex", "excl_count_relation.tex", "vqa_by_type.tex", "vqa_mean_std.tex",
                      "vqa_questions.tex"}
    assert t["cc12m_denominators.tex"].splitlines()[1] == ("Surface b & $5$ & $4$ & $1$ & $0$ & $4$ & $10$ & $0.300$ "
                                                           "& $0.000$ \\\\")
    assert t["vqa_questions.tex"].splitlines()[0] == "S & Surface a & $0.25$ & $4$ & $10$ & $2.50$ & $0.200$ \\\\"
    # B excluding count/relation: a (7,0,1) -> 7/4 = 1.75, b (5,0,3) -> 5/4 = 1.25
    assert t["excl_count_relation.tex"].splitlines()[1] == (" & Ref.-cap. (offline) & $1.50 \\to \\mathbf{2.25}$ & "
                                                            "$1.25 \\to \\mathbf{1.75}$ & $+0.50$ & "
                                                            "$0.000 \\to \\mathbf{0.000}$ \\\\")


def test_policy_control_from_our_cells() -> None:
    cells, layout = demo_like(policy=True)
    rows = policy_rows(cells, layout)
    assert [(r.corpus, r.policy, r.responses, r.questions) for r in rows] == [("COCO", "Naive", 4, 4)]
    assert rows[0].sup == (0.75, 0.5) and rows[0].risk == (0.0, 0.25)
    assert all_generic_tables(cells, layout)["policy_control.tex"] == (
        "COCO & Naive & $4$ & $4$ & $0.75$ & $0.000$ & $0.50$ & $0.250$ \\\\\n")


def test_generic_numbers_labels_and_fragments(tmp_path: Path) -> None:
    cells, layout = demo_like()
    write_numbers_fragment(tmp_path, "judges", {"JudgesCaptions": {"value": 12, "format": "int", "description": "x"}})
    frags = read_numbers_fragments(tmp_path)
    m = build_numbers(cells=cells, layout=layout, fragments=frags)
    assert m["JudgeAName"].text == "annotation judge (offline)" and m["RunKind"].text == "judged"
    assert m["SupABJudgeAOurs"].text == "1.75" and m["RiskABJudgeARef"].text == "0.300"
    assert m["ClaimedABOurs"].text == "6.20" and m["JudgeAgreeAll"].text == "75.0" and m["JudgeJoined"].text == "20"
    assert m["JudgesCaptions"].source == "fragment:judges" and "not VLMs" in m["JudgeNote"].text
    assert m["ResponsesNeg"].value == 2 and m["ExtractBInvalid"].value == 1
    write_numbers_fragment(tmp_path, "other", {"JudgeJoined": {"value": 1, "format": "int"}})
    with pytest.raises(ValueError, match="duplicate macro name 'caJudgeJoined'"):
        build_numbers(cells=cells, layout=layout, fragments=read_numbers_fragments(tmp_path))
    with pytest.raises(InputError, match="letters only"):
        write_numbers_fragment(tmp_path, "bad", {"Judge2": {"value": 1, "format": "int"}})


def test_figure_points_follow_roles() -> None:
    cells, layout = demo_like()
    pts = yield_risk_points(cells, layout=layout)
    assert [(p.surface, p.ours) for p in pts if p.judge == JA] == [("a", True), ("b", False), ("neg", False)]
    assert len(yield_risk_points(cells, include_controls=False, layout=layout)) == 4


def test_run_dir_placeholder_and_elements(tmp_path: Path) -> None:
    from capaudit.io.atomic import write_text_atomic
    from capaudit.paper.run import run_fig2, run_headline, run_numbers, run_policy_cbu, run_vqa_tables
    from capaudit.summaries.cells import format_cells

    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"run": "mini", "out_root": str(tmp_path / "out"), "paper": {"inputs": {
        "cells": "{run_dir}/artifacts/judges/cells.json", "vqa_layout": "{run_dir}/artifacts/judges/vqa_layout.json"}}}))
    cfg = load_config(params)
    cells, layout = demo_like(policy=True)
    art = cfg.dirs()["artifacts"] / "judges"
    write_text_atomic(art / "cells.json", format_cells(cells))
    write_vqa_layout(layout, art / "vqa_layout.json")
    assert paper_inputs(cfg).path("cells") == art / "cells.json"
    tables = run_vqa_tables(cfg).paths
    assert "policy_control.tex" in tables and (cfg.out_dir / "tables" / "vqa_by_type.tex").exists()
    judges_line = (f"% judges: A = {JA} (annotation judge (offline); an offline heuristic, not a VLM); "
                   f"B = {JB} (reference-caption judge (offline); an offline heuristic, not a VLM)\n")
    for path in tables.values():  # every table of our own run names its judges
        assert path.read_text().startswith(judges_line), path
    assert tables["policy_control.tex"].read_text() == judges_line + policy_control_tex(policy_rows(cells, layout))
    assert run_headline(cfg).paths["headline.tex"].read_text().startswith(judges_line + "B vs A & $5.10")
    pc = run_policy_cbu(cfg)
    assert pc.paths["policy_cbu.tex"].read_text().endswith("\nCOCO & Naive & $4$ & $3.50$ & $40.00$ \\\\\n")
    assert pc.paths["policy_cbu.tex"].read_text().startswith("% claimed CBU")
    fig = run_fig2(cfg)
    assert "left_pdf" in fig.paths and "right_pdf" not in fig.paths  # no frontier in this run
    run_numbers(cfg)
    assert "\\newcommand{\\caJudgeAName}{annotation judge (offline)}" in (cfg.out_dir / "tables" / "numbers.tex").read_text()


def _guarded_canums(tex: str) -> List[Tuple[str, Tuple[str, ...]]]:
    """Every ``\\canum{X}`` with the names of the ``\\withnum{G}{...}`` blocks around it."""
    guards: List[Tuple[int, int, str]] = []
    for m in re.finditer(r"\\withnum\{([A-Za-z]+)\}\{", tex):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(tex[i], 0)
            i += 1
        guards.append((m.end(), i, m.group(1)))
    out = []
    for m in re.finditer(r"\\canum\{([A-Za-z]+)\}", tex):
        out.append((m.group(1), tuple(g for s, e, g in guards if s <= m.start() < e)))
    return out


def _reference_numbers():
    cfg = load_config(REPO / "params" / "reference.yaml")
    inp = paper_inputs(cfg)
    return build_numbers(inp.cells(), inp.claimed_rollup(), inp.frontier(), inp.lexical_window(), inp.policy_claimed(),
                         inp.prompt_support(), inp.human_agreement())


def _demo_numbers():
    """Numbers of a judged run shaped like params/demo.yaml (its comparison keys, two judges, probe)."""
    from capaudit.judges.probe import ProbeRow, probe_numbers
    from capaudit.judges.stage import judge_specs, judges_numbers

    section = yaml.safe_load((REPO / "params" / "demo.yaml").read_text())["judges"]
    cells, layout = demo_like()
    keys = [c["key"] for c in section["comparisons"]]
    comps = [Comparison(k, k, "S", "a", "b") for k in keys]
    layout = VqaLayout(layout.judges, layout.slices, comps, "S", "S")
    judges = judge_specs(section, "demo.yaml")
    rows = [ProbeRow(j.name, j.label, "offline", "all", 3, 4, 0.1, 0.0, 0.2, 9, 0.5, 0.3, 0.7) for j in judges]
    frags = {**judges_numbers(10, 50, 0, 0, judges), **probe_numbers(rows, [j.name for j in judges])}
    return build_numbers(cells=cells, layout=layout, fragments=frags)


def test_manuscript_macros_are_defined_in_both_runs() -> None:
    """Outside a ``\\withnum{G}`` block a quoted macro must exist in every run; inside, in every run
    that defines ``G`` (checked for the reference run and for a run shaped like the demo)."""
    tex = (REPO / "paper" / "main.tex").read_text()
    uses = _guarded_canums(tex)
    assert len(uses) > 50
    for m in (_reference_numbers(), _demo_numbers()):
        defined = {n.name[2:] for n in m}
        missing = sorted({x for x, guards in uses if all(g in defined for g in guards) and x not in defined})
        assert not missing, missing


@pytest.mark.parametrize("backend,offline", [("capaudit-heuristic-extractor (heuristic baseline)", True),
                                             ("Qwen/Qwen3.5-397B-A17B-FP8", False), (None, False)])
def test_the_claims_backend_follows_the_frontier_into_figure_and_numbers(tmp_path: Path, backend, offline) -> None:
    """Who extracted the claims is read from the claims stage's record beside the frontier CSV: the
    budget-sweep figure carries the offline-extractor caveat exactly when that record names
    capaudit's heuristic extractor, and the numbers map says who extracted them (nothing when unrecorded)."""
    import json as _json

    from capaudit.paper.run import run_fig2
    from capaudit.summaries.frontier import FrontierRow, write_frontier_csv

    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"run": "mini", "out_root": str(tmp_path / "out"), "paper": {"inputs": {
        "cells": "{run_dir}/artifacts/judges/cells.json", "vqa_layout": "{run_dir}/artifacts/judges/vqa_layout.json",
        "frontier": "{run_dir}/artifacts/claims/budget_frontier.csv"}}}))
    cfg = load_config(params)
    from capaudit.io.atomic import write_text_atomic
    from capaudit.summaries.cells import format_cells

    cells, layout = demo_like()
    art = cfg.dirs()["artifacts"]
    write_text_atomic(art / "judges" / "cells.json", format_cells(cells))
    write_vqa_layout(layout, art / "judges" / "vqa_layout.json")
    from capaudit.summaries.categories import UNIT_CATEGORIES

    rows = [FrontierRow(b, s, s, 10, 0, c, c * 10, 0.0, {t: 0.1 for t in UNIT_CATEGORIES}) for b, s, c in ((32, "a", 3.0), (64, "a", 5.0), (64, "b", 4.0))]
    write_frontier_csv(rows, art / "claims" / "budget_frontier.csv")
    if backend:
        (art / "claims" / "budget_frontier.manifest.json").write_text(_json.dumps({"backend": backend}))
    assert paper_inputs(cfg).claims_backend() == backend
    fig = run_fig2(cfg)
    model = _json.loads(next((cfg.out_dir / "figures").glob("fig2_right_budget_sweep*.json")).read_text())
    assert ("offline extractor" in model.get("caveats", [])) is offline, model
    m = build_numbers(claims_backend=backend)
    if backend:
        assert m["ClaimsBackendNote"].value.startswith(f"Claims extracted by {backend}")
        assert ("not a language model" in m["ClaimsBackendNote"].value) is offline
    else:
        with pytest.raises(KeyError):
            m["ClaimsBackendNote"]
    assert "right_pdf" in fig.paths


def test_policy_tables_name_the_captioner_the_recap_stage_recorded(tmp_path: Path) -> None:
    """The policy tables of our own runs say who captioned the policy surfaces (read from the run's
    recap summary), with the heuristic-captioner caveat when the recap stage says it was capaudit's."""
    import json as _json

    from capaudit.io.atomic import write_text_atomic
    from capaudit.paper.run import run_policy_cbu, run_vqa_tables
    from capaudit.summaries.cells import format_cells

    params = tmp_path / "p.yaml"
    params.write_text(yaml.safe_dump({"run": "mini", "out_root": str(tmp_path / "out"), "paper": {"inputs": {
        "cells": "{run_dir}/artifacts/judges/cells.json", "vqa_layout": "{run_dir}/artifacts/judges/vqa_layout.json"}}}))
    cfg = load_config(params)
    cells, layout = demo_like(policy=True)
    art = cfg.dirs()["artifacts"]
    write_text_atomic(art / "judges" / "cells.json", format_cells(cells))
    write_vqa_layout(layout, art / "judges" / "vqa_layout.json")
    (art / "tables").mkdir(parents=True, exist_ok=True)
    (art / "tables" / "recap_summary.json").write_text(_json.dumps(
        {"rows": [], "meta": {"captioners": ["capaudit-offline-coco-captioner (heuristic)"], "offline_captioner": True}}))
    line = "% policy surfaces captioned by capaudit-offline-coco-captioner (heuristic)\n"
    assert line in run_policy_cbu(cfg).paths["policy_cbu.tex"].read_text()
    assert run_vqa_tables(cfg).paths["policy_control.tex"].read_text().startswith("% judges: ")
    assert line in (cfg.out_dir / "tables" / "policy_control.tex").read_text()
    for tid in ("policy_cbu", "policy_control"):
        model = _json.loads((cfg.out_dir / "tables" / f"{tid}.table.json").read_text())
        assert "heuristic captioner" in model["caveats"], (tid, model["caveats"])
