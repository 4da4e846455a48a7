"""Build the manuscript (``paper/main.tex``) of one run with latexmk — the command of ``make paper-pdf``.

``\\rundir`` is set before ``main.tex`` is read (``-usepretex``), so one manuscript serves every
run: tables, figures and ``numbers.tex`` come from ``<run_dir>/tables`` and ``<run_dir>/figures``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional, Union

from ..errors import CapauditError

PAPER_DIR = Path(__file__).resolve().parents[3] / "paper"
PathLike = Union[str, Path]


class ManuscriptError(CapauditError):
    """latexmk is missing or failed (the message names the log)."""


def latexmk_command(run_dir: PathLike, out_dir: PathLike) -> list:
    """The latexmk argv (run from the ``paper/`` folder)."""
    rundir = os.path.relpath(Path(run_dir).resolve(), PAPER_DIR)
    return ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", f"-outdir={Path(out_dir).resolve()}",
            f"-usepretex=\\def\\rundir{{{rundir}}}", "main.tex"]


def build_pdf(run_dir: PathLike, out_dir: Optional[PathLike] = None, timeout: float = 600.0) -> Path:
    """Build ``<out_dir>/main.pdf`` (default ``<run_dir>/paper``); :class:`ManuscriptError` on failure."""
    if shutil.which("latexmk") is None:
        raise ManuscriptError("latexmk not found (install TeX Live: capaudit doctor --install paper)")
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "paper"
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(latexmk_command(run_dir, out), cwd=PAPER_DIR, capture_output=True, text=True, timeout=timeout)
    pdf = out / "main.pdf"
    if proc.returncode != 0 or not pdf.exists():
        raise ManuscriptError(f"latexmk failed (exit {proc.returncode}); see {out / 'main.log'}: "
                              f"{(proc.stdout + proc.stderr)[-800:]}")
    return pdf


__all__ = ["build_pdf", "latexmk_command", "ManuscriptError", "PAPER_DIR"]
