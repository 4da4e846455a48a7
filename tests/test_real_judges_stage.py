"""The "real judges, real people" stage and its paper elements (issue 20), on the DSG release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from capaudit.config import load_config
from capaudit.errors import InputError
from capaudit.judges import real_judges
from capaudit.paper.real_judges import render
from capaudit.summaries.numbers_fragments import read_numbers_fragments


def _cfg(tmp_path: Path, section=None):
    p = tmp_path / "p.yaml"
    body = {"run": "rj", "out_root": str(tmp_path / "out"), "notebooks": []}
    if section is not None:
        body["real_judges"] = section
    p.write_text(yaml.safe_dump(body))
    return load_config(p)


@pytest.mark.slow
def test_stage_and_paper_elements(dsg_release: Path, tmp_path: Path):
    cfg = _cfg(tmp_path, {"correlation_reps": 200, "calibration": {"subsets": 300}})
    summary = real_judges.run(cfg)
    dirs = cfg.dirs()
    assert json.loads((dirs["artifacts"] / "real_judges" / "summary.json").read_text())["settings"][
        "calibration"]["subsets"] == 300
    nums = read_numbers_fragments(dirs["artifacts"])
    assert nums["RealReproduced"]["value"] == nums["RealReproducible"]["value"] == 27
    assert summary["agreement"]["images"] == 1695
    multi = summary["agreement"]["all_judges"]["dsg"]
    assert multi["judges"] == ["mplug-large", "instruct-blip", "pali-17b"]
    assert multi["by_type"]["__all__"]["questions"] == 11858
    paths = render(summary, dirs["tables"], dirs["figures"])
    corr = paths["reproduction"].read_text()
    assert corr.count(r"\checkmark") == 9 and corr.count("no answer key") == 3
    assert "pali-17b & DSG & 0.571 & 0.571 & 0.458 & 0.458" in corr
    assert paths["dsg1k"].read_text().count(r"\checkmark") == 9
    assert "source: DSG release" in paths["coverage"].read_text().splitlines()[0]
    for ext in ("pdf", "png", "csv"):
        assert (dirs["figures"] / f"real_judges_calibration.{ext}").is_file()


def test_unknown_settings_key_is_refused(tmp_path: Path):
    with pytest.raises(InputError, match="real_judges.judge"):
        real_judges.settings(_cfg(tmp_path, {"judge": "x"}))


def test_numbers_carry_formats_the_paper_prints() -> None:
    from capaudit.paper.numbers import fragment_text

    summary = {"reproduction": {"correlation": [{"reproducible": 3, "equal": 2}], "dsg1k": [{"equal": 1}, {"equal": 0}]},
               "calibration": {"coverage": [
                   {"ppi_coverage": 0.9412, "relative_width": 0.8, "judge_estimate": 3.5, "truth": 3.25},
                   {"ppi_coverage": 0.955, "relative_width": 0.6, "judge_estimate": 3.9, "truth": 3.2}]}}
    nums = real_judges.numbers(summary)
    assert all("text" not in n for n in nums.values())
    printed = {k: fragment_text(v, k) for k, v in nums.items()}
    assert printed == {"RealReproduced": "5", "RealReproducible": "8", "RealCoverageMin": "94.1\\%",
                       "RealCoverageMax": "95.5\\%", "RealNarrowerMin": "20\\%", "RealNarrowerMax": "40\\%",
                       "RealJudgeBiasMin": "0.25", "RealJudgeBiasMax": "0.70"}
