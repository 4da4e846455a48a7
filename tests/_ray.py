"""A local Ray cluster for engine tests (num_cpus=2, no dashboard), as tests/test_engine_ray.py starts it.

    from _ray import local_ray  # noqa: F401  (a module-scoped fixture)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def local_ray():
    """Start (or reuse) a local 2-CPU Ray cluster for the module; stop it afterwards if started here."""
    pytest.importorskip("ray")
    from capaudit.engine.executors import ensure_ray, shutdown_ray

    here = str(Path(__file__).resolve().parent)  # Ray workers import test-module functions by name
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, old) if p)
    os.environ.pop("RAY_ADDRESS", None)
    started = ensure_ray(num_cpus=2)
    yield
    if started:
        shutdown_ray()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old
