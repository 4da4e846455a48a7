"""The text stage end to end: CLI contract, stage run, and the notebook through papermill."""

import json
import subprocess
import sys

import pytest
import yaml

from capaudit.config import load_config
from capaudit.text.stage import paired_deltas


def test_cli_contract(tmp_path):
    src = tmp_path / "caps.jsonl"
    rows = [{"caption": "The image shows a red car parked on a street."},
            {"caption": "A dog on a dog on a dog mat"}, {"caption": "  "}, {"caption": "close-up of a person's hand"}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, "-m", "capaudit.cli", "text-stats", str(src), "--caption-field", "caption",
                    "--budgets", "16,32,64", "--out", str(out)], check=True)
    res = json.loads(out.read_text())
    assert res["records"] == 3 and set(res["budgets"]) == {"16", "32", "64"}
    b = res["budgets"]["64"]
    assert set(b) == {"eligibility", "truncation_rate", "opener_rate", "distinct", "rep", "prefix_top_mass"}
    assert set(b["distinct"]) == {"1", "2", "3"} and {"3", "4"} <= set(b["rep"])
    assert set(b["prefix_top_mass"]) == {"raw", "content"}
    assert b["opener_rate"] == pytest.approx(1 / 3)
    assert res["avg_lex"] == pytest.approx((10 + 9 + 6) / 3)
    assert res["definitions"]["window"].startswith("lex-cut window (as the reference)")


def test_cli_malformed_jsonl_names_file_and_line(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"caption": "ok"}\n{"caption": oops}\n')
    p = subprocess.run([sys.executable, "-m", "capaudit.cli", "text-stats", str(src), "--caption-field", "caption"],
                       capture_output=True, text=True)
    assert p.returncode == 1
    # one line that names the file and the line (not merely "a 2 somewhere in stderr")
    assert p.stderr.strip().splitlines() == [
        f"capaudit text-stats: error: {src}: line 2: not valid JSON (Expecting value at column 13)"]


def test_paired_deltas_hand_checked():
    d = paired_deltas(["The image shows " + "a " * 70, "a b c"], ["x", "a b c d"], budget=64).set_index("metric")
    assert d.loc["avg_lexical_tokens", "delta_mean"] == pytest.approx(((73 - 1) + (3 - 4)) / 2)
    assert d.loc["elig64", "delta_mean"] == pytest.approx(0.5)
    assert d.loc["fast_full_j_meta_statement", "delta_mean"] == pytest.approx(0.5)
    assert d.loc["rep4_at64", "delta_mean"] == pytest.approx(0.5)


@pytest.mark.slow
def test_demo_stages_through_papermill(tmp_path, repo_dir, monkeypatch):
    params = yaml.safe_load((repo_dir / "params" / "demo.yaml").read_text())
    params["notebooks"] = ["01_surfaces", "02_text_stats"]
    params["surfaces"] = [s for s in params["surfaces"] if s["name"].startswith("docci")]
    params["slices"] = [s for s in params["slices"] if s["name"] == "docci_vs_iiw"]
    params["text_stats"].update(surfaces=["docci_test_docci", "docci_test_iiw"], slices=["docci_vs_iiw"], workers=1)
    params["out_root"] = str(tmp_path / "outputs")
    params["run"] = "smoke"
    pfile = tmp_path / "smoke.yaml"
    pfile.write_text(yaml.safe_dump(params))
    monkeypatch.chdir(repo_dir)
    from capaudit.workflow import run_all

    assert run_all(str(pfile)) == 0
    out = tmp_path / "outputs" / "smoke"
    assert (out / "notebooks" / "02_text_stats.ipynb").exists()
    assert (out / "figures" / "budget_curves.png").exists()
    table = (out / "tables" / "text_stats.csv").read_text()
    assert "docci_test_docci" in table
    deltas = (out / "tables" / "text_paired_deltas.csv").read_text()
    assert "docci_vs_iiw" in deltas
    # unchanged notebook, params and library: nothing re-runs
    stamp = (out / "stamps" / "02_text_stats.sha256").read_text()
    mtime = (out / "notebooks" / "02_text_stats.ipynb").stat().st_mtime
    assert run_all(str(pfile)) == 0
    assert (out / "notebooks" / "02_text_stats.ipynb").stat().st_mtime == mtime
    assert (out / "stamps" / "02_text_stats.sha256").read_text() == stamp
    cfg = load_config(pfile)
    assert cfg.out_dir == out


def test_stamps_change_with_notebook_params_and_named_inputs(tmp_path, repo_dir, monkeypatch):
    from capaudit.workflow import stamps

    monkeypatch.chdir(tmp_path)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "a.py").write_text("# %%\nx = 1\n")
    (tmp_path / "notebooks" / "b.py").write_text("# %%\ny = 2\n")
    (tmp_path / "in.tsv").write_text("v\n1\n")
    pfile = tmp_path / "p.yaml"
    pfile.write_text("notebooks: [a, b]\nstage: {input: in.tsv}\n")
    s0 = stamps(load_config(pfile))
    assert stamps(load_config(pfile)) == s0  # deterministic
    (tmp_path / "in.tsv").write_text("v\n2\n")  # a named input changes: everything re-runs
    s1 = stamps(load_config(pfile))
    assert s1["a"] != s0["a"] and s1["b"] != s0["b"]
    (tmp_path / "notebooks" / "b.py").write_text("# %%\ny = 3\n")  # only b and later change
    s2 = stamps(load_config(pfile))
    assert s2["a"] == s1["a"] and s2["b"] != s1["b"]


def test_text_stats_table_names_its_window_definition(tmp_path):
    """The table the paper prints opens with a note naming the window the catalog ran on."""
    from capaudit.text.stage import surface_row, write_table
    from capaudit.text.survey import WINDOW_DEFINITION, SurveyConfig, survey_captions

    r = survey_captions(["  - indented bullet", "a dog " * 40], SurveyConfig(budgets=(64,))).finalize()
    write_table([surface_row("s", r, 64)], tmp_path)
    first = (tmp_path / "text_stats.tex").read_text(encoding="utf-8").splitlines()[0]
    assert first == f"% Windows and violation catalog: {WINDOW_DEFINITION}."
    assert "kept whole, unstripped" in WINDOW_DEFINITION and "cut text stripped" in WINDOW_DEFINITION
