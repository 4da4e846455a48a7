"""The simulated demo report: run_demo and the notebooks (reference-spec §7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from capaudit.config import load_config
from capaudit.errors import InputError
from capaudit.human.simulate import synthetic_judged_claims
from capaudit.human.stage import judged_claims_paths, run_demo, study_db_path
from capaudit.human.study import Study
from capaudit.paper.human_figures import plot_confusion
from capaudit.paper.stage_tables import render_stage_tables
from capaudit.summaries.numbers_fragments import read_numbers_fragments

HUMAN = {
    "study_id": "demo-human-test", "mode": "simulated", "claims_per_stratum": 3, "require_all_strata": False,
    "target_items": 200, "max_items": 220, "readiness": {"bootstrap_resamples": 300},
    "simulate": {"annotators": 3, "accuracy": 0.85, "seed": 11},
}


def _params(tmp_path: Path, human=None) -> Path:
    p = tmp_path / "demo_test.yaml"
    p.write_text(yaml.safe_dump({"run": "demo_test", "out_root": str(tmp_path / "outputs"), "notebooks": [],
                                 "human": human or HUMAN}), encoding="utf-8")
    return p


def test_run_demo_writes_simulated_table_figure_and_numbers(tmp_path: Path) -> None:
    cfg = load_config(_params(tmp_path))
    with pytest.raises(InputError, match="05_judges"):
        judged_claims_paths(cfg)
    art = tmp_path / "outputs" / "demo_test" / "artifacts"
    synthetic_judged_claims(art / "judges" / "coco_mini_demo" / "judged_claims.jsonl", n_images=30, seed=2)
    out = run_demo(cfg)
    table = out["table"]
    assert set(table["labels"]) == {"simulated annotators"}
    assert list(table["judge"].unique()) == ["judge_a", "judge_b"]
    first = table[table["judge"] == "judge_a"]
    assert first["surface_group"].tolist() == ["all", "coco_caption_a", "coco_caption_b"]
    assert (first["lower"] <= first["estimate"]).all() and (first["estimate"] <= first["upper"]).all()
    assert first["n_records"].iloc[0] == first["n_records"].iloc[1:].sum()
    tables = tmp_path / "outputs" / "demo_test" / "tables"
    assert not (tables / "human_judge_agreement.tex").exists()  # the stage writes rows, the paper renders them
    rendered = {t.id: t for t in render_stage_tables(art, tables, run_dir=cfg.out_dir)}
    assert set(rendered) == {"human_judge_agreement", "human_corrected_support"}
    assert rendered["human_judge_agreement"].caveats == ("simulated annotators",)
    atex = (tables / "human_judge_agreement.tex").read_text().splitlines()
    assert "SIMULATED" in atex[1] and sum(1 for x in atex if not x.startswith("%")) == len(table)
    r0 = table.iloc[0]
    assert atex[3] == (f"judge\\_a & all & ${r0['estimate']:.3f}$ & [{r0['lower']:.3f}, {r0['upper']:.3f}] & "
                       f"${r0['n_records']}$ & ${r0['n_clusters']}$ & simulated annotators \\\\")
    assert (tables / "human_judge_agreement.csv").read_text().count("simulated annotators") == len(table)
    # supported CBU per caption corrected by (simulated) people, per judge and surface
    corr = out["corrected"]
    assert set(corr["labels"]) == {"simulated annotators"} and set(corr["judge"]) == {"judge_a", "judge_b"}
    assert set(corr["surface"]) == {"coco_caption_a", "coco_caption_b"} and (corr["scope"] == "surface").all()
    est = corr[corr["status"] == "ok"]
    assert len(est) and (est["ppi_cap_lo"] <= est["ppi_cap"]).all() and (est["ppi_cap"] <= est["ppi_cap_hi"]).all()
    assert est["ppi_cap"].tolist() == pytest.approx((est["ppi_share"] * est["claims"] / est["captions"]).tolist())
    assert corr[corr["status"] != "ok"]["ppi_cap"].isna().all()
    ctex = (tables / "human_corrected_support.tex").read_text()
    assert ctex.startswith("% supported CBU per caption") and "% simulated annotators: human labels are SIMULATED" in ctex
    assert sum(1 for x in ctex.splitlines() if not x.startswith("%")) == len(corr)
    assert (tables / "human_corrected_support.csv").read_text().count("simulated annotators") == len(corr)
    exported = json.loads((art / "human" / "export" / "human_corrected_support.json").read_text())
    assert exported["simulated"] is True and len(exported["rows"]) == len(corr)
    # the stage writes the confusion counts; the notebook draws them with the paper's plot_confusion
    conf = json.loads((art / "human" / "confusion.json").read_text())
    assert conf["simulated"] is True and conf["confusion"] == out["confusion"]
    assert set(out["confusion"]) == {"judge_a", "judge_b"}
    figs = tmp_path / "outputs" / "demo_test" / "figures"
    assert not (figs / "human_confusion.png").exists()  # the stage draws no figure
    plot_confusion(out["confusion"], figs / "human_confusion", simulated=True)
    assert (figs / "human_confusion.png").stat().st_size > 0 and (figs / "human_confusion.pdf").is_file()
    nums = read_numbers_fragments(art)
    assert {"HumanSimItems", "HumanSimJudgments", "HumanSimAgreementJudgeA", "HumanSimAgreementJudgeB"} <= set(nums)
    assert all(n["stage"] == "human" for n in nums.values() if n["stage"] == "human")
    assert "SIMULATED" in nums["HumanSimAgreementJudgeA"]["description"]
    assert nums["HumanSimAgreementJudgeA"]["format"] == "num:2" and nums["HumanSimItems"]["format"] == "int"
    manifest = json.loads((art / "human" / "demo_manifest.json").read_text())
    assert manifest["backend"] == "simulated annotators" and manifest["mode"] == "simulated"
    exp = json.loads((art / "human" / "export" / "human_study_export.json").read_text())
    assert exp["simulated"] is True and exp["open_disagreements"] == 0
    db = study_db_path(cfg)
    assert db == art / "human" / "demo-human-test.sqlite" and db.is_file()
    # a second run rebuilds the simulated study from scratch
    again = run_demo(cfg)
    assert again["table"]["estimate"].tolist() == pytest.approx(table["estimate"].tolist())
    assert again["corrected"]["ppi_cap"].tolist() == pytest.approx(corr["ppi_cap"].tolist(), nan_ok=True)


def test_run_demo_refuses_real_mode_and_real_databases(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="human.mode"):
        run_demo(load_config(_params(tmp_path, {**HUMAN, "mode": "real"})))
    cfg = load_config(_params(tmp_path))
    art = tmp_path / "outputs" / "demo_test" / "artifacts"
    synthetic_judged_claims(art / "judges" / "s" / "judged_claims.jsonl", n_images=10)
    from capaudit.human.protocol import StudyConfig

    Study.create(study_db_path(cfg), StudyConfig(study_id="demo-human-test")).close()  # a real study there
    with pytest.raises(InputError, match="refusing to replace a real study"):
        run_demo(cfg)


@pytest.mark.slow
def test_demo_notebook_runs_with_papermill(tmp_path: Path, repo_dir: Path) -> None:
    import jupytext
    import papermill

    params = _params(tmp_path)
    art = tmp_path / "outputs" / "demo_test" / "artifacts"
    synthetic_judged_claims(art / "judges" / "coco_mini_demo" / "judged_claims.jsonl", n_images=20, seed=3)
    nb = jupytext.read(repo_dir / "notebooks" / "11_human_agreement.py")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "11.ipynb"
    jupytext.write(nb, src, fmt="ipynb")
    papermill.execute_notebook(str(src), str(tmp_path / "11.out.ipynb"), parameters={"params_path": str(params)},
                               cwd=str(repo_dir), progress_bar=False, kernel_name="python3")
    assert (art / "tables" / "human_judge_agreement.json").is_file()
    assert (art / "tables" / "human_corrected_support.json").is_file()
    figs = tmp_path / "outputs" / "demo_test" / "figures"
    assert (figs / "human_confusion.png").stat().st_size > 0 and (figs / "human_confusion.pdf").is_file()
    # the annotation notebook is a parameters cell plus one call
    hv = jupytext.read(repo_dir / "notebooks" / "human_verification.py")
    code = [c for c in hv.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []) and len(code) == 2


def test_human_params_refuse_a_bad_stage_key_in_one_line(tmp_path):
    import yaml as _yaml

    from capaudit.config import load_config
    from capaudit.errors import InputError
    from capaudit.human.params import HumanParams

    base = {"study_id": "s", "mode": "simulated"}
    for extra, where in (({"simulate": {"annotator": 3}}, "human.simulate.annotator: unknown key"),
                         ({"simulate": {"accuracy": 1.5}}, "human.simulate.accuracy: expected a share"),
                         ({"db": 3}, "human.db: expected a path")):
        p = tmp_path / "p.yaml"
        p.write_text(_yaml.safe_dump({"run": "p", "human": {**base, **extra}}))
        with pytest.raises(InputError, match=where.replace(".", r"\.")):
            HumanParams.from_config(load_config(p))
    p.write_text(_yaml.safe_dump({"run": "p", "human": base}))
    hp = HumanParams.from_config(load_config(p))
    assert (hp.simulate.annotators, hp.simulate.accuracy, hp.simulate.seed) == (3, 0.85, None)
    assert hp.judged_claims == ("judges/*/judged_claims.jsonl",) and hp.db is None
