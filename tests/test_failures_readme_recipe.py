"""The README's claims recipe ("## Model calls") runs as written, end to end, with the offline extractor.

The bash block is taken verbatim from README.md and run with ``bash -e`` in a scratch folder that
holds ``captions.jsonl``; the only change is the port (8000 → a free port), so the test never
collides with a server already running on this machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytest.importorskip("spacy")


def _recipe() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Model calls (claims, judges, captioning)"):]
    section = section[: section.index("\n## ", 5)]
    m = re.search(r"```bash\n(.*?)```", section, re.S)
    assert m, "no bash block in the README's Model calls section"
    return m.group(1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_claims_recipe_runs_as_written(tmp_path):
    script = _recipe()
    assert "capaudit claims build" in script and "--model" in script.split("capaudit claims build", 1)[1]
    assert "claims summarize" in script and "--requests" in script.split("claims summarize", 1)[1]
    port = str(_free_port())
    (tmp_path / "run.sh").write_text(script.replace("8000", port), encoding="utf-8")
    caps = ["A red bus parked next to a tall building on a rainy street.",
            "Two dogs play on green grass in front of a wooden fence.",
            "A bowl of ripe oranges on a marble table.", ""]
    (tmp_path / "captions.jsonl").write_text("".join(json.dumps({"caption": c}) + "\n" for c in caps))
    env = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.Popen(["bash", "-e", "run.sh"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=180)
    finally:  # never leave the recipe's background server behind, whatever happened
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads((tmp_path / "claimed_cbu_summary.json").read_text())
    assert summary["status"] == {"responses": 3, "captions": 3, "bad": 0}
    assert summary["input"]["requests_total"] == 3 and summary["input"]["unanswered_requests"] == 0
    assert summary["surfaces"]["iiw"]["claimed_dedup_per_caption"] > 0
    rows = [json.loads(x) for x in (tmp_path / "responses.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["ok"] and r["model"] == "capaudit-heuristic-extractor" for r in rows)
    assert not (tmp_path / "responses.jsonl.lock").exists()  # the lock went with the run
    assert "1 rows skipped" not in p.stderr and "1 empty or null" in p.stderr  # the blank caption is counted
