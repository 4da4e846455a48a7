"""Figures of the text-budget stage: budget curves per surface."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .figure_files import FigureInfo, write_figure_data  # noqa: E402

PANELS = (
    ("eligibility", "B-eligibility"),
    ("opener_rate", "opener rate"),
    ("distinct3", "Distinct-3"),
    ("rep4", "rep-4"),
)


def _value(block: Mapping[str, object], key: str) -> Optional[float]:
    """The panel's value at one budget, or None when the survey did not publish it."""
    if key == "distinct3":
        v = (block.get("distinct") or {}).get("3")  # type: ignore[union-attr]
    elif key == "rep4":
        v = (block.get("rep") or {}).get("4")  # type: ignore[union-attr]
    else:
        v = block.get(key)
    return None if v is None else float(v)  # type: ignore[arg-type]


def _panels(results: Dict[str, Dict[str, object]]) -> List[Tuple[str, str]]:
    """The panels some surface has a curve for (values at two budgets at least); a panel without one
    is left out rather than drawn from missing data."""
    out = []
    for key, label in PANELS:
        if any(sum(_value(b, key) is not None for k, b in r["budgets"].items() if k != "full") >= 2  # type: ignore[union-attr]
               for r in results.values()):
            out.append((key, label))
    return out


def _labels(panels: List[Tuple[str, str]]) -> str:
    names = [label for _, label in panels]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def plot_budget_curves(results: Dict[str, Dict[str, object]], stem: Path,
                       info: Optional[FigureInfo] = None) -> "plt.Figure":
    """Metric vs budget B (log2 axis), one line per surface; writes ``stem``.pdf and .png (and the plotted
    values as ``stem``.table.json). A panel no surface has values for at two budgets is left out;
    ``info`` names the figure's notebook, function and inputs (default: the text-statistics stage)."""
    panels = _panels(results)
    if not panels:
        raise ValueError("budget curves: no metric has values at two budgets")
    rows = [{"surface": name, "budget": int(b), **{key: _value(r["budgets"][str(b)], key) for key, _ in panels}}
            for name, r in results.items() for b in r["budgets"] if b != "full"]
    ncols = 2 if len(panels) > 1 else 1
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.8 if ncols == 2 else 4.6, 2.3 * nrows + (0 if ncols == 2 else 1.2)),
                             sharex=True, squeeze=False)
    for ax, (key, label) in zip(axes.flat, panels):
        for name, r in results.items():
            pts = [(int(b), _value(r["budgets"][str(b)], key)) for b in r["budgets"] if b != "full"]
            pts = [(b, v) for b, v in pts if v is not None]
            ax.plot([b for b, _ in pts], [v for _, v in pts], marker="o", ms=3, label=name)
        budgets = sorted({int(b) for r in results.values() for b in r["budgets"] if b != "full"})
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets)
        ax.set_xticklabels([str(b) for b in budgets])
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("budget B (lexical units)", fontsize=8)
    if ncols == 2:
        axes[0, 0].legend(fontsize=6, loc="best")
    else:
        axes[0, 0].legend(fontsize=5, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    fig.tight_layout()
    stem.parent.mkdir(parents=True, exist_ok=True)
    tight = {} if ncols == 2 else {"bbox_inches": "tight"}  # one panel: its legend lies below it
    fig.savefig(f"{stem}.pdf", **tight)
    fig.savefig(f"{stem}.png", dpi=200, **tight)
    plt.close(fig)
    write_figure_data(stem.parent, stem.name, rows, info or FigureInfo(
        f"Text-budget curves: {_labels(panels)} vs budget B", "text", "02_text_stats", f"{__name__}.plot_budget_curves"))
    return fig
