"""Notebooks are thin parameterised drivers: at most 60 lines, no loops, no plotting code.

The logic lives in ``lib/capaudit`` and figures are drawn by ``capaudit.paper``; a notebook loads
its params, calls the library and shows what it returns. Papermill's percent-format ``.py``
notebooks are plain Python, so they are checked with :mod:`ast`.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.py"))
MAX_LINES = 60

LOOPS = {ast.For: "for loop", ast.AsyncFor: "for loop", ast.While: "while loop", ast.ListComp: "list comprehension",
         ast.SetComp: "set comprehension", ast.DictComp: "dict comprehension", ast.GeneratorExp: "generator expression"}
PLOTTING_MODULES = ("matplotlib", "pylab", "seaborn", "plotly")


def shape_problems(source: str) -> List[str]:
    """What makes ``source`` more than a thin driver, one entry per offending line."""
    problems: List[str] = []
    lines = source.splitlines()
    if len(lines) > MAX_LINES:
        problems.append(f"{len(lines)} lines (at most {MAX_LINES})")
    for node in ast.walk(ast.parse(source)):
        kind = next((label for cls, label in LOOPS.items() if isinstance(node, cls)), None)
        if kind:
            problems.append(f"line {node.lineno}: {kind}")
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        if any(n.split(".")[0] in PLOTTING_MODULES for n in names):
            problems.append(f"line {node.lineno}: imports {', '.join(names)} (plotting belongs in capaudit.paper)")
        if isinstance(node, ast.Name) and node.id == "plt":
            problems.append(f"line {node.lineno}: uses plt (plotting belongs in capaudit.paper)")
        if isinstance(node, ast.Attribute) and node.attr in ("plot", "savefig", "subplots", "imshow"):
            problems.append(f"line {node.lineno}: calls .{node.attr} (plotting belongs in capaudit.paper)")
    return problems


def test_there_are_notebooks() -> None:
    assert len(NOTEBOOKS) >= 10, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_a_thin_driver(path: Path) -> None:
    assert shape_problems(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("snippet,expected", [
    ("for x in y:\n    pass\n", "line 1: for loop"),
    ("while True:\n    break\n", "line 1: while loop"),
    ("a = 1\nb = [x for x in a]\n", "line 2: list comprehension"),
    ("c = next(x for x in a)\n", "line 1: generator expression"),
    ("d = {k: v for k, v in a}\n", "line 1: dict comprehension"),
    ("import matplotlib.pyplot as plt\n", "line 1: imports matplotlib.pyplot (plotting belongs in capaudit.paper)"),
    ("from matplotlib import pyplot\n", "line 1: imports matplotlib (plotting belongs in capaudit.paper)"),
    ("fig = plt.figure()\n", "line 1: uses plt (plotting belongs in capaudit.paper)"),
    ("ax.plot(x, y)\n", "line 1: calls .plot (plotting belongs in capaudit.paper)"),
    ("x = 1\n" * (MAX_LINES + 1), f"{MAX_LINES + 1} lines (at most {MAX_LINES})"),
])
def test_shape_check_names_each_problem(snippet: str, expected: str) -> None:
    assert expected in shape_problems(snippet)


def test_a_thin_driver_passes() -> None:
    source = ('params_path = "params/demo.yaml"\nfrom capaudit.config import load_config\n'
              'cfg = load_config(params_path)\nout = {**cfg.raw}\nout["table"]\n')
    assert shape_problems(source) == []
