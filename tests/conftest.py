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
