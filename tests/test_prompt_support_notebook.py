"""The stage notebook executes end to end on the demo-style params (slow: papermill)."""

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
    params = {
        "run": "nbtest",
        "notebooks": ["03_prompt_support"],
        "prompt_support": {
            "block_size": 20,
            "reps": 200,
            "paper_pools": ["drawbench", "geneval"],
            "pools": {"prepare": {
                "sources": [
                    {"name": "drawbench", "dataset": "drawbench", "path": "drawbench.csv", "field": "Prompt"},
                    {"name": "geneval", "dataset": "geneval", "path": "prompts/evaluation_metadata.jsonl", "field": "prompt"},
                ],
                "unions": [{"name": "union", "members": ["drawbench", "geneval"]}],
            }},
            "comparisons": [{"name": "docci_vs_iiw", "pairs": {"dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl"},
                             "local_field": "DOCCI", "reference_field": "IIW"}],
            "sensitivity": {"budgets": [64, "full"], "ngrams": [1, 2]},
        },
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), encoding="utf-8")
    nb = tmp_path / "nb.ipynb"
    shutil.copy(repo_dir / "notebooks" / "03_prompt_support.py", tmp_path / "nb.py")
    subprocess.run([sys.executable, "-m", "jupytext", "--to", "ipynb", str(tmp_path / "nb.py"), "-o", str(nb)],
                   check=True, capture_output=True)
    proc = subprocess.run([sys.executable, "-m", "papermill", str(nb), str(tmp_path / "out.ipynb"),
                           "-p", "params_path", "params.yaml", "--cwd", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = tmp_path / "outputs" / "nbtest" / "figures"
    assert {p.name for p in figures.iterdir()} >= {
        "prompt_support_pool_means.pdf", "prompt_support_pool_means.png",
        "prompt_support_pool_heatmap.pdf", "prompt_support_pool_heatmap.png",
    }
