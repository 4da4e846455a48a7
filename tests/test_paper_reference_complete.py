"""The reference run renders every published summary (issue: the reference run renders every published summary).

Runs the reference run's paper elements (the library functions its ``paper_*`` notebooks call; no
LaTeX) into a temporary run folder and checks that

* every file under ``results/`` is named by the provenance of some table or figure, or explained in
  ``params/reference_absent.yaml`` (``unrendered_inputs``);
* every manuscript element the run does not produce has a one-line reason there, and no reason is
  kept for an element it does produce;
* the numbers each adapter renders equal the published file's, read here independently with
  :mod:`csv` / :mod:`json` (pool-wins recomputed from the bootstrap TSV as the manuscript quotes them);
* a published file with a missing column or a bad value is refused in one line naming file, row, field;
* every ``\\section`` of the manuscript is guarded, so none prints empty.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PARAMS = REPO / "params" / "reference.yaml"


def _read(path: Path, delimiter: str = "\t") -> List[Dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter=delimiter))


@pytest.fixture(scope="module")
def results(reference_dir: Path) -> Path:
    r = reference_dir / "results"
    if not r.is_dir():
        pytest.skip(f"no reference results in {reference_dir}")
    return r


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, results: Path) -> Path:
    """The reference run's paper elements, in the params file's order, into a temporary folder."""
    from capaudit.config import load_config
    from capaudit.paper.run import ELEMENTS

    cfg = load_config(PARAMS, out_root=tmp_path_factory.mktemp("out"))
    names = [n[len("paper_"):] for n in cfg.raw["notebooks"] if n.startswith("paper_")]
    assert {"reference_text", "reference_prompts", "reference_embed", "reference_judges"} <= set(names)
    for n in names:
        ELEMENTS[n](cfg)
    return cfg.out_dir


def _models(run: Path) -> Dict[str, Any]:
    from capaudit.paper.report_inputs import read_model

    return {p.name[: -len(".table.json")]: read_model(p)
            for d in ("tables", "figures") for p in sorted((run / d).glob("*.table.json"))}


def _rows(run: Path, table: str) -> List[Dict[str, Any]]:
    return json.loads((run / "tables" / f"{table}.table.json").read_text(encoding="utf-8"))["rows"]


def _reasons() -> Dict[str, Dict[str, str]]:
    return yaml.safe_load((REPO / "params" / "reference_absent.yaml").read_text(encoding="utf-8"))


# --- every published file, every absent element ------------------------------------------------------

def test_every_results_file_is_rendered_or_explained(run: Path, results: Path) -> None:
    named = set()
    for t in _models(run).values():
        for f in (*t.provenance.files, *t.provenance.inputs):
            named.add(os.path.normpath(f))
    explained = _reasons()["unrendered_inputs"]
    published = sorted(p.relative_to(results).as_posix() for p in results.rglob("*") if p.is_file())
    assert len(published) == 36
    in_provenance = {f for f in published if os.path.normpath(str(Path("../shared/reference/results") / f)) in named
                     or os.path.normpath(str(results / f)) in named}
    missing = [f for f in published if f not in in_provenance and f not in explained]
    assert missing == []
    assert not set(explained) & in_provenance, "an explained file is rendered after all: drop its explanation"
    assert set(explained) - set(published) == set(), "an explanation names no published file"
    # the six published tables stay explained as the byte-identical targets, the rest is rendered
    assert sorted(f for f in explained if not f.startswith("tables/")) == ["raw_summaries/cpu_text_metrics/summary.json"]
    assert len(in_provenance) == 29


def test_every_absent_element_has_a_reason(run: Path) -> None:
    from capaudit.paper.report_inputs import in_run, manuscript_elements

    elements = manuscript_elements(REPO / "paper" / "main.tex")
    produced = {m.file for m in elements if in_run(m, run)}
    absent = {m.file for m in elements if not in_run(m, run)}
    reasons = _reasons()["elements"]
    assert len(produced) == 25 and len(elements) == 64
    assert sorted(absent - set(reasons)) == [], "absent elements without a reason"
    assert sorted(set(reasons) & produced) == [], "a reason for an element the run produces"
    assert sorted(set(reasons) - absent) == [], "a reason for an element the manuscript does not have"
    assert all(r.strip() and "\n" not in r.strip() for r in reasons.values())


def test_the_report_prints_each_reason(run: Path) -> None:
    from capaudit.paper.report import build_report

    html = build_report(run, params=str(PARAMS)).read_text(encoding="utf-8")
    reasons = _reasons()
    assert "Not produced by this run" in html and "each with the reason" in html
    for r in (*reasons["elements"].values(), *reasons["unrendered_inputs"].values()):
        assert r.replace("'", "&#x27;") in html
    assert "Inputs no element renders" in html and "raw_summaries/cpu_text_metrics/summary.json" in html


# --- numbers as published ----------------------------------------------------------------------------

def test_pool_wins_are_recomputed_from_the_bootstrap_tsv(run: Path, results: Path) -> None:
    """The manuscript quotes \\canum{PoolWinsDataComp} etc.; the table and the number come from the TSV."""
    tsv = _read(results / "raw_summaries/prompt_support/prompt_support_bootstrap_b64_n2_250k_2026-04-24.tsv")
    pools = sorted({r["prompt_pool"] for r in tsv} - {"sd_prompts_dedup_xzuyn"})
    assert len(pools) == 7
    wins: Dict[str, int] = {}
    for r in tsv:
        if r["metric"] == "prompt_mass_on_caption_support" and r["prompt_pool"] in pools:
            wins[r["comparison"]] = wins.get(r["comparison"], 0) + (float(r["delta_mean_local_minus_reference"]) > 0)
    table = {r["comparison"]: r for r in _rows(run, "prompt_pool_wins")}
    assert {c: r["wins"] for c, r in table.items()} == wins
    assert wins["datacomp_recap_llava15_paired_url"] == 6 and wins["laion_pop_llama32_paired"] == 5
    assert all(r["pools"] == 7 for r in table.values())
    numbers = json.loads((run / "numbers.json").read_text(encoding="utf-8"))
    assert "\\canum{PoolWinsDataComp}" in (REPO / "paper" / "main.tex").read_text(encoding="utf-8")
    assert numbers["caPoolWinsDataComp"]["value"] == table["datacomp_recap_llava15_paired_url"]["wins"] == 6
    mass = [float(r["local_block_mean"]) for r in tsv if r["comparison"] == "datacomp_recap_llava15_paired_url"
            and r["metric"] == "prompt_mass_on_caption_support" and r["prompt_pool"] in pools]
    assert table["datacomp_recap_llava15_paired_url"]["prompt_mass_local"] == pytest.approx(sum(mass) / 7, abs=0)
    assert table["laion_pop_llama32_paired"]["pools_lost"] == "flux_prompts_regpeter, sdxl_refiner_prompts_falah"
    tex = (run / "tables" / "prompt_pool_wins.tex").read_text(encoding="utf-8")
    assert "datacomp\\_recap\\_llava15\\_paired\\_url & $6/7$ & $0.5938$ & $0.4674$" in tex
    means = json.loads((run / "figures" / "prompt_support_pool_means.table.json").read_text(encoding="utf-8"))
    got = {(r["comparison"], r["metric"]): r["local_mean"] for r in means["rows"]}
    assert got[("datacomp_recap_llava15_paired_url", "prompt_mass_on_caption_support")] == pytest.approx(sum(mass) / 7, abs=0)
    heat = json.loads((run / "figures" / "prompt_support_pool_heatmap.table.json").read_text(encoding="utf-8"))
    assert len(heat["rows"]) == len(tsv) and heat["provenance"]["notebook"] == "paper_reference_prompts"


def test_text_tables_equal_the_published_tsvs(run: Path, results: Path) -> None:
    cpu = results / "raw_summaries/cpu_text_metrics"
    fair = _read(cpu / "fair_slices_1m_normalized_2026-04-24.tsv") + _read(cpu / "laion_pop_url_fixed_normalized_2026-04-24.tsv")
    opener = {(r["comparison"], r["records"], side): float(r[f"{side}_rate"]) for r in _read(cpu / "violation_code_breakdown.tsv")
              if r["code"] == "J_meta_statement" for side in ("local", "reference")}
    rows = _rows(run, "text_stats")
    assert len(rows) == len(fair) == 16
    for shown, pub in zip(rows, fair):
        assert shown["surface"].endswith(": " + pub["surface"])
        assert (shown["records"], shown["avg_lex"], shown["elig64"], shown["prefix_content64"], shown["d3_64"], shown["rep4_64"]) == (
            int(pub["records"]), float(pub["avg_tokens"]), float(pub["cov64"]), float(pub["prefix_top100_64"]),
            float(pub["d3_64"]), float(pub["rep4_64"]))
        assert shown["opener64"] == opener.get((pub["comparison"], pub["records"], pub["role"]))
        assert shown["trunc64"] is None and shown["dup_rate"] is None  # not published: never a number
    datacomp = next(r for r in rows if r["surface"] == "DataComp: ours_datacomp_forward")
    assert (datacomp["avg_lex"], datacomp["elig64"], datacomp["opener64"]) == (175.48, 0.9998, 0.02)
    assert sum(r["opener64"] is not None for r in rows) == 14  # the 42,231-pair LAION-pop rows have no breakdown
    tex = (run / "tables" / "text_stats.tex").read_text(encoding="utf-8")
    assert "DataComp: ours\\_datacomp\\_forward & $1{,}000{,}000$ & $175.48$ & $0.9998$ & -- & $0.0200$" in tex
    deltas = _read(cpu / "paired_delta_ci.tsv")
    shown = _rows(run, "text_paired_deltas")
    assert [(r["comparison_id"], r["metric"], r["pairs"], r["delta_mean"], r["ci95_low"], r["ci95_high"]) for r in shown] == [
        (r["comparison"], r["metric"], int(r["records"]), float(r["delta_mean_local_minus_reference"]), float(r["ci95_low"]),
         float(r["ci95_high"])) for r in deltas]
    curves = json.loads((run / "figures" / "budget_curves.table.json").read_text(encoding="utf-8"))
    first = fair[0]
    assert [r["eligibility"] for r in curves["rows"][:3]] == [float(first["cov64"]), float(first["cov128"]), float(first["cov256"])]
    assert set(curves["rows"][0]) == {"surface", "budget", "eligibility"}


def test_encoder_tables_equal_the_published_files(run: Path, results: Path) -> None:
    trunc = _read(results / "raw_summaries/cpu_text_metrics/tokenizer_truncation_core_both_100k_2026-04-24.tsv")
    rows = _rows(run, "encoder_truncation")
    assert [(r["encoder"], r["max_length"], r["records"], r["truncated_rate"], r["at_or_over_rate"], r["mean"], r["p50"],
             r["p95"], r["max"]) for r in rows] == [
        (p["encoder"], int(p["max_len"]), int(p["records"]), float(p["truncated_rate_gt_limit"]), float(p["at_or_over_limit_rate"]),
         float(p["mean_tokens"]), int(float(p["p50_tokens"])), int(float(p["p95_tokens"])), int(float(p["max_tokens"]))) for p in trunc]
    assert rows[0]["truncated_rate"] == 0.31235 and rows[0]["mean"] == 231.33138
    naive = json.loads((results / "sensitivity/naive_encoder_truncation.json").read_text(encoding="utf-8"))
    win = {(r["surface"], r["encoder"]): r for r in _rows(run, "encoder_truncation_windows")}
    assert len(win) == 9
    for s, block in naive.items():
        for enc, e in block["encoders"].items():
            assert (win[(s, enc)]["truncated_rate"], win[(s, enc)]["mean"], win[(s, enc)]["mean_lex"]) == (
                e["truncated_rate_gt_limit"], e["mean_tokens"], block["mean_lex"])
            assert win[(s, enc)]["p95"] is None
    assert win[("naive_qwen35_cc12m_greedy", "longclip248")]["truncated_rate"] == 0.9853137516688919
    profile = _read(results / "raw_summaries/embedding_vendi_support/caption_embedding_profile.tsv")
    probes = _rows(run, "embedding_probes")
    assert [(r["vendi_mean"], r["vendi_ci95_low"], r["erank"], r["participation_ratio"], r["top1_mass"], r["top10_mass"]) for r in probes] == [
        (float(p["vendi_mean"]), float(p["vendi_ci95_low"]), float(p["cov_effective_rank"]), float(p["cov_participation_ratio"]),
         float(p["cov_top1_mass"]), None) for p in profile]
    plot = _read(results / "cc12m_longclip_plot.csv", ",")
    naive_rows = [(m, r) for m in ("full", "input64") for r in _read(results / f"sensitivity/naive_sampled_cc12m_longclip_{m}.tsv")]
    retrieval = _rows(run, "retrieval_margins")
    expected = [(f"{r['surface']} ({r['mode']})", r) for r in plot] + [(f"{r['surface']} ({m})", r) for m, r in naive_rows]
    assert [r["surface"] for r in retrieval] == [s for s, _ in expected]
    for shown, (_, pub) in zip(retrieval, expected):
        for k in ("trunc_gt_248", "tok_mean", "pos_mean", "i2t_margin_mean", "i2t_r1", "i2t_r5", "t2i_margin_mean", "t2i_r1", "t2i_r5"):
            assert shown[k] == float(pub[k]), k
    assert retrieval[0]["pos_mean"] == 0.322264 and retrieval[-2]["trunc_gt_248"] == 0.9924


def test_judge_and_human_tables_equal_the_published_files(run: Path, results: Path) -> None:
    rows = _rows(run, "judges_summary")
    rollup = _read(results / "all_vqa_b64_summary.csv", ",")
    shown = [r for r in rows if r["judge_label"].endswith("(all_vqa_b64_summary.csv)")]
    assert [(r["responses"], r["questions"], r["supported_cap"], r["risk"], r["uncertain_rate"]) for r in shown] == [
        (int(p["responses"]), int(p["questions"]), float(p["supported_cap"]), float(p["risk"]), float(p["uncertain"])) for p in rollup]
    pareto = _read(results / "cc12m_vqa_supported_risk_pareto.csv", ",")
    shown = [r for r in rows if "Pareto export" in r["judge_label"]]
    assert [(r["supported_cap"], r["risk"], r["responses"]) for r in shown] == [
        (float(p["supported_cap"]), float(p["risk"]), None) for p in pareto]
    boot = _read(results / "cc12m_cbu_vqa_bootstrap_ci.tsv")
    shown = [r for r in rows if "superseded" in r["judge_label"]]
    assert [(r["surface_label"], r["supported_cap"], r["risk"], r["cbu_cap_ci"]) for r in shown] == [
        (p["surface"], float(p["supported_cap"]), float(p["risk"]), p["cbu_cap_ci"]) for p in boot]
    vqa = json.loads((results / "naive_qwen35_cc12m/vqa_summary_qwen397.json").read_text(encoding="utf-8"))["surfaces"]
    s = next(iter(vqa.values()))
    greedy = next(r for r in rows if r["judge_label"].startswith("Qwen") and r["surface_label"] == "CC12M-control: Naive (greedy)")
    assert (greedy["responses"], greedy["questions"], greedy["risk"], greedy["supported_cap"]) == (
        s["responses"], s["questions"], s["risk_rate"], s["yes"] / s["responses"])
    human = json.loads((results / "human_cbu/judge_human_agreement_bootstrap.json").read_text(encoding="utf-8"))
    agree = _rows(run, "human_judge_agreement")
    assert [(r["estimate"], r["n_records"]) for r in agree] == [
        (b["estimate"], b["n_records"]) for j in human.values() for b in (j["overall"], *j["by_surface"])]
    assert agree[0]["judge"] == "Qwen3.5-397B-A17B-FP8" and agree[0]["estimate"] == 0.8482529701165318


def test_each_model_names_its_published_file(run: Path) -> None:
    models = _models(run)
    expect = {"text_stats": "fair_slices_1m_normalized_2026-04-24.tsv", "text_paired_deltas": "paired_delta_ci.tsv",
              "budget_curves": "fair_slices_1m_normalized_2026-04-24.tsv",
              "prompt_pool_wins": "prompt_support_bootstrap_b64_n2_250k_2026-04-24.tsv",
              "prompt_support_pool_means": "prompt_support_bootstrap_b64_n2_250k_2026-04-24.tsv",
              "encoder_truncation": "tokenizer_truncation_core_both_100k_2026-04-24.tsv",
              "encoder_truncation_windows": "naive_encoder_truncation.json",
              "embedding_probes": "caption_embedding_profile.tsv", "retrieval_margins": "cc12m_longclip_plot.csv",
              "judges_summary": "all_vqa_b64_summary.csv", "human_judge_agreement": "judge_human_agreement_bootstrap.json",
              "fig1_right_prompt_support": "prompt_support_bootstrap_b64_n2_250k_2026-04-24.tsv",
              "fig2_right_budget_sweep": "cc12m_budget_frontier_plot_4494.csv"}
    for element, name in expect.items():
        p = models[element].provenance
        assert any(Path(f).name == name for f in (*p.files, *p.inputs)), (element, p)
        assert p.notebook.startswith("paper_"), (element, p.notebook)


# --- refusals -----------------------------------------------------------------------------------------

def test_a_bad_published_file_is_refused_in_one_line(tmp_path: Path, results: Path) -> None:
    from capaudit.errors import InputError
    from capaudit.paper.reference_inputs_embed import embedding_profile_rows
    from capaudit.paper.reference_inputs_text import paired_delta_rows

    src = results / "raw_summaries/cpu_text_metrics/paired_delta_ci.tsv"
    renamed = tmp_path / "renamed.tsv"
    renamed.write_text(src.read_text(encoding="utf-8").replace("ci95_low", "ci_low", 1), encoding="utf-8")
    with pytest.raises(InputError) as exc:
        paired_delta_rows(renamed)
    assert str(exc.value).startswith(f"{renamed}:1 field 'ci95_low': column is missing") and "\n" not in str(exc.value)
    lines = (results / "raw_summaries/embedding_vendi_support/caption_embedding_profile.tsv").read_text(encoding="utf-8").splitlines()
    cells = lines[3].split("\t")
    cells[3] = "n/a"
    bad = tmp_path / "bad.tsv"
    bad.write_text("\n".join(lines[:3] + ["\t".join(cells)] + lines[4:]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(f"{bad}:4 field 'vendi_mean': expected a number, got 'n/a'")):
        embedding_profile_rows(bad)
    with pytest.raises(InputError, match="not found"):
        paired_delta_rows(tmp_path / "absent.tsv")


def test_a_retrieval_summary_that_disagrees_with_the_plot_csv_is_refused(tmp_path: Path, results: Path) -> None:
    from capaudit.errors import InputError
    from capaudit.paper.reference_inputs_embed import retrieval_rows

    src = results / "raw_summaries/longclip_retrieval/longclip_retrieval_summary.tsv"
    changed = tmp_path / "summary.tsv"
    changed.write_text(src.read_text(encoding="utf-8").replace("0.316327", "0.316328", 1), encoding="utf-8")
    assert len(retrieval_rows(results / "cc12m_longclip_plot.csv", src)) == 8
    with pytest.raises(InputError, match=re.escape(f"{changed}:2 field 'pos_mean'")):
        retrieval_rows(results / "cc12m_longclip_plot.csv", changed)


def test_a_missing_input_leaves_its_table_out(tmp_path: Path, results: Path) -> None:
    from capaudit.config import load_config
    from capaudit.paper.run_reference import run_reference_embed

    raw = yaml.safe_load(PARAMS.read_text(encoding="utf-8"))
    del raw["paper"]["inputs"]["embedding_profile"]
    params = tmp_path / "params" / "reference.yaml"
    params.parent.mkdir()
    raw["paper"]["inputs"] = {k: (str((REPO / v).resolve()) if isinstance(v, str) else
                                  [{**e, "file": str((REPO / e["file"]).resolve())} for e in v])
                              for k, v in raw["paper"]["inputs"].items()}
    params.write_text(yaml.safe_dump(raw), encoding="utf-8")
    cfg = load_config(params, out_root=tmp_path / "out")
    tables = cfg.dirs()["tables"]
    (tables / "embedding_probes.tex").write_text("stale\n", encoding="utf-8")
    out = run_reference_embed(cfg)
    assert "embedding_probes" not in out.paths and not (tables / "embedding_probes.tex").exists()
    assert (tables / "encoder_truncation.tex").is_file()


# --- no empty section -----------------------------------------------------------------------------------

GUARDS = ("\\ifanyfile{", "\\iftable{", "\\iffigure{", "\\withnum{")


def test_every_manuscript_section_is_guarded() -> None:
    """A \\section either is a \\runsection (heading, or one line naming its artefact) or opens inside a
    guard on the line before it: a run without the section's elements never prints an empty section."""
    lines = (REPO / "paper" / "main.tex").read_text(encoding="utf-8").splitlines()
    bare = []
    for i, line in enumerate(lines):
        code = re.split(r"(?<!\\)%", line, maxsplit=1)[0]
        if "\\section{" not in code or "\\newcommand" in code or "\\runsection" in code:
            continue
        before = code[: code.index("\\section{")]
        prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        if not (any(g in before for g in GUARDS) or (prev.lstrip().startswith(GUARDS) and prev.rstrip().endswith("{%"))):
            bare.append(f"line {i + 1}: {line.strip()}")
    assert bare == []
    assert sum(line.startswith("\\runsection{") for line in lines) == 3


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk not installed")
def test_a_run_without_text_stats_prints_one_line_for_the_text_budget(tmp_path: Path) -> None:
    from capaudit.paper.manuscript import build_pdf

    run = tmp_path / "bare"
    (run / "tables").mkdir(parents=True)
    (run / "figures").mkdir()
    (run / "tables" / "headline.tex").write_text("A & 1 & 2 & 3 & 4 & 5 \\\\\n", encoding="utf-8")
    build_pdf(run)
    log = (run / "paper" / "main.log").read_text(encoding="utf-8", errors="replace")
    aux = (run / "paper" / "main.aux").read_text(encoding="utf-8", errors="replace")
    assert "Text budget" not in aux and "Support and risk" in aux  # a heading only where an element is
    assert "Claimed density" not in aux and "Error" not in log.split("Output written")[0][-2000:]
