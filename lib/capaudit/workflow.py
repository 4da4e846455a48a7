"""Execute a run's notebooks with papermill, skipping those whose inputs are unchanged.

A notebook's stamp is a sha256 over: the notebook source, the params file and every file it
names directly, the library source (``lib/capaudit/**/*.py`` and the data registry), and the stamps of every notebook before it in
the run's list (so a changed upstream stage re-runs what follows). Stamps live in
``outputs/<run>/stamps/<notebook>.sha256``; timestamps play no part.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from .config import RunConfig, load_config  # noqa: F401  (load_config: public re-export)
from .data.registry import sha256_file
from .errors import InputError, NotebookError, one_line
from .io.params import load_params as _load_params

PACKAGE_DIR = Path(__file__).resolve().parent


def library_hash() -> str:
    """Hash of the library's code and packaged data (registry)."""
    h = hashlib.sha256()
    for p in sorted(PACKAGE_DIR.rglob("*")):
        if p.is_file() and p.suffix in (".py", ".json", ".yaml") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(PACKAGE_DIR)).encode())
            h.update(sha256_file(p).encode())
    return h.hexdigest()


def known_notebooks(notebooks_dir: Path = Path("notebooks")) -> List[str]:
    """Names of the notebooks in ``notebooks_dir`` (``<name>.py``), sorted."""
    return sorted(p.stem for p in Path(notebooks_dir).glob("*.py") if not p.name.startswith("_"))


def notebook_path(name: str, notebooks_dir: Path = Path("notebooks")) -> Path:
    path = notebooks_dir / f"{name}.py"
    if not path.exists():
        known = known_notebooks(notebooks_dir)
        raise InputError(f"notebook '{name}' not found (expected {path}); known notebooks: "
                         f"{', '.join(known) or 'none'}")
    return path


def input_files(value: Any) -> List[Path]:
    """Files a params tree names directly (strings that are paths of existing files).

    Registry inputs (``dataset`` + ``path``) are pinned by the registry's sha256, which is part
    of :func:`library_hash`; user files named in the params are hashed by content.
    """
    found: List[Path] = []
    if isinstance(value, dict):
        for v in value.values():
            found += input_files(v)
    elif isinstance(value, list):
        for v in value:
            found += input_files(v)
    elif isinstance(value, str) and len(value) < 4096 and ("/" in value or "." in value):
        p = Path(value[5:] if value.startswith("file:") else value)
        try:
            if p.is_file():
                found.append(p)
        except OSError:
            pass
    return found


def stamps(cfg: RunConfig, notebooks_dir: Path = Path("notebooks")) -> Dict[str, str]:
    """The content hash each notebook of the run would be stamped with now."""
    lib = library_hash()
    params = sha256_file(cfg.path)
    for f in sorted(set(input_files(cfg.raw))):
        params += sha256_file(f)
    out: Dict[str, str] = {}
    chain = ""
    for name in cfg.notebooks:
        h = hashlib.sha256()
        for part in (name, sha256_file(notebook_path(name, notebooks_dir)), params, lib, chain):
            h.update(part.encode())
        chain = h.hexdigest()
        out[name] = chain
    return out


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """Send file descriptor 2 (this process and the kernels it starts) to ``path`` for a while."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(path, "wb") as fh:
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _failure_line(name: str, exc: BaseException, failed: Path, log: Path) -> str:
    """One line naming the notebook, the failing cell and its error."""
    try:
        from papermill.exceptions import PapermillExecutionError
    except ImportError:  # pragma: no cover
        PapermillExecutionError = ()  # type: ignore[assignment]
    if isinstance(exc, PapermillExecutionError):
        evalue = one_line(exc.evalue)
        if len(evalue) > 300:
            evalue = evalue[:300] + "..."
        first = next((ln.strip() for ln in str(exc.source).splitlines() if ln.strip()), "")
        cell = f"cell {exc.cell_index}" + (f" ({first[:60]})" if first else "")
        what = f"{exc.ename}: {evalue}"
    else:
        cell = "before any cell ran"
        what = f"{type(exc).__name__}: {one_line(exc)}"
    return (f"notebook '{name}' failed in {cell}: {what} (full trace: {failed}; kernel log: {log}; "
            f"or rerun with --debug)")


def run_notebook(cfg: RunConfig, name: str, stamp: str, force: bool = False,
                 notebooks_dir: Path = Path("notebooks"), debug: bool = False) -> bool:
    """Execute one notebook into ``outputs/<run>/notebooks/``; returns False when up to date.

    The notebook runs into a temporary file that replaces ``<name>.ipynb`` only on success; a
    failure keeps the previous executed notebook, writes the failed one to
    ``<name>.failed.ipynb`` and raises :class:`NotebookError` with one line naming the notebook,
    the failing cell and its error. The kernels' stderr goes to ``<name>.log`` (shown on
    success, and under ``debug`` on failure).
    """
    import jupytext
    import papermill

    stamp_file = cfg.out_dir / "stamps" / f"{name}.sha256"
    nb_dir = cfg.dirs()["notebooks"]
    executed = nb_dir / f"{name}.ipynb"
    if not force and stamp_file.exists() and executed.exists() and stamp_file.read_text().strip() == stamp:
        print(f"[capaudit] {name}: up to date", flush=True)
        return False
    stamp_file.parent.mkdir(parents=True, exist_ok=True)
    stamp_file.unlink(missing_ok=True)  # a failed run leaves no stamp
    source = nb_dir / f".{name}.source.ipynb"
    running = nb_dir / f".{name}.running.ipynb"
    failed = nb_dir / f"{name}.failed.ipynb"
    log = nb_dir / f"{name}.log"
    nb = jupytext.read(notebook_path(name, notebooks_dir))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, source)
    t0 = time.perf_counter()
    print(f"[capaudit] {name}: executing with {cfg.path}", flush=True)
    try:
        with _stderr_to(log):
            papermill.execute_notebook(str(source), str(running), parameters={"params_path": str(cfg.path)},
                                       kernel_name="python3", progress_bar=False, cwd=os.getcwd())
    except BaseException as exc:
        if running.exists():
            os.replace(running, failed)
        if debug:
            sys.stderr.write(log.read_text(encoding="utf-8", errors="replace"))
        if not isinstance(exc, Exception):
            raise
        raise NotebookError(_failure_line(name, exc, failed, log)) from exc
    finally:
        source.unlink(missing_ok=True)
    os.replace(running, executed)
    failed.unlink(missing_ok=True)
    sys.stderr.write(log.read_text(encoding="utf-8", errors="replace"))
    stamp_file.write_text(stamp + "\n")
    print(f"[capaudit] {name}: done in {time.perf_counter() - t0:.1f}s", flush=True)
    return True


def run_all(params: str, only: Optional[List[str]] = None, force: bool = False, debug: bool = False) -> int:
    """Execute the run's notebooks (``only``: those names, each must be in the run or in notebooks/)."""
    cfg = load_params(params)
    todo = stamps(cfg)
    if only:
        unknown = [n for n in only if n not in cfg.notebooks]
        if unknown:
            known = known_notebooks()
            outside = [n for n in unknown if n not in known]
            if outside:
                raise InputError(f"unknown notebook{'s' if len(outside) > 1 else ''} {', '.join(outside)}; "
                                 f"this run ({cfg.path}) has: {', '.join(cfg.notebooks) or 'none'}; "
                                 f"notebooks/ has: {', '.join(known) or 'none'}")
            raise InputError(f"notebook{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} not in the "
                             f"'notebooks:' list of {cfg.path} (it has: {', '.join(cfg.notebooks) or 'none'}); "
                             f"add it there to run it with this params file")
    for name in cfg.notebooks:
        if only and name not in only:
            continue
        run_notebook(cfg, name, todo[name], force=force, debug=debug)
    return 0


def load_params(path: str) -> RunConfig:
    """:func:`load_config` with errors that name the file (missing, not UTF-8, bad notebook list)."""
    p = Path(path)
    cfg = _load_params(p)
    known = set(known_notebooks())
    missing = [n for n in cfg.notebooks if n not in known]
    if missing and Path("notebooks").is_dir():
        raise InputError(f"'notebooks:' names notebook{'s' if len(missing) > 1 else ''} that do not exist in "
                         f"notebooks/: {', '.join(missing)} (known: {', '.join(sorted(known)) or 'none'})", path=p)
    return cfg


def register(sub) -> None:
    p = sub.add_parser("notebook", help="execute a run's notebooks (content-hash stamps)")
    p.add_argument("action", choices=["run", "run-all", "status"])
    p.add_argument("names", nargs="*", help="notebook names (for run)")
    p.add_argument("--params", default="params/demo.yaml")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=_main)


def _main(args) -> int:
    if args.action == "status":
        cfg = load_params(args.params)
        for name, stamp in stamps(cfg).items():
            f = cfg.out_dir / "stamps" / f"{name}.sha256"
            state = "up to date" if f.exists() and f.read_text().strip() == stamp else "stale"
            print(f"{name}\t{state}")
        return 0
    if args.action == "run" and not args.names:
        raise InputError(f"name at least one notebook (known: {', '.join(known_notebooks()) or 'none'})")
    if args.action == "run-all" and args.names:
        raise InputError("run-all takes no notebook names (use `capaudit notebook run NAME`)")
    return run_all(args.params, only=args.names if args.action == "run" else None, force=args.force,
                   debug=bool(getattr(args, "debug", False)))
