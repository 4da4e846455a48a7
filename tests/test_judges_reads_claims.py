"""The judges stage reads the claims the claims stage extracted for its judged slices
(capaudit.claims.judged) and refuses, naming the missing file, when they are not there."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from capaudit.config import load_config
from capaudit.errors import InputError

A, B = "capaudit-offline-annotation-judge", "capaudit-offline-refcaption-judge"


def _cfg(tmp_path: Path, **extra):
    surfaces = [{"name": n, "label": n, "role": role, "source": "coco_mini_captions", "caption_rank": rank, "limit": 4}
                for n, role, rank in (("coco_a", "ours", 0), ("coco_b", "ref", 1))]
    params = {"run": "rc", "judges": {"extractor": "capaudit-heuristic-extractor", "budget": 64, "image_mode": "file",
                                      "judges": [{"name": A}, {"name": B}], "reps": 50, "seed": 0,
                                      "slices": [{"name": "COCO-MINI", "surfaces": surfaces}], **extra}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    return load_config(tmp_path / "p.yaml")


def test_judges_refuse_without_the_claims_stage_output(tmp_path: Path, monkeypatch) -> None:
    from capaudit.judges.stage import run

    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"COCO-MINI/captions\.jsonl: the claims of judged slice 'COCO-MINI' are "
                                         r"missing: run the claims step") as e:
        run(_cfg(tmp_path))
    assert "\n" not in str(e.value)


def test_judges_run_on_the_claims_the_claims_step_wrote(tmp_path: Path, monkeypatch) -> None:
    from capaudit.claims.judged import run_judged
    from capaudit.judges.stage import run

    monkeypatch.chdir(tmp_path)
    cfg = _cfg(tmp_path)
    stats = run_judged(cfg)
    sdir = cfg.out_dir / "artifacts" / "judges" / "COCO-MINI"
    assert set(stats) == {"COCO-MINI"} and (sdir / "claims" / "responses.jsonl").is_file()
    out = run(cfg)
    assert not out.pending and out["table"] is out.table and len(out.table)
    assert out.manifest["slices"]["COCO-MINI"]["run_stats"]["claims"] == stats["COCO-MINI"]
    assert "cells" in out.to_dict()


def test_an_unknown_judges_key_is_one_line_naming_file_section_and_key(tmp_path: Path) -> None:
    from capaudit.judges.params import JudgesParams

    cfg = _cfg(tmp_path, judge_reps=3)
    with pytest.raises(InputError, match=r"p\.yaml: judges\.judge_reps: unknown key \(known: .*reps"):
        JudgesParams.from_config(cfg)
