"""Shared fixtures: where the shared data and reference results live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CAPAUDIT_SHARED_DIR", REPO.parent / "shared"))

os.environ.setdefault("CAPAUDIT_DATA_DIR", str(SHARED / "data"))


@pytest.fixture(scope="session")
def repo_dir() -> Path:
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return SHARED


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return Path(os.environ["CAPAUDIT_DATA_DIR"])


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return SHARED / "reference"


@pytest.fixture(scope="session")
def dsg_release(data_dir: Path) -> Path:
    """The DSG release folder (answers, questions, Likert ratings); skips when it is not there."""
    d = data_dir / "dsg"
    if not (d / "vqa_answers_release" / "pali17b_dsg.csv").is_file():
        pytest.skip(f"DSG release not in {d}")
    return d


@pytest.fixture(scope="session")
def pali_dsg_store(dsg_release: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PaLI-17B's answers to the DSG questions, imported once (``judges import``); read-only."""
    from capaudit.judges.releases import import_release

    out = tmp_path_factory.mktemp("dsg_import") / "pali"
    import_release("dsg", dsg_release / "vqa_answers_release" / "pali17b_dsg.csv", "pali-17b", out,
                   questions=dsg_release / "data" / "dsg-1k-anns.csv")
    return out
