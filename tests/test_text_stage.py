"""The text stage end to end: CLI contract, stage run, and the notebook through papermill."""

import json
import subprocess
import sys

import pytest
import yaml

from capaudit.config import load_config
from capaudit.text.paired_deltas import paired_deltas


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


def test_cli_top_k_as_a_list(tmp_path):
    """``--top-k 2,3,10`` (a list, as the reference's driver runs 10,100,1000): every k's raw prefix
    mass, recomputed here from the first five lexical units of each caption by a plain Counter."""
    import random
    from collections import Counter

    from capaudit.text.lexical import lex_units

    rng = random.Random(5)
    words = ["a", "red", "car", "dog", "on", "the", "street", "two", "cats"]
    caps = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(300)]
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"caption": c}) + "\n" for c in caps))
    out = tmp_path / "out.json"
    subprocess.run([sys.executable, "-m", "capaudit.cli", "text-stats", str(src), "--caption-field", "caption",
                    "--budgets", "64", "--top-k", "2,3,10", "--out", str(out)], check=True)
    b = json.loads(out.read_text())["budgets"]["64"]
    counts = sorted(Counter(" ".join(lex_units(c)[:5]) for c in caps).values(), reverse=True)
    want = {str(k): sum(counts[:k]) / len(caps) for k in (2, 3, 10)}
    assert {k: v["raw"] for k, v in b["prefix_top_mass_by_k"].items()} == pytest.approx(want, abs=1e-12)
    assert b["prefix_top_mass"]["raw"] == pytest.approx(want["2"], abs=1e-12)  # 100 not listed: the first k
    one = tmp_path / "one.json"
    subprocess.run([sys.executable, "-m", "capaudit.cli", "text-stats", str(src), "--caption-field", "caption",
                    "--budgets", "64", "--top-k", "3", "--out", str(one)], check=True)
    single = json.loads(one.read_text())["budgets"]["64"]
    assert "prefix_top_mass_by_k" not in single and single["prefix_top_mass"]["raw"] == pytest.approx(want["3"])


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
    from capaudit.paper.stage_tables import render_stage_tables

    assert not (out / "tables" / "text_stats.tex").exists()  # the stage writes rows; the paper renders them
    render_stage_tables(out / "artifacts", out / "tables", run_dir=out)
    table = (out / "tables" / "text_stats.csv").read_text()
    assert "docci_test_docci" in table
    deltas = (out / "tables" / "text_paired_deltas.csv").read_text()
    assert deltas.splitlines()[0] == "comparison,metric,pairs,delta_mean,ci95_low,ci95_high"
    assert "docci_vs_iiw" in deltas
    # unchanged notebook, params and library: nothing re-runs
    stamp = (out / "stamps" / "02_text_stats.sha256").read_text()
    mtime = (out / "notebooks" / "02_text_stats.ipynb").stat().st_mtime
    assert run_all(str(pfile)) == 0
    assert (out / "notebooks" / "02_text_stats.ipynb").stat().st_mtime == mtime
    assert (out / "stamps" / "02_text_stats.sha256").read_text() == stamp
    cfg = load_config(pfile)
    assert cfg.out_dir == out


def _two_notebooks(tmp_path, monkeypatch, params: str):
    """A project folder (the working directory) with notebooks a and b, an input in.tsv and a params file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "a.py").write_text("# %%\nx = 1\n")
    (tmp_path / "notebooks" / "b.py").write_text("# %%\ny = 2\n")
    (tmp_path / "in.tsv").write_text("v\n1\n")
    pfile = tmp_path / "p.yaml"
    pfile.write_text(params)
    return pfile


def test_stamps_change_with_notebook_params_and_named_inputs(tmp_path, repo_dir, monkeypatch):
    from capaudit.workflow import stamps

    pfile = _two_notebooks(tmp_path, monkeypatch, "notebooks: [a, b]\nstage: {input: in.tsv}\n")
    s0 = stamps(load_config(pfile))
    assert stamps(load_config(pfile)) == s0  # deterministic
    (tmp_path / "in.tsv").write_text("v\n2\n")  # a named input changes: everything re-runs
    s1 = stamps(load_config(pfile))
    assert s1["a"] != s0["a"] and s1["b"] != s0["b"]
    (tmp_path / "notebooks" / "b.py").write_text("# %%\ny = 3\n")  # only b and later change
    s2 = stamps(load_config(pfile))
    assert s2["a"] == s1["a"] and s2["b"] != s1["b"]


def _text_stats_lines(tmp_path, row):
    from capaudit.paper.render import to_latex
    from capaudit.paper.stage_tables import stage_table
    from capaudit.summaries.table_rows import write_table_rows
    from capaudit.text.survey import WINDOW_DEFINITION

    p = write_table_rows(tmp_path, "text_stats", "text_stats", [row], function="capaudit.text.survey_rows.surface_row",
                         meta={"budget": 64, "top_k": 100, "window_definition": WINDOW_DEFINITION})
    return to_latex(stage_table(p, run_dir=tmp_path)).splitlines()


def _surface_row(captions):
    from capaudit.text.survey import SurveyConfig, survey_captions
    from capaudit.text.survey_rows import surface_row

    return surface_row("s_1", survey_captions(captions, SurveyConfig(budgets=(64,))).finalize(), 64, 100)


def test_text_stats_table_names_its_window_definition(tmp_path):
    """The table the paper prints opens with a note naming the window the catalog ran on."""
    from capaudit.text.survey import WINDOW_DEFINITION

    lines = _text_stats_lines(tmp_path, _surface_row(["  - indented bullet", "a dog " * 40]))
    assert lines[0] == f"% Windows and violation catalog: {WINDOW_DEFINITION}."
    assert "kept whole, unstripped" in WINDOW_DEFINITION and "cut text stripped" in WINDOW_DEFINITION


def test_text_stats_tex_columns_marks_and_missing(tmp_path):
    """14 columns as the manuscript's header; a prefix mass that is 1.0 by construction is marked and
    footnoted; a value the survey did not compute prints "--", never a number."""
    row = _surface_row(["a red car on a street", "a dog " * 40, "two cats"])
    lines = _text_stats_lines(tmp_path, row)
    assert lines[1] == ("% columns: surface & captions & Avg lex & elig@64 & trunc@64 & opener & prefix raw & "
                        "prefix content & D-1 & D-2 & D-3 & rep-3 & rep-4 & dup")
    cells = lines[2].removesuffix(r" \\").split(" & ")
    assert len(cells) == 14 and cells[0] == r"s\_1" and cells[1] == "$3$"
    assert cells[2] == f"${row['avg_lex']:.2f}$" and cells[3] == f"${row['elig64']:.4f}$"
    assert cells[6] == r"$1.0000$$^{\dagger}$" and cells[7].endswith(r"$^{\dagger}$")  # 3 prefixes, top-100
    assert lines[-1].startswith(r"% $^{\dagger}$ top-k prefix mass is 1.0 by construction")
    missing = _text_stats_lines(tmp_path, dict(row, d3_64=None))[2].split(" & ")
    assert len(missing) == 14 and missing[10] == "--"


def test_stamps_ignore_the_runs_own_outputs_and_status_names_what_changed(tmp_path, monkeypatch, capsys):
    """A params value naming a file under outputs/ (a stage's product) does not move any stamp when
    a stage writes it; ``notebook status`` names the part that changed for a stale notebook."""
    import json as _json

    from capaudit.workflow import _main, stamp_parts, stamp_of, stamps

    pfile = _two_notebooks(tmp_path, monkeypatch,
                           "run: r\nnotebooks: [a, b]\nstage: {input: in.tsv, product: outputs/r/artifacts/x.jsonl}\n")
    s0 = stamps(load_config(pfile))
    (tmp_path / "outputs" / "r" / "artifacts").mkdir(parents=True)
    (tmp_path / "outputs" / "r" / "artifacts" / "x.jsonl").write_text("{}\n")  # a stage wrote its product
    assert stamps(load_config(pfile)) == s0
    # stamp both as a run does (hash + parts), then change the named input and the notebook b
    parts = stamp_parts(load_config(pfile))
    (tmp_path / "outputs" / "r" / "stamps").mkdir()
    for name, p in parts.items():
        (tmp_path / "outputs" / "r" / "stamps" / f"{name}.sha256").write_text(stamp_of(name, p) + "\n")
        (tmp_path / "outputs" / "r" / "stamps" / f"{name}.parts.json").write_text(_json.dumps(p))

    class Args:
        action, params, names, force = "status", str(pfile), [], False

    assert _main(Args()) == 0
    assert capsys.readouterr().out.splitlines() == ["a\tup to date", "b\tup to date"]
    (tmp_path / "in.tsv").write_text("v\n2\n")
    (tmp_path / "notebooks" / "b.py").write_text("# %%\ny = 3\n")
    assert _main(Args()) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "a\tstale: changed: params in.tsv"
    assert out[1] == "b\tstale: changed: its notebook source; params in.tsv; the notebook before it (a)"


def test_text_stats_max_records_caps_each_surface(tmp_path, monkeypatch):
    """``text_stats.max_records`` (params/paper.yaml sets the reference driver's 1,000,000): each
    surface's survey reads its first N rows, and says it read N."""
    from capaudit.text.params import TextStatsParams
    from capaudit.text.stage import survey_surfaces

    monkeypatch.chdir(tmp_path)
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(f'{{"caption": "caption number {i} of a red bus"}}\n' for i in range(7)))
    pfile = tmp_path / "cap.yaml"
    pfile.write_text(yaml.safe_dump({"run": "cap", "surfaces": [{"name": "s", "file": str(caps), "format": "jsonl",
                                                                   "caption_field": "caption"}],
                                     "text_stats": {"budgets": [4], "max_records": 5}}))
    cfg = load_config(pfile)
    params = TextStatsParams.from_section(cfg.section("text_stats"), cfg.path)
    assert params.max_records == 5
    capped = survey_surfaces(params, cfg)["s"]
    assert capped["records"] == 5 and capped["config"]["max_records"] == 5
    whole = TextStatsParams.from_section({"budgets": [4]}, cfg.path)
    uncapped = survey_surfaces(whole, cfg)["s"]
    assert uncapped["records"] == 7 and "max_records" not in uncapped["config"]
