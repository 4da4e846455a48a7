"""`capaudit notebook run|run-all` prints one line per notebook; papermill/Jupyter output goes to a log.

Each notebook gets ``[capaudit] <name>  <seconds>s  ran`` or ``... skipped (unchanged)`` on stdout,
nothing on stderr; papermill's logging, its warnings and the kernel's stderr land in
``outputs/<run>/logs/<name>.log``. A failing notebook is one stderr line naming it, the cell, the
error and the log.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^\[capaudit\] (\S+) +(\d+\.\d)s  (ran|skipped \(unchanged\))$")

PARAMS_CELL = '# %% tags=["parameters"]\nparams_path = "p.yaml"\n\n'
# writes to the kernel process's stderr file descriptor (not to the notebook's stream)
KERNEL_STDERR = 'import os\nos.write(2, b"kernel-fd2-marker\\n")\nprint("cell output stays in the notebook")\n'


def _setup(tmp_path: Path, notebooks: dict) -> None:
    nb = tmp_path / "notebooks"
    nb.mkdir()
    for name, source in notebooks.items():
        (nb / f"{name}.py").write_text(source, encoding="utf-8")
    (tmp_path / "p.yaml").write_text(f"run: t\nnotebooks: [{', '.join(notebooks)}]\nout_root: {tmp_path / 'out'}\n",
                                     encoding="utf-8")


def _capaudit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "capaudit.cli", "notebook", *args, "--params", "p.yaml"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)


def _statuses(stdout: str) -> List[tuple]:
    lines = stdout.splitlines()
    matches = [LINE.match(line) for line in lines]
    assert all(matches), lines
    return [(m.group(1), m.group(3)) for m in matches]


@pytest.mark.slow
def test_run_all_prints_one_line_per_notebook_and_logs_the_rest(tmp_path: Path) -> None:
    pytest.importorskip("papermill")
    # "quiet_b" has no parameters cell: papermill logs a warning about it (to the log, not the terminal)
    _setup(tmp_path, {"loud_a": PARAMS_CELL + "# %%\n" + KERNEL_STDERR, "quiet_b": "# %%\nx = 1\n"})
    first = _capaudit(tmp_path, "run-all")
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    assert _statuses(first.stdout) == [("loud_a", "ran"), ("quiet_b", "ran")]
    logs = tmp_path / "out" / "t" / "logs"
    assert "kernel-fd2-marker" in (logs / "loud_a.log").read_text(encoding="utf-8")
    quiet = (logs / "quiet_b.log").read_text(encoding="utf-8")
    assert "Executing notebook with kernel" in quiet and "parameters" in quiet  # papermill INFO + WARNING
    assert "kernel-fd2-marker" not in quiet

    again = _capaudit(tmp_path, "run-all")
    assert again.returncode == 0 and again.stderr == ""
    assert _statuses(again.stdout) == [("loud_a", "skipped (unchanged)"), ("quiet_b", "skipped (unchanged)")]

    single = _capaudit(tmp_path, "run", "quiet_b", "--force")  # `run` prints the same kind of line
    assert single.returncode == 0 and single.stderr == ""
    assert _statuses(single.stdout) == [("quiet_b", "ran")]


@pytest.mark.slow
def test_failing_notebook_is_one_line_with_cell_error_and_log(tmp_path: Path) -> None:
    pytest.importorskip("papermill")
    _setup(tmp_path, {"good": PARAMS_CELL + "# %%\nx = 1\n",
                      "bad": PARAMS_CELL + "# %%\n" + KERNEL_STDERR + "\n# %%\nraise ValueError('surface x is empty')",
                      "after": PARAMS_CELL + "# %%\ny = 2\n"})
    proc = _capaudit(tmp_path, "run-all")
    assert proc.returncode == 1
    assert _statuses(proc.stdout) == [("good", "ran")]  # "after" never starts
    err = proc.stderr.splitlines()
    log = tmp_path / "out" / "t" / "logs" / "bad.log"
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    # cell 3: papermill injects a parameters cell after the tagged one
    assert err[0].startswith("capaudit notebook run-all: error: notebook 'bad' failed in cell 3 (raise ValueError")
    assert "ValueError: surface x is empty" in err[0]
    assert f"log: {log}" in err[0]
    assert "bad.failed.ipynb" in err[0]
    assert "kernel-fd2-marker" in log.read_text(encoding="utf-8")


@pytest.mark.slow
def test_progress_line_only_on_a_terminal(tmp_path: Path) -> None:
    """With stderr on a terminal, one updating ``[k/N cells]`` line is drawn there and then cleared."""
    pytest.importorskip("papermill")
    import pty

    _setup(tmp_path, {"slowish": PARAMS_CELL + "# %%\nimport time\ntime.sleep(1.5)\n\n# %%\nx = 1\n"})
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO / "lib") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "capaudit.cli", "notebook", "run-all", "--params", "p.yaml"],
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=slave, text=True, timeout=300, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's other end is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    terminal = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0
    assert _statuses(proc.stdout) == [("slowish", "ran")]
    assert re.search(r"\[capaudit\] slowish +\d\d:\d\d +\[\d/4 cells\]", terminal), terminal
    assert "\n" not in terminal and terminal.rstrip("\r").split("\r")[-1].strip() == ""  # cleared at the end
    assert "Kernel" not in terminal and "papermill" not in terminal
