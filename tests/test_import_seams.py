"""Package seams (issue 23): no module imports another package's private names, and the
``alttext`` and ``judges`` packages have no import cycles among their modules.

Whole-package seams (issue 32), over every module of lib/capaudit:

* only ``paper/`` renders: no module outside ``capaudit.paper`` imports it or names it in a string
  (architecture: "stages never import paper/"), except the front door in :data:`PAPER_FRONT_DOORS`;
* no import cycle among modules (package ``__init__`` modules included: an edge for every
  ``import``/``from`` statement, function-level and ``TYPE_CHECKING`` ones too, relative imports
  resolved); a cycle is reported as the modules around it.

Imports are read with :mod:`ast` (module level and inside functions, so an import deferred to dodge
a cycle still counts). A *package* is a first-level subpackage of ``capaudit`` (``capaudit.llm``,
``capaudit.judges``, ...); top-level modules (``capaudit.errors``) are packages of their own.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"
ROOT = LIB / "capaudit"
CYCLE_FREE = ("alttext", "judges")

#: Modules outside ``capaudit/paper/`` that may name ``capaudit.paper``, and why. Keep it minimal.
PAPER_FRONT_DOORS = {
    # the ``capaudit`` command: STAGE_CLIS / COMMAND_MODULES name "capaudit.paper.cli" (a string,
    # imported on demand) so that ``capaudit paper ...`` and ``capaudit report`` exist; it renders
    # nothing itself. (workflow.py and the notebooks-facing modules name no part of paper/.)
    "capaudit.cli",
}

#: The packages of the pipeline's stages (and the renderer) the model-call layer must not know.
STAGE_PACKAGES = ("alttext", "cc12m", "claims", "detail", "embed", "human", "judges", "paper", "prompts", "recap",
                  "surfaces", "text")

#: The modules that may import ``capaudit.standins``: the package itself and the server.
STANDIN_DOORS = ("capaudit.standins", "capaudit.llm.server")

#: Import cycles known and accepted (frozenset of module names -> why). None: fix a new one instead.
KNOWN_CYCLES: Dict[frozenset, str] = {}

#: A string literal that is exactly a dotted module name of the package ("capaudit.paper.cli"): a
#: module loaded by name (importlib, a plug-in list), which counts as a reference to it.
MODULE_STRING = re.compile(r"capaudit(\.[A-Za-z_][A-Za-z0-9_]*)+")


def module_name(path: Path, lib: Path = LIB) -> str:
    """Dotted name of a source file under ``lib`` (``capaudit/llm/__init__.py`` -> ``capaudit.llm``)."""
    parts = list(path.relative_to(lib).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def resolve(module: str, package_file: bool, level: int, target: Optional[str]) -> str:
    """Absolute name of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not package_file:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports(path: Path, lib: Path = LIB) -> Iterator[Tuple[int, str, Optional[str]]]:
    """``(line, module, name)`` for every import in ``path``: ``import a.b`` gives ``("a.b", None)``,
    ``from a import b`` gives ``("a", "b")`` (``b`` may be a name or a submodule)."""
    module = module_name(path, lib)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = resolve(module, is_package(path), node.level, node.module)
            for alias in node.names:
                yield node.lineno, base, alias.name


def package_of(module: str) -> Optional[str]:
    """The first-level subpackage (or top-level module) of ``capaudit`` a module belongs to."""
    parts = module.split(".")
    if parts[0] != "capaudit" or len(parts) < 2:
        return None
    return parts[1]


def private_part(module: str, name: Optional[str]) -> Optional[str]:
    """The first private (``_x``, not dunder) component of ``module`` + ``name`` below ``capaudit``."""
    for part in module.split(".")[1:] + ([name] if name else []):
        if part.startswith("_") and not (part.startswith("__") and part.endswith("__")):
            return part
    return None


def private_cross_package_imports(root: Path = ROOT) -> List[str]:
    """``file:line: import`` for every import of a private name or module of another package."""
    lib = root.parent
    out = []
    for path in sorted(root.rglob("*.py")):
        here = package_of(module_name(path, lib))
        for line, mod, name in sorted(imports(path, lib), key=lambda t: t[0]):
            there = package_of(f"{mod}.{name}" if mod == "capaudit" and name else mod)
            if there is None or there == here:
                continue
            bad = private_part(mod, name)
            if bad is not None:
                shown = f"from {mod} import {name}" if name else f"import {mod}"
                out.append(f"{path.relative_to(lib)}:{line}: {shown}")
    return out


def package_graph(package: str, root: Path = ROOT) -> Dict[str, Set[str]]:
    """Module -> the modules of the same package it imports (at module level or in a function).

    The package's ``__init__`` is left out: it imports its modules to re-export them, and a module
    importing the package itself is not an edge between modules."""
    lib = root.parent
    pkg_dir = root / package
    prefix = f"capaudit.{package}"
    modules = {module_name(p, lib) for p in pkg_dir.glob("*.py") if not is_package(p)}
    graph: Dict[str, Set[str]] = {m: set() for m in modules}
    for path in pkg_dir.glob("*.py"):
        me = module_name(path, lib)
        if me not in modules:
            continue
        for _, mod, name in imports(path, lib):
            if name is not None and f"{mod}.{name}" in modules:  # from . import sibling
                target = f"{mod}.{name}"
            elif mod in modules:
                target = mod
            elif mod.startswith(prefix + ".") and mod.rsplit(".", 1)[0] in modules:
                target = mod.rsplit(".", 1)[0]
            else:
                continue
            if target != me:
                graph[me].add(target)
    return graph


def cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import cycle of ``graph`` (its modules in order, the first repeated last), or None."""
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        return list(exc.args[1])
    return None


# --- the checker itself ------------------------------------------------------------------------------------


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def test_checker_finds_each_form_of_private_import(tmp_path):
    root = tmp_path / "capaudit"
    _write(root, "__init__.py", "")
    _write(root, "a/__init__.py", "")
    _write(root, "a/_mod.py", "_x = 1\n")
    _write(root, "a/pub.py", "from ._mod import _x\nfrom capaudit.a._mod import _x\n")  # same package: fine
    _write(root, "b/__init__.py", "")
    _write(root, "b/user.py", "\n".join([
        "from capaudit.a.pub import _x",           # private name
        "from capaudit.a import _mod",             # private module
        "import capaudit.a._mod",                  # private module, plain import
        "from ..a._mod import thing",              # private module, relative
        "def f():\n    from capaudit.a.pub import _y",  # deferred import
        "from capaudit.a.pub import ok, __all__",  # public and dunder: fine
        "from capaudit import _top",               # a private top-level module
    ]) + "\n")
    found = private_cross_package_imports(root)
    assert [f.split(": ", 1)[1] for f in found] == [
        "from capaudit.a.pub import _x", "from capaudit.a import _mod", "import capaudit.a._mod",
        "from capaudit.a._mod import thing", "from capaudit.a.pub import _y", "from capaudit import _top"]  # by line
    assert all(f.startswith("capaudit/b/user.py:") for f in found)


def test_checker_finds_module_level_and_deferred_cycles(tmp_path):
    root = tmp_path / "capaudit"
    _write(root, "__init__.py", "")
    _write(root, "p/__init__.py", "from .a import A\n")
    _write(root, "p/a.py", "from .b import B\nA = 1\n")
    _write(root, "p/b.py", "def f():\n    from . import c\nB = 1\n")
    _write(root, "p/c.py", "import capaudit.p.base\n")
    _write(root, "p/base.py", "from capaudit.p import A\n")  # importing the package is no edge
    graph = package_graph("p", root)
    assert graph == {"capaudit.p.a": {"capaudit.p.b"}, "capaudit.p.b": {"capaudit.p.c"},
                     "capaudit.p.c": {"capaudit.p.base"}, "capaudit.p.base": set()}
    assert cycle(graph) is None
    _write(root, "p/base.py", "def g():\n    from .a import A\n")
    found = cycle(package_graph("p", root))
    assert found is not None and found[0] == found[-1] and set(found) == {
        "capaudit.p.a", "capaudit.p.b", "capaudit.p.c", "capaudit.p.base"}


# --- the code base -----------------------------------------------------------------------------------------


def test_no_private_names_imported_across_packages():
    found = private_cross_package_imports()
    assert not found, "private names imported from another package:\n" + "\n".join(found)


@pytest.mark.parametrize("package", CYCLE_FREE)
def test_package_has_no_import_cycle(package):
    graph = package_graph(package)
    assert len(graph) > 3  # the package's modules were found
    found = cycle(graph)
    assert found is None, f"import cycle in capaudit.{package}: " + " -> ".join(found or [])


# --- whole-package seams (issue 32) -------------------------------------------------------------------------


def all_modules(root: Path = ROOT) -> Dict[str, Path]:
    """Dotted module name -> source file, for every module under ``root`` (packages included)."""
    return {module_name(p, root.parent): p for p in sorted(root.rglob("*.py"))}


def _longest_module(dotted: str, known: Dict[str, Path]) -> Optional[str]:
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def module_references(root: Path = ROOT) -> Dict[str, Dict[str, Dict[str, int]]]:
    """module -> {"imports": {module: line}, "strings": {module: line}}: the package modules each
    module imports (``from pkg import sub`` is the submodule, ``from mod import name`` the module)
    and those it names in a string literal that is exactly a module name."""
    lib = root.parent
    known = all_modules(root)
    out: Dict[str, Dict[str, Dict[str, int]]] = {}
    for me, path in known.items():
        refs: Dict[str, Dict[str, int]] = {"imports": {}, "strings": {}}
        for line, mod, name in imports(path, lib):
            if mod != "capaudit" and not mod.startswith("capaudit."):
                continue
            full = f"{mod}.{name}" if name and f"{mod}.{name}" in known else mod
            target = _longest_module(full, known)
            if target and target != me:
                refs["imports"].setdefault(target, line)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MODULE_STRING.fullmatch(node.value):
                target = _longest_module(node.value, known)
                if target and target != me:
                    refs["strings"].setdefault(target, node.lineno)
        out[me] = refs
    return out


@lru_cache(maxsize=1)
def _references() -> Dict[str, Dict[str, Dict[str, int]]]:
    return module_references()


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def references_to(module: str, package: str, strings: bool = True) -> List[str]:
    """``file:line -> target`` where ``module`` imports (or names, with ``strings``) a module of ``package``."""
    path = all_modules()[module].relative_to(LIB)
    refs = _references()[module]
    out = [f"{path}:{line} imports {t}" for t, line in sorted(refs["imports"].items()) if within(t, package)]
    if strings:
        out += [f"{path}:{line} names {t!r}" for t, line in sorted(refs["strings"].items()) if within(t, package)]
    return out


def import_graph() -> Dict[str, Set[str]]:
    return {m: set(r["imports"]) for m, r in _references().items()}


def all_cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """One cycle (first module repeated last) through each strongly connected component of more
    than one module (Tarjan's algorithm, then a shortest way round from its first module)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    comps: List[List[str]] = []

    def visit(v: str) -> None:  # depth bounded by the module count (a few hundred)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for comp in comps:
        members, start = set(comp), comp[0]
        prev: Dict[str, str] = {}
        queue, way = [start], None
        while queue and way is None:
            v = queue.pop(0)
            for w in sorted(graph.get(v, ())):
                if w == start:
                    way = [v]
                    while way[-1] != start:
                        way.append(prev[way[-1]])
                    break
                if w in members and w not in prev:
                    prev[w] = v
                    queue.append(w)
        found.append([start] + (way or comp)[::-1][1:] + [start])
    return found


def test_whole_package_checker_sees_imports_strings_and_cycles(tmp_path):
    root = tmp_path / "capaudit"
    _write(root, "__init__.py", "")
    _write(root, "paper/__init__.py", "")
    _write(root, "paper/render.py", "")
    _write(root, "stage/__init__.py", "")
    _write(root, "stage/a.py", "def f():\n    from ..paper import render\n")
    _write(root, "stage/b.py", "MODS = ['capaudit.paper.render.missing', 'see capaudit.paper']\nfrom .c import x\n")
    _write(root, "stage/c.py", "from capaudit.stage.b import MODS\n")
    refs = module_references(root)
    assert refs["capaudit.stage.a"]["imports"] == {"capaudit.paper.render": 2}
    assert refs["capaudit.stage.b"]["strings"] == {"capaudit.paper.render": 1}  # prose is no reference
    graph = {m: set(r["imports"]) for m, r in refs.items()}
    assert all_cycles(graph) == [["capaudit.stage.b", "capaudit.stage.c", "capaudit.stage.b"]]
    assert all_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_the_walk_sees_the_package():
    refs = _references()
    assert len(refs) > 100 and "capaudit.paper.render" in refs
    assert "capaudit.paper.run" in refs["capaudit.paper.cli"]["imports"]  # a function-level relative import
    assert "capaudit.paper.cli" in refs["capaudit.cli"]["strings"]  # a module loaded by name


def test_only_paper_imports_the_renderer():
    bad = []
    for module in sorted(_references()):
        if within(module, "capaudit.paper") or module in PAPER_FRONT_DOORS:
            continue
        bad += references_to(module, "capaudit.paper")
    assert not bad, ("stages compute and write summaries; only capaudit/paper/ renders. These modules "
                     "reach the renderer:\n" + "\n".join(bad))


def test_no_import_cycle_among_modules():
    found = [c for c in all_cycles(import_graph()) if frozenset(c) not in KNOWN_CYCLES]
    assert not found, "import cycles among modules:\n" + "\n".join(" -> ".join(c) for c in found)


def test_known_cycles_are_still_cycles():
    """An accepted cycle that has been fixed comes off the list."""
    live = {frozenset(c) for c in all_cycles(import_graph())}
    assert not [sorted(k) for k in KNOWN_CYCLES if k not in live]


def test_only_the_server_loads_the_stand_ins():
    bad = []
    for module in sorted(_references()):
        if any(within(module, door) for door in STANDIN_DOORS):
            continue
        bad += references_to(module, "capaudit.standins")
    assert not bad, ("a stand-in model is reached outside capaudit/standins/ and the server (ask the server, "
                     "or read the model card the client recorded: capaudit.llm.store.answered_by):\n" + "\n".join(bad))


def test_the_model_call_layer_knows_no_stage():
    bad = []
    for module in sorted(_references()):
        if not within(module, "capaudit.llm"):
            continue
        for stage in STAGE_PACKAGES:
            bad += references_to(module, f"capaudit.{stage}")
    assert not bad, "capaudit/llm/ reaches a stage package:\n" + "\n".join(bad)


def test_the_stand_ins_register_in_the_server_registry_only_when_loaded():
    """llm.backends names no stand-in module (no plug-in list): its source has no ``capaudit.<stage>`` string."""
    source = (ROOT / "llm" / "backends.py").read_text(encoding="utf-8")
    assert not [s for s in STAGE_PACKAGES if f"capaudit.{s}." in source or f'"capaudit.{s}"' in source]
    assert "PLUGIN_MODULES" not in source
