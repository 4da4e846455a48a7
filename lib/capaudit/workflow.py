"""Execute a run's notebooks with papermill, skipping those whose inputs are unchanged.

A notebook's stamp is a sha256 over: the notebook source, the params file and every file it
names directly (not files under the outputs folder: those are the run's own products, which the
chain of stamps covers), the library source (``lib/capaudit/**/*.py`` and the data registry), and the stamps of every notebook before it in
the run's list (so a changed upstream stage re-runs what follows). Stamps live in
``outputs/<run>/stamps/<notebook>.sha256``, with the hash of each part beside them
(``<notebook>.parts.json``) so that ``capaudit notebook status`` names what changed; timestamps
play no part.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, TextIO, Union

from .config import RunConfig, load_config  # noqa: F401  (load_config: public re-export)
from .data.registry import sha256_file
from .errors import InputError, NotebookError, one_line
from .io.params import load_params as _load_params

PACKAGE_DIR = Path(__file__).resolve().parent


def library_files() -> Dict[str, str]:
    """sha256 of each file of the library's code and packaged data (registry), by relative path."""
    return {str(p.relative_to(PACKAGE_DIR)): sha256_file(p) for p in sorted(PACKAGE_DIR.rglob("*"))
            if p.is_file() and p.suffix in (".py", ".json", ".yaml") and "__pycache__" not in p.parts}


def library_hash(files: Optional[Dict[str, str]] = None) -> str:
    """Hash of the library's code and packaged data (registry)."""
    h = hashlib.sha256()
    for rel, digest in (library_files() if files is None else files).items():
        h.update(rel.encode())
        h.update(digest.encode())
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


def input_files(value: Any, outputs: Optional[Path] = None) -> List[Path]:
    """Files a params tree names directly (strings that are paths of existing files), less those
    under ``outputs`` (a run's products appear there as its stages write them: counting them would
    make a stamp depend on whether a stage has run yet, not on an input).

    Registry inputs (``dataset`` + ``path``) are pinned by the registry's sha256, which is part
    of :func:`library_hash`; user files named in the params are hashed by content.
    """
    found: List[Path] = []
    if isinstance(value, dict):
        for v in value.values():
            found += input_files(v, outputs)
    elif isinstance(value, list):
        for v in value:
            found += input_files(v, outputs)
    elif isinstance(value, str) and len(value) < 4096 and ("/" in value or "." in value):
        p = Path(value[5:] if value.startswith("file:") else value)
        try:
            if p.is_file() and not (outputs is not None and p.resolve().is_relative_to(outputs.resolve())):
                found.append(p)
        except OSError:
            pass
    return found


def stamp_parts(cfg: RunConfig, notebooks_dir: Path = Path("notebooks")) -> Dict[str, Dict[str, Any]]:
    """Per notebook of the run, what its stamp hashes now: ``notebook`` (its source), ``params``
    (the params file and the files it names, by path), ``library`` (file by file) and ``upstream``
    (the previous notebook's stamp)."""
    lib = library_files()
    params = {str(cfg.path): sha256_file(cfg.path)}
    for f in sorted(set(input_files(cfg.raw, cfg.out_root))):
        params[str(f)] = sha256_file(f)
    out: Dict[str, Dict[str, Any]] = {}
    chain = ""
    for name in cfg.notebooks:
        out[name] = {"notebook": sha256_file(notebook_path(name, notebooks_dir)), "params": params, "library": lib,
                     "upstream": chain}
        chain = stamp_of(name, out[name])
    return out


def stamp_of(name: str, parts: Dict[str, Any]) -> str:
    """The stamp of one notebook from its :func:`stamp_parts` entry."""
    h = hashlib.sha256()
    for part in (name, parts["notebook"], "".join(parts["params"].values()), library_hash(parts["library"]),
                 parts["upstream"]):
        h.update(part.encode())
    return h.hexdigest()


def stamps(cfg: RunConfig, notebooks_dir: Path = Path("notebooks")) -> Dict[str, str]:
    """The content hash each notebook of the run would be stamped with now."""
    return {name: stamp_of(name, parts) for name, parts in stamp_parts(cfg, notebooks_dir).items()}


def what_changed(old: Optional[Dict[str, Any]], new: Dict[str, Any], upstream: Optional[str] = None) -> str:
    """In words, which parts of a notebook's stamp differ from those it was last stamped with."""
    if not old:
        return "never stamped with its parts recorded"
    said = []
    if old.get("notebook") != new["notebook"]:
        said.append("its notebook source")
    for kind in ("params", "library"):
        a, b = old.get(kind) or {}, new[kind]
        files = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
        if files:
            said.append(f"{kind} {', '.join(files[:4])}" + (f" (+{len(files) - 4} more)" if len(files) > 4 else ""))
    if old.get("upstream") != new["upstream"]:
        said.append(f"the notebook before it ({upstream})" if upstream else "the notebook before it")
    return "changed: " + "; ".join(said) if said else "changed (no part differs: stamped by another version)"


def notebook_log(cfg: RunConfig, name: str) -> Path:
    """Where a notebook's papermill, Jupyter and kernel output goes: ``outputs/<run>/logs/<name>.log``."""
    return cfg.out_dir / "logs" / f"{name}.log"


def status_line(name: str, seconds: float, status: str, width: int = 0) -> str:
    """The one line a notebook gets: ``[capaudit] <name>  <seconds>s  <status>``."""
    return f"[capaudit] {name:<{width}}  {seconds:6.1f}s  {status}"


@contextmanager
def _output_to(log: Path) -> Iterator[TextIO]:
    """Send everything but the progress line to ``log`` for a while: file descriptors 1 and 2 (this
    process and the kernel it starts), logging records (INFO and up) and Python warnings. Yields a
    stream on the terminal's stderr for the progress line."""
    root = logging.getLogger()
    root_level = root.level
    with open(log, "ab") as raw, open(log, "a", encoding="utf-8", errors="replace") as text:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        terminal = os.fdopen(os.dup(saved[2]), "w", encoding="utf-8", errors="replace")
        handler = logging.StreamHandler(text)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        for fd in saved:
            os.dup2(raw.fileno(), fd)
        root.addHandler(handler)
        root.setLevel(min(root_level or logging.WARNING, logging.INFO))
        logging.captureWarnings(True)
        try:
            yield terminal
        finally:
            logging.captureWarnings(False)
            root.removeHandler(handler)
            root.setLevel(root_level)
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            terminal.close()


def _progress_bar(name: str, width: int, tty: bool) -> Union[bool, Dict[str, Any]]:
    """papermill's ``progress_bar``: none off a terminal, else one updating line ``[k/N cells]`` that
    is cleared when the notebook ends (tqdm keywords; ``file`` is added once the terminal is known)."""
    if not tty:
        return False
    return {"bar_format": f"[capaudit] {name:<{width}}  {{elapsed}}  [{{n_fmt}}/{{total_fmt}} cells]",
            "leave": False, "mininterval": 0.5}


def _failure_line(name: str, exc: BaseException, seconds: float, failed: Path, log: Path) -> str:
    """One line naming the notebook, the failing cell and its error, and where the details are."""
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
    where = f"log: {log}" + (f"; failed notebook: {failed}" if failed.exists() else "")
    return f"notebook '{name}' failed in {cell} after {seconds:.1f}s: {what} ({where}; or rerun with --debug)"


def run_notebook(cfg: RunConfig, name: str, stamp: str, force: bool = False,
                 notebooks_dir: Path = Path("notebooks"), debug: bool = False, width: int = 0,
                 parts: Optional[Dict[str, Any]] = None) -> bool:
    """Execute one notebook into ``outputs/<run>/notebooks/``; returns False when up to date.

    Prints one line, ``[capaudit] <name>  <seconds>s  ran`` or ``... skipped (unchanged)`` (while
    it runs, on a terminal, one updating ``[k/N cells]`` line on stderr). Papermill's and Jupyter's
    output, the kernel's stderr, logging and warnings go to ``outputs/<run>/logs/<name>.log``.
    The notebook runs into a temporary file that replaces ``<name>.ipynb`` only on success; a
    failure keeps the previous executed notebook, writes the failed one to ``<name>.failed.ipynb``
    and raises :class:`NotebookError` with one line naming the notebook, the failing cell, its
    error and the log (under ``debug`` the log is copied to stderr first).
    """
    import jupytext
    import papermill

    t0 = time.perf_counter()
    stamp_file = cfg.out_dir / "stamps" / f"{name}.sha256"
    nb_dir = cfg.dirs()["notebooks"]
    executed = nb_dir / f"{name}.ipynb"
    if not force and stamp_file.exists() and executed.exists() and stamp_file.read_text().strip() == stamp:
        print(status_line(name, time.perf_counter() - t0, "skipped (unchanged)", width), flush=True)
        return False
    stamp_file.parent.mkdir(parents=True, exist_ok=True)
    stamp_file.unlink(missing_ok=True)  # a failed run leaves no stamp
    parts_file = stamp_file.with_name(f"{name}.parts.json")
    parts_file.unlink(missing_ok=True)
    source = nb_dir / f".{name}.source.ipynb"
    running = nb_dir / f".{name}.running.ipynb"
    failed = nb_dir / f"{name}.failed.ipynb"
    log = notebook_log(cfg, name)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"capaudit notebook {name} with {cfg.path}\n", encoding="utf-8")
    nb = jupytext.read(notebook_path(name, notebooks_dir))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, source)
    progress = _progress_bar(name, width, sys.stderr.isatty())
    try:
        with _output_to(log) as terminal:
            if isinstance(progress, dict):
                progress = {**progress, "file": terminal}
            papermill.execute_notebook(str(source), str(running), parameters={"params_path": str(cfg.path)},
                                       kernel_name="python3", progress_bar=progress, cwd=os.getcwd())
    except BaseException as exc:
        if running.exists():
            os.replace(running, failed)
        if debug:
            sys.stderr.write(log.read_text(encoding="utf-8", errors="replace"))
        if not isinstance(exc, Exception):
            raise
        raise NotebookError(_failure_line(name, exc, time.perf_counter() - t0, failed, log)) from exc
    finally:
        source.unlink(missing_ok=True)
    os.replace(running, executed)
    failed.unlink(missing_ok=True)
    if parts is not None:
        import json

        parts_file.write_text(json.dumps(parts, sort_keys=True) + "\n")
    stamp_file.write_text(stamp + "\n")
    print(status_line(name, time.perf_counter() - t0, "ran", width), flush=True)
    return True


def run_all(params: str, only: Optional[List[str]] = None, force: bool = False, debug: bool = False) -> int:
    """Execute the run's notebooks (``only``: those names, each must be in the run or in notebooks/)."""
    cfg = load_params(params)
    from capaudit.preflight import check

    check(cfg)  # a Hub dataset or model endpoint the params file names but cannot reach: one line, now
    parts = stamp_parts(cfg)
    todo = {name: stamp_of(name, p) for name, p in parts.items()}
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
    names = [n for n in cfg.notebooks if not only or n in only]
    width = max(map(len, names), default=0)
    for name in names:
        run_notebook(cfg, name, todo[name], force=force, debug=debug, width=width, parts=parts[name])
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
        import json

        cfg = load_params(args.params)
        previous = None
        for name, parts in stamp_parts(cfg).items():
            f = cfg.out_dir / "stamps" / f"{name}.sha256"
            if f.exists() and f.read_text().strip() == stamp_of(name, parts):
                state = "up to date"
            elif not f.exists():
                state = "stale: never run"
            else:
                pf = f.with_name(f"{name}.parts.json")
                try:
                    old = json.loads(pf.read_text(encoding="utf-8")) if pf.is_file() else None
                except ValueError:
                    old = None
                state = f"stale: {what_changed(old, parts, previous)}"
            print(f"{name}\t{state}")
            previous = name
        return 0
    if args.action == "run" and not args.names:
        raise InputError(f"name at least one notebook (known: {', '.join(known_notebooks()) or 'none'})")
    if args.action == "run-all" and args.names:
        raise InputError("run-all takes no notebook names (use `capaudit notebook run NAME`)")
    return run_all(args.params, only=args.names if args.action == "run" else None, force=args.force,
                   debug=bool(getattr(args, "debug", False)))
