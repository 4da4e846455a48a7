"""``judges run --judge NAME``: one judge's server at a time (a GPU machine serves one model). The
other judge's stores are read, not asked; no cell is written until every judge has answered, and the
cells of two one-judge runs equal those of one run asking both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from capaudit.cli import main

A, B = "capaudit-offline-annotation-judge", "capaudit-offline-refcaption-judge"


def _params(tmp_path: Path, run: str) -> Path:
    surfaces = [{"name": n, "label": n, "role": role, "source": "coco_mini_captions", "caption_rank": rank, "limit": 5}
                for n, role, rank in (("coco_a", "ours", 0), ("coco_b", "ref", 1))]
    params = {"run": run, "judges": {"extractor": "capaudit-heuristic-extractor", "budget": 64, "image_mode": "file",
                                     "judges": [{"name": A}, {"name": B}], "reps": 50, "seed": 0,
                                     "slices": [{"name": "COCO-MINI", "surfaces": surfaces}]}}
    path = tmp_path / f"{run}.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def _cells(tmp_path: Path, run: str) -> dict:
    return json.loads((tmp_path / "outputs" / run / "artifacts" / "judges" / "cells.json").read_text())


def test_two_one_judge_runs_give_the_cells_of_one_run(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    one = _params(tmp_path, "split")
    assert main(["judges", "run", "--params", str(one), "--judge", A]) == 0
    err = capsys.readouterr().err
    assert f"asked {A}; no cells yet" in err and f"{B} 10" in err and f"'judges run --judge {B}'" in err
    art = tmp_path / "outputs" / "split" / "artifacts"
    assert not (art / "judges" / "cells.json").exists() and not (art / "tables" / "judges_summary.json").exists()
    manifest = json.loads((art / "judges" / "stage_manifest.json").read_text())
    assert manifest["pending"] == {"COCO-MINI": {B: 10}} and manifest["asked"] == [A]
    assert not (art / "judges" / "COCO-MINI" / "capaudit-offline-refcaption-judge" / "responses.jsonl").exists()
    assert main(["judges", "run", "--params", str(one), "--judge", B]) == 0
    manifest = json.loads((art / "judges" / "stage_manifest.json").read_text())
    assert manifest["slices"]["COCO-MINI"]["run_stats"]["claims"] == {"not_asked": "every request has a row"}
    assert manifest["slices"]["COCO-MINI"]["run_stats"][A]["not_asked"].startswith("not selected (0 ")
    both = _params(tmp_path, "both")
    assert main(["judges", "run", "--params", str(both)]) == 0
    split, joint = _cells(tmp_path, "split"), _cells(tmp_path, "both")
    assert split == joint and split["cells"]
    # a later one-judge run left pending (more captions: new requests never asked) leaves no earlier number
    tabled = [art / "judges" / "cells.json", art / "tables" / "judges_summary.json", art / "numbers" / "judges.json"]
    assert all(p.exists() for p in tabled)
    more = yaml.safe_load(one.read_text())
    for s in more["judges"]["slices"][0]["surfaces"]:
        s["limit"] = 6
    one.write_text(yaml.safe_dump(more))
    assert main(["judges", "run", "--params", str(one), "--judge", A]) == 0
    manifest = json.loads((art / "judges" / "stage_manifest.json").read_text())
    assert manifest["pending"] == {"COCO-MINI": {B: 2}}
    assert not any(p.exists() for p in tabled) and {str(p.relative_to(tmp_path)) for p in tabled} <= set(manifest["removed_stale_outputs"])


def test_an_unknown_judge_is_refused_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    rc = main(["judges", "run", "--params", str(_params(tmp_path, "bad")), "--judge", "gemma"])
    err = capsys.readouterr().err
    assert rc != 0 and "--judge gemma: no such judge" in err and "Traceback" not in err
    assert not (tmp_path / "outputs" / "bad").exists()  # refused before any folder is made
