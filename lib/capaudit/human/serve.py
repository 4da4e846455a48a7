"""Serve the annotation notebook with voila on 127.0.0.1 (``capaudit human serve``).

The jupytext notebook ``notebooks/human_verification.py`` is converted to an ``.ipynb`` in a
serving folder beside the study database, with the study path injected after the parameters cell
(papermill style), and voila serves that folder's single notebook. The folder holds nothing else,
and voila's static-file allow-list is set to match nothing, so no other file is reachable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Union

from capaudit.errors import InputError
from capaudit.io.atomic import write_text_atomic

PathLike = Union[str, Path]
REPO_NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "human_verification.py"
DEFAULT_PORT = 8866


def prepare_notebook(study_db: PathLike, serve_dir: Optional[PathLike] = None,
                     notebook: Optional[PathLike] = None) -> Path:
    """Write ``human_verification.ipynb`` with ``study = <absolute db path>`` injected; returns its path."""
    import jupytext
    import nbformat

    src = Path(notebook) if notebook else REPO_NOTEBOOK
    if not src.is_file():
        raise InputError("annotation notebook not found", path=src)
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
    out_dir = Path(serve_dir) if serve_dir else db.parent / f"{db.stem}_serve"
    out = out_dir / "human_verification.ipynb"
    write_text_atomic(out, nbformat.writes(nb))
    return out


def voila_command(ipynb: PathLike, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> List[str]:
    """The voila command line serving ``ipynb`` on ``host:port`` without a browser or tracebacks."""
    return [
        sys.executable, "-m", "voila", str(ipynb), "--no-browser", f"--port={int(port)}", f"--Voila.ip={host}",
        "--Voila.port_retries=0", "--theme=light", "--show_tracebacks=False",
        "--VoilaConfiguration.file_allowlist=(?!)",
    ]


def serve(study_db: PathLike, host: str = "127.0.0.1", port: int = DEFAULT_PORT, dry_run: bool = False) -> int:
    """Prepare the notebook, print the URL and run voila in the foreground (Ctrl-C stops it)."""
    ipynb = prepare_notebook(study_db)
    cmd = voila_command(ipynb, host, port)
    print(f"capaudit human serve: study database: {Path(study_db).resolve()}", file=sys.stderr)
    print(f"capaudit human serve: open http://{host}:{port}/ (Ctrl-C to stop)", file=sys.stderr)
    if dry_run:
        print(" ".join(cmd))
        return 0
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 0


__all__ = ["DEFAULT_PORT", "prepare_notebook", "serve", "voila_command"]
