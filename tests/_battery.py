"""The failure battery's machinery, shared by every ``test_failures_battery*.py`` file.

A :class:`Case` is one command line run through the real CLI in its own copy of a scratch
folder; :func:`assert_fails_cleanly` checks what every bad input must give: exit status != 0,
exactly one stderr line starting ``capaudit ``, the expected substrings in it (file, line, field
or option), no "Traceback", and no file created, changed or removed (size, mtime, sha256).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
CAPAUDIT = REPO / ".venv" / "bin" / "capaudit"
EXE = [str(CAPAUDIT)] if CAPAUDIT.exists() else [sys.executable, "-m", "capaudit.cli"]

Result = Tuple[subprocess.CompletedProcess, Dict[str, Tuple[int, int, str]], Dict[str, Tuple[int, int, str]]]


@dataclass
class Case:
    id: str
    args: List[str]
    expect: List[str] = field(default_factory=list)  # substrings of the one stderr line
    env: Dict[str, str] = field(default_factory=dict)


def jsonl(rows: Sequence[object]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def with_options(base: Sequence[str], repeatable: Sequence[str] = (), **opts: object) -> List[str]:
    """``base`` with options changed: ``name=value`` replaces the value of ``--name`` (or adds the
    option; always adds for a ``repeatable`` flag), ``name=None`` removes it, ``name=True`` adds the
    bare flag."""
    out = list(base)
    for k, v in opts.items():
        flag = "--" + k.replace("_", "-")
        if flag in out and flag not in repeatable:
            i = out.index(flag)
            if v is None:
                del out[i:i + 2]
            else:
                out[i + 1] = str(v)
        elif v is True:
            out.append(flag)
        elif v is not None:
            out += [flag, str(v)]
    return out


def snapshot(root: Path) -> Dict[str, Tuple[int, int, str]]:
    """Every file (size, mtime, sha256) and folder below ``root``."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = (p.stat().st_size, p.stat().st_mtime_ns,
                                             hashlib.sha256(p.read_bytes()).hexdigest())
        elif p.is_dir():
            out[str(p.relative_to(root)) + "/"] = (0, 0, "dir")
    return out


def run_cli(args: Sequence[str], cwd: Path, env_extra: Optional[Dict[str, str]] = None,
            timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "CAPAUDIT_HASH_CACHE": str(cwd.parent / "hash_cache.json"), "PYTHONWARNINGS": "ignore",
           **(env_extra or {})}
    env.pop("CAPAUDIT_DEBUG", None)
    return subprocess.run([*EXE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def run_case(case: Case, template: Path, root: Path,
             prepare: Optional[Callable[[Case, Path], Path]] = None) -> Result:
    """Run one case in its own copy of ``template``; ``prepare(case, work)`` may add files and
    returns the folder to run in. Returns (process, snapshot before, snapshot after) of the copy."""
    work = root / case.id / "work"
    shutil.copytree(template, work, copy_function=shutil.copy2, symlinks=True)
    cwd = prepare(case, work) if prepare else work
    before = snapshot(work)
    p = run_cli(list(case.args), cwd, case.env)
    return p, before, snapshot(work)


def run_cases(cases: Sequence[Case], root: Path, make_inputs: Callable[[Path], None],
              prepare: Optional[Callable[[Case, Path], Path]] = None) -> Dict[str, Result]:
    """All cases in parallel, each in its own copy of the inputs ``make_inputs`` writes."""
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    template = root / "template"
    template.mkdir()
    make_inputs(template)
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        futures = {c.id: ex.submit(run_case, c, template, root, prepare) for c in cases}
        return {k: f.result() for k, f in futures.items()}


def assert_fails_cleanly(case: Case, result: Result) -> None:
    p, before, after = result
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode != 0, f"exit 0 for {case.args}; stdout: {p.stdout[:500]}"
    assert "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1, f"expected one stderr line, got {len(lines)}:\n{p.stderr}"
    line = lines[0]
    assert line.startswith("capaudit "), line
    for s in case.expect:
        assert s in line, f"{s!r} not in: {line}"
    assert after == before, "the failing command created, changed or removed a file"
