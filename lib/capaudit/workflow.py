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
from pathlib import Path
from typing import Any, Dict, List, Optional

from .config import RunConfig, load_config
from .data.registry import sha256_file

PACKAGE_DIR = Path(__file__).resolve().parent


def library_hash() -> str:
    """Hash of the library's code and packaged data (registry)."""
    h = hashlib.sha256()
    for p in sorted(PACKAGE_DIR.rglob("*")):
        if p.is_file() and p.suffix in (".py", ".json", ".yaml") and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(PACKAGE_DIR)).encode())
            h.update(sha256_file(p).encode())
    return h.hexdigest()


def notebook_path(name: str, notebooks_dir: Path = Path("notebooks")) -> Path:
    path = notebooks_dir / f"{name}.py"
    if not path.exists():
        raise FileNotFoundError(f"notebook '{name}' not found: expected {path}")
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


def run_notebook(cfg: RunConfig, name: str, stamp: str, force: bool = False,
                 notebooks_dir: Path = Path("notebooks")) -> bool:
    """Execute one notebook into ``outputs/<run>/notebooks/``; returns False when up to date."""
    import jupytext
    import papermill

    stamp_file = cfg.out_dir / "stamps" / f"{name}.sha256"
    executed = cfg.dirs()["notebooks"] / f"{name}.ipynb"
    if not force and stamp_file.exists() and executed.exists() and stamp_file.read_text().strip() == stamp:
        print(f"[capaudit] {name}: up to date", flush=True)
        return False
    stamp_file.parent.mkdir(parents=True, exist_ok=True)
    stamp_file.unlink(missing_ok=True)  # a failed run leaves no stamp
    source = executed.with_suffix(".source.ipynb")
    nb = jupytext.read(notebook_path(name, notebooks_dir))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, source)
    t0 = time.perf_counter()
    print(f"[capaudit] {name}: executing with {cfg.path}", flush=True)
    papermill.execute_notebook(str(source), str(executed), parameters={"params_path": str(cfg.path)},
                               kernel_name="python3", progress_bar=False, cwd=os.getcwd())
    source.unlink(missing_ok=True)
    stamp_file.write_text(stamp + "\n")
    print(f"[capaudit] {name}: done in {time.perf_counter() - t0:.1f}s", flush=True)
    return True


def run_all(params: str, only: Optional[List[str]] = None, force: bool = False) -> int:
    cfg = load_config(params)
    todo = stamps(cfg)
    for name in cfg.notebooks:
        if only and name not in only:
            continue
        run_notebook(cfg, name, todo[name], force=force)
    return 0


def register(sub) -> None:
    p = sub.add_parser("notebook", help="execute a run's notebooks (content-hash stamps)")
    p.add_argument("action", choices=["run", "run-all", "status"])
    p.add_argument("names", nargs="*", help="notebook names (for run)")
    p.add_argument("--params", default="params/demo.yaml")
    p.add_argument("--force", action="store_true")
    p.set_defaults(func=_main)


def _main(args) -> int:
    if args.action == "status":
        cfg = load_config(args.params)
        for name, stamp in stamps(cfg).items():
            f = cfg.out_dir / "stamps" / f"{name}.sha256"
            state = "up to date" if f.exists() and f.read_text().strip() == stamp else "stale"
            print(f"{name}\t{state}")
        return 0
    if args.action == "run" and not args.names:
        print("capaudit notebook run: name at least one notebook", file=sys.stderr)
        return 2
    return run_all(args.params, only=args.names if args.action == "run" else None, force=args.force)
