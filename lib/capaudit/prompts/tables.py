"""Stage tables for prompt-pool support: the LaTeX pool-wins table (reference-spec §3.2)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Union

from capaudit.summaries.prompt_support import (
    JSD,
    PROMPT_MASS,
    PromptSupportRow,
    pool_losses,
    pool_wins,
    seven_pool_means,
)

PathLike = Union[str, Path]

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def pool_wins_latex(
    rows: Iterable[PromptSupportRow],
    pools: Optional[Sequence[str]] = None,
    caption: str = "Prompt-pool support: pools won by the local surface (prompt-mass delta $>0$).",
    label: str = "tab:prompt-pool-wins",
    note: str = "",
) -> str:
    """A booktabs table: per comparison, pools won of N, mean block means over the pools, losers.

    ``pools=None`` counts every pool present; pass the seven paper pools for the reference run.
    """
    rows = list(rows)
    wins = pool_wins(rows, pools)
    losses = pool_losses(rows, pools)
    means = {(m.comparison, m.metric): m for m in seven_pool_means(rows, pools)}
    lines: List[str] = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{lrrrrrl}",
        r"\toprule",
        r"Comparison & Wins & \multicolumn{2}{c}{Prompt mass (L / R)} & \multicolumn{2}{c}{JSD (L / R)} & Pools lost \\",
        r"\cmidrule(lr){3-4}\cmidrule(lr){5-6}",
    ]
    for comparison in sorted(wins):
        mass = means[(comparison, PROMPT_MASS)]
        jsd = means.get((comparison, JSD))
        lost = ", ".join(latex_escape(p) for p in losses[comparison]) or "--"
        jsd_cells = f"{jsd.local_mean:.4f} & {jsd.reference_mean:.4f}" if jsd else "-- & --"
        lines.append(
            f"{latex_escape(comparison)} & {wins[comparison]}/{mass.pools} & {mass.local_mean:.4f} & "
            f"{mass.reference_mean:.4f} & {jsd_cells} & {lost} \\\\"
        )
    lines += [r"\bottomrule", r"\end{tabular}"]
    full_caption = caption + (f" {note}" if note else "")
    lines += [f"\\caption{{{full_caption}}}", f"\\label{{{label}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_text(text: str, path: PathLike) -> Path:
    """Write ``text`` (UTF-8) atomically: the old file stays until the new one is complete."""
    from capaudit.io.atomic import write_text_atomic

    return write_text_atomic(path, text)
