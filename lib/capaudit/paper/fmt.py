"""LaTeX number formatting shared by tables and the numbers map (reference-spec §5.5)."""

from __future__ import annotations

from typing import Iterable, Sequence


def tex_int(n: int) -> str:
    """``4467`` → ``$4{,}467$`` (thousands separator ``{,}``)."""
    return "$" + format(int(n), ",").replace(",", "{,}") + "$"


def tex_num(x: float, decimals: int) -> str:
    """``$x$`` with a fixed number of decimals."""
    return f"${x:.{decimals}f}$"


def tex_signed(x: float, decimals: int = 2) -> str:
    """``$+4.22$`` (``%+.Nf``)."""
    return f"${x:+.{decimals}f}$"


def tex_arrow(ref: float, ours: float, decimals: int) -> str:
    """``$ref \\to \\mathbf{ours}$``."""
    return f"${ref:.{decimals}f} \\to \\mathbf{{{ours:.{decimals}f}}}$"


def tex_pm(mean: float, std: float, decimals: int) -> str:
    """``$m \\pm s$``."""
    return f"${mean:.{decimals}f} \\pm {std:.{decimals}f}$"


def tex_pct(rate: float, decimals: int = 1) -> str:
    """``0.924`` → ``$92.4\\%$``."""
    return f"${100 * rate:.{decimals}f}\\%$"


def row(cells: Sequence[str]) -> str:
    """One tabular row: cells joined by `` & `` and ended by ``\\\\``."""
    return " & ".join(cells) + " \\\\"


ADDLINESPACE = "\\addlinespace[0.2em]"


def body(lines: Iterable[str]) -> str:
    """Tabular body text with a trailing newline."""
    return "\n".join(lines) + "\n"



_TEX_SPECIALS = str.maketrans({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                               "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                               "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"})


def tex_escape(text: object) -> str:
    """Plain text as LaTeX text: the one escaping rule of every table and number the paper prints."""
    return str(text).translate(_TEX_SPECIALS)
