"""Paper layer: tables byte-identical to the reference (G1), derived tables, figures' data,
numbers map, golden checks, element runs, CLI and one notebook via papermill."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from capaudit.config import load_config
from capaudit.paper import checks as G
from capaudit.paper.figures import budget_sweep_points, prompt_support_bars, prompt_support_heat, yield_risk_points
from capaudit.paper.fmt import tex_arrow, tex_int, tex_pct, tex_pm, tex_signed
from capaudit.paper.inputs import paper_inputs, resolve_path
from capaudit.paper.numbers import build_numbers, macro_word
from capaudit.paper.run import ELEMENTS, check_reference, run_all
from capaudit.paper.tables import headline_rows, lexical_window_rows, policy_cbu_rows, ranking_unchanged
from capaudit.paper.vqa_tables import all_vqa_tables

REPO = Path(__file__).resolve().parents[1]
PARAMS = REPO / "params" / "reference.yaml"


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return load_config(PARAMS, out_root=tmp_path_factory.mktemp("out"))


@pytest.fixture(scope="module")
def inp(cfg):
    return paper_inputs(cfg)


def test_fmt_rules() -> None:
    assert tex_int(4467) == "$4{,}467$" and tex_int(24) == "$24$" and tex_int(201065) == "$201{,}065$"
    assert tex_arrow(8.494, 13.726, 2) == "$8.49 \\to \\mathbf{13.73}$"
    assert tex_signed(4.2249) == "$+4.22$" and tex_signed(-0.5) == "$-0.50$"
    assert tex_pm(14.5959, 0.0561, 2) == "$14.60 \\pm 0.06$"
    assert tex_pct(0.9236714) == "$92.4\\%$"


def test_g1_six_tables_byte_identical(inp, reference_dir: Path) -> None:
    tables = all_vqa_tables(inp.cells(), inp.eligibility())
    assert len(tables) == 6
    for name, text in tables.items():
        assert text.encode() == (reference_dir / "results" / "tables" / name).read_bytes(), name


def test_eligibility_from_text_stats_equals_hard_coded(inp) -> None:
    e = inp.eligibility()
    assert {k: f"{v:.2f}" for k, v in e.items()} == {
        ("DataComp", "Ours"): "1.00", ("DataComp", "Ref"): "0.26", ("Danbooru", "Ours"): "1.00",
        ("Danbooru", "Ref"): "0.17", ("LAION-pop", "Ours"): "1.00", ("LAION-pop", "Ref"): "1.00",
        ("PD12M", "Ours"): "1.00", ("PD12M", "Ref"): "0.07",
    }


def test_headline_rows(inp) -> None:
    rows = {r.key: r for r in headline_rows(inp.cells(), inp.claimed_rollup(), inp.frontier())}
    dc = rows["DataComp"]
    assert (round(dc.claimed_ref, 2), round(dc.claimed_ours, 2)) == (10.44, 14.45)
    assert (round(dc.qwen_sup_ref, 2), round(dc.qwen_sup_ours, 2)) == (8.49, 13.73)
    assert round(dc.gemma_risk_ours, 3) == 0.081
    assert round(rows["LAIONpop"].claimed_gain, 2) == 2.91 and round(rows["Danbooru"].claimed_gain, 2) == 6.14
    assert round(rows["CCQwenVL"].claimed_ref, 2) == 6.44 and round(rows["CCQwenVL"].claimed_ours, 2) == 15.21


def test_lexical_window_rows_g7(inp) -> None:
    rows = {r.surface: r for r in lexical_window_rows(inp.frontier(), inp.lexical_window())}
    o = rows["ours_cc12m"]
    assert (round(o.cbu_cap_ws, 4), round(o.cbu_cap_lex, 4), round(o.cbu_cap_change_pct, 2)) == (15.2148, 14.7474, -3.07)
    assert round(max(abs(r.cbu100_change) for r in rows.values()), 2) == 0.14
    assert ranking_unchanged(list(rows.values()))
    assert o.caption_tokens_median_lex == 64.0


def test_policy_cbu_rows_g3(inp) -> None:
    rows = policy_cbu_rows(inp.policy_claimed(), inp.frontier())
    got = [(r.corpus, r.policy, r.captions, f"{r.cbu_cap:.2f}", f"{r.cbu100:.2f}") for r in rows]
    assert got == [
        ("CC12M", "Ours", 4470, "15.21", "23.16"),
        ("CC12M", "Naive", 4458, "11.32", "17.26"),
        ("CC12M", "Naive (greedy)", 4494, "11.43", "17.45"),
        ("DataComp", "Ours", 4689, "14.60", "22.23"),
        ("DataComp", "Naive", 4645, "10.95", "16.66"),
        ("DataComp", "Naive (greedy)", 4645, "10.84", "16.53"),
    ]


def test_figure_data(inp) -> None:
    pts = yield_risk_points(inp.cells())
    assert len(pts) == 34 and sum(p.ours for p in pts) == 12  # 4 slices x 2 judges + CC12M + DataComp-control
    sweep = budget_sweep_points(inp.frontier())
    assert [(p.budget, p.pareto) for p in sweep if p.surface == "ours_cc12m"] == [(16, 0), (32, 1), (48, 1), (64, 1)]
    bars = {(b.comparison, b.metric): b for b in prompt_support_bars(inp.prompt_support())}
    dc = bars[("datacomp_recap_llava15_paired_url", "prompt_mass_on_caption_support")]
    assert (dc.pools, round(dc.local_mean, 4), round(dc.reference_mean, 4)) == (7, 0.5938, 0.4674)
    assert round(bars[("danbooru2023_florence2_paired", "jsd")].reference_mean, 4) == 0.5477
    heat = prompt_support_heat(inp.prompt_support())
    assert len(heat) == 8 * 7 and sum(not c.in_paper_pools for c in heat) == 7


def test_numbers_map(inp) -> None:
    m = build_numbers(inp.cells(), inp.claimed_rollup(), inp.frontier(), inp.lexical_window(),
                      inp.policy_claimed(), inp.prompt_support(), inp.human_agreement())
    # Ours vs naive: ranges over both corpora, both judges, both naive policies.
    assert (m["SupGainNaiveMin"].text, m["SupGainNaiveMax"].text) == ("3.0", "3.6")
    assert (m["SupGainNaivePreciseMin"].text, m["SupGainNaivePreciseMax"].text) == ("2.96", "3.57")
    assert (m["RiskGapNaiveMin"].text, m["RiskGapNaiveMax"].text) == ("0.01", "0.03")
    assert (m["RiskGapNaiveQwenMin"].text, m["RiskGapNaiveQwenMax"].text) == ("0.01", "0.02")
    assert (m["ClaimedGainMin"].text, m["ClaimedGainMax"].text) == ("+2.91", "+6.14")
    wins = [m[f"PoolWins{k}"].value for k in ("DataComp", "LAIONpop", "PDtwelveM", "Danbooru", "CCLLaVA", "CCPixelProse", "CCQwenVL")]
    assert wins == [6, 5, 7, 7, 6, 6, 7]
    assert m["JudgeAgreeAll"].text == "92.4" and m["JudgeJoined"].text == "201{,}065"
    assert m["LexWinOursChange"].text == "-3.07" and m["LexWinRanking"].text == "unchanged"
    assert m["HumanQwenAll"].text == "0.848" and m["HumanQwenAllRecords"].value == 57
    assert m["ParetoBSixFour"].text == "Ours, Qwen3-VL-8B"
    tex = m.to_tex()
    names = re.findall(r"\\newcommand\{\\([A-Za-z]+)\}", tex)
    assert len(names) == len(m) == len(set(names))
    assert macro_word("Naive (greedy)") == "NaiveGreedy" and macro_word("64") == "SixFour"


def test_golden_checks_all_pass(cfg) -> None:
    results = check_reference(cfg)
    assert [r.name.split()[0] for r in results] == ["G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8", "G12"]
    assert all(r.passed for r in results), "\n".join(r.line() for r in results)


def test_golden_check_detects_a_mismatch(inp, tmp_path: Path, reference_dir: Path) -> None:
    tables = tmp_path / "tables"
    shutil.copytree(reference_dir / "results" / "tables", tables)
    p = tables / "policy_control.tex"
    p.write_text(p.read_text().replace("$14.60$", "$14.61$"))
    r = G.check_g1_tables(inp.cells(), tables, inp.eligibility())
    assert not r.passed and "policy_control.tex: differs" in r.failures[0] and "line 1" in r.failures[0]


def test_run_all_writes_every_element(cfg) -> None:
    results = run_all(cfg)
    assert [r.element for r in results] == list(ELEMENTS)
    tables = cfg.out_dir / "tables"
    for name in ("headline.tex", "lexical_window.tex", "policy_cbu.tex", "numbers.tex", "vqa_mean_std.tex"):
        assert (tables / name).stat().st_size > 0
    for stem in ("fig2_left_yield_risk", "fig2_right_budget_sweep", "fig1_right_prompt_support", "fig_prompt_support_heatmap"):
        for ext in ("pdf", "png", "csv"):
            assert (cfg.out_dir / "figures" / f"{stem}.{ext}").stat().st_size > 0
    assert (cfg.out_dir / "numbers.json").exists()


def test_env_override_reroots_reference_paths(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CAPAUDIT_REFERENCE_DIR", str(tmp_path / "ref"))
    p = resolve_path("../shared/reference/results/x.json", PARAMS, "../shared/reference")
    assert p == tmp_path / "ref" / "results" / "x.json"
    assert resolve_path("other/y.json", PARAMS, "../shared/reference") == Path("other/y.json")


def _paper_cli(argv):
    """Run ``capaudit paper ...`` through this stage's own ``register`` (independent of other stages)."""
    import argparse

    from capaudit.paper import cli

    parser = argparse.ArgumentParser(prog="capaudit")
    cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_check_reference_exit_codes(tmp_path: Path, reference_dir: Path, monkeypatch, capsys) -> None:
    assert _paper_cli(["paper", "check-reference", "--params", str(PARAMS)]) == 0
    assert "PASS G1" in capsys.readouterr().out
    bad_ref = tmp_path / "reference"
    shutil.copytree(reference_dir, bad_ref)
    t = bad_ref / "results" / "tables" / "vqa_by_type.tex"
    t.write_text(t.read_text().replace("94.4", "94.5"))
    monkeypatch.setenv("CAPAUDIT_REFERENCE_DIR", str(bad_ref))
    assert _paper_cli(["paper", "check-reference", "--params", str(PARAMS)]) == 1
    out = capsys.readouterr().out
    assert "FAIL G1" in out and "vqa_by_type.tex: differs" in out


def test_cli_tables_writes_outputs(tmp_path: Path, capsys) -> None:
    params = tmp_path / "p.yaml"
    params.write_text(PARAMS.read_text().replace("../shared/reference", str(REPO.parent / "shared" / "reference"))
                      + f"out_root: {tmp_path / 'out'}\n")
    assert _paper_cli(["paper", "tables", "--params", str(params), "--element", "headline"]) == 0
    assert (tmp_path / "out" / "reference" / "tables" / "headline.tex").exists()
    assert "headline: headline.tex" in capsys.readouterr().out


def test_notebook_runs_with_papermill(tmp_path: Path) -> None:
    pm = pytest.importorskip("papermill")
    jupytext = pytest.importorskip("jupytext")
    nb = jupytext.read(REPO / "notebooks" / "paper_headline.py")
    src = tmp_path / "paper_headline.ipynb"
    jupytext.write(nb, src)
    params = tmp_path / "params" / "reference.yaml"
    params.parent.mkdir()
    text = PARAMS.read_text().replace("../shared/reference", str(REPO.parent / "shared" / "reference"))
    params.write_text(text + f"out_root: {tmp_path / 'outputs'}\n")
    pm.execute_notebook(str(src), str(tmp_path / "out.ipynb"), parameters={"params_path": str(params)},
                        kernel_name="python3", cwd=str(REPO), progress_bar=False)
    assert (tmp_path / "outputs" / "reference" / "tables" / "headline.tex").exists()
