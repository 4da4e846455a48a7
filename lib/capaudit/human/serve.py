"""Serve the annotation notebook or the study lead's dashboard with voila on 127.0.0.1
(``capaudit human serve [--dashboard]``).

The jupytext notebook (``notebooks/human_verification.py`` or ``notebooks/human_dashboard.py``) is
converted to an ``.ipynb`` in a serving folder beside the study database, with the study path
injected after the parameters cell (papermill style), and voila serves that folder's single notebook.
Voila's static-file allow-list matches nothing, so no other file is reachable.

Kernels do not pile up. Every page load starts a kernel; voila stops it when the page closes by a
``sendBeacon`` POST that carries the ``_xsrf`` cookie, but voila never sets that cookie (its page is
not rendered through Jupyter's templates), so the POST is refused with 403 and the kernel lives on.
The serving folder therefore holds ``voila_config/voila.py``, whose pre-launch hook issues the cookie with
the page (:func:`issue_xsrf_cookie`), and idle kernels whose page is gone are culled after
``cull_idle_s`` seconds (checked every ``cull_interval_s``; a kernel with an open page is kept).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, List, Optional, Union

from capaudit.errors import InputError
from capaudit.io.atomic import write_text_atomic

PathLike = Union[str, Path]
NOTEBOOKS = Path(__file__).resolve().parents[3] / "notebooks"
REPO_NOTEBOOK = NOTEBOOKS / "human_verification.py"
DASHBOARD_NOTEBOOK = NOTEBOOKS / "human_dashboard.py"
DEFAULT_PORT = 8866
#: seconds a kernel without an open page may stay idle, and how often that is checked
CULL_IDLE_S = 600
CULL_INTERVAL_S = 60

_VOILA_CONFIG = '''# Written by capaudit human serve: voila's page-close kernel shutdown needs the _xsrf cookie.
from capaudit.human.serve import issue_xsrf_cookie

c.VoilaConfiguration.prelaunch_hook = issue_xsrf_cookie
'''


def issue_xsrf_cookie(req: Any, notebook: Any = None, cwd: Any = None) -> None:
    """Voila pre-launch hook: reading ``xsrf_token`` makes tornado set the ``_xsrf`` cookie on the
    page's response, so the page-close shutdown request passes the XSRF check."""
    req.xsrf_token  # noqa: B018 - the property sets the cookie


def prepare_notebook(study_db: PathLike, serve_dir: Optional[PathLike] = None,
                     notebook: Optional[PathLike] = None) -> Path:
    """Write ``<notebook stem>.ipynb`` (with ``study = <absolute db path>`` injected) and
    ``voila_config/voila.py`` into the serving folder; returns the notebook's path."""
    import jupytext
    import nbformat

    src = Path(notebook) if notebook else REPO_NOTEBOOK
    if not src.is_file():
        raise InputError("notebook not found", path=src)
    db = Path(study_db).resolve()
    if not db.is_file():
        raise InputError("no study database here; create one with `capaudit human init`", path=db)
    nb = jupytext.read(src)
    idx = next((i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if idx is None:
        raise InputError("notebook has no cell tagged 'parameters'", path=src)
    cell = nbformat.v4.new_code_cell(f"# Injected by capaudit human serve\nstudy = {str(db)!r}\n")
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(idx + 1, cell)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    out_dir = Path(serve_dir) if serve_dir else db.parent / f"{db.stem}_{src.stem}_serve"
    out = out_dir / f"{src.stem}.ipynb"
    write_text_atomic(out, nbformat.writes(nb))
    # in a folder of its own: a voila.py in the working folder of `python -m voila` would shadow voila
    write_text_atomic(out_dir / "voila_config" / "voila.py", _VOILA_CONFIG)
    return out


def voila_command(ipynb: PathLike, host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                  cull_idle_s: int = CULL_IDLE_S, cull_interval_s: int = CULL_INTERVAL_S) -> List[str]:
    """The voila command line serving ``ipynb`` on ``host:port`` (no browser, no tracebacks, the
    serving folder's ``voila_config/voila.py``, idle kernels culled)."""
    folder = Path(ipynb).resolve().parent / "voila_config"
    return [
        sys.executable, "-m", "voila", str(Path(ipynb).resolve()), "--no-browser", f"--port={int(port)}",
        f"--Voila.ip={host}", "--Voila.port_retries=0", "--theme=light", "--show_tracebacks=False",
        "--VoilaConfiguration.file_allowlist=(?!)", f"--Voila.config_file_paths={folder}",
        f"--MappingKernelManager.cull_idle_timeout={int(cull_idle_s)}",
        f"--MappingKernelManager.cull_interval={int(cull_interval_s)}",
        "--MappingKernelManager.cull_connected=False",
    ]


def serve(study_db: PathLike, host: str = "127.0.0.1", port: int = DEFAULT_PORT, dry_run: bool = False,
          dashboard: bool = False) -> int:
    """Prepare the notebook, print the URL and run voila in the foreground (Ctrl-C stops it).

    ``dry_run``: print the command (quoted for a POSIX shell) instead of running it."""
    ipynb = prepare_notebook(study_db, notebook=DASHBOARD_NOTEBOOK if dashboard else None)
    cmd = voila_command(ipynb, host, port)
    what = "study dashboard (read-only)" if dashboard else "annotation notebook"
    print(f"capaudit human serve: {what} of the study database {Path(study_db).resolve()}", file=sys.stderr)
    print(f"capaudit human serve: open http://{host}:{port}/ (Ctrl-C to stop)", file=sys.stderr)
    if dry_run:
        print(shlex.join(cmd))
        return 0
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 0


__all__ = ["CULL_IDLE_S", "CULL_INTERVAL_S", "DASHBOARD_NOTEBOOK", "DEFAULT_PORT", "REPO_NOTEBOOK",
           "issue_xsrf_cookie", "prepare_notebook", "serve", "voila_command"]
