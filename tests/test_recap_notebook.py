"""Notebook 06_recap executes end to end (slow: papermill) on demo-style params."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


@pytest.mark.slow
def test_notebook_runs(tmp_path: Path, repo_dir: Path):
    pytest.importorskip("papermill")
    params = {"run": "nbtest", "notebooks": ["06_recap"], "recap": {
        "model": "capaudit-offline-coco-captioner", "policies": ["photorealistic", "naive"],
        "policies_dir": str(repo_dir / "params" / "policies"),
        "inputs": [{"dataset": "coco_mini", "path": "train2017"}, {"dataset": "coco_mini", "path": "val2017"}],
        "surface_prefix": "recap_coco_mini", "limit": 10, "workers": 1}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    nb = tmp_path / "nb.ipynb"
    shutil.copy(repo_dir / "notebooks" / "06_recap.py", tmp_path / "nb.py")
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", str(tmp_path / "nb.py"), "-o", str(nb)],
                   check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "papermill", str(nb), str(tmp_path / "out.ipynb"),
                           "-p", "params_path", "params.yaml", "--cwd", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    art = tmp_path / "outputs" / "nbtest" / "artifacts" / "recap"
    assert {p.name for p in art.glob("*.jsonl")} >= {"recap_coco_mini_photorealistic.jsonl", "recap_coco_mini_naive.jsonl"}
    assert "offline" in (tmp_path / "out.ipynb").read_text()
