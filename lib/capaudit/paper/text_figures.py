"""Figures of the text-budget stage: budget curves per surface."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Mapping

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


def _value(block: Mapping[str, object], key: str) -> float:
    if key == "distinct3":
        return float(block["distinct"]["3"])
    if key == "rep4":
        return float(block["rep"]["4"])
    return float(block[key])


def plot_budget_curves(results: Dict[str, Dict[str, object]], stem: Path) -> "plt.Figure":
    """Metric vs budget B (log2 axis), one line per surface; writes ``stem``.pdf and .png (and the plotted
    values as ``stem``.table.json)."""
    rows = [{"surface": name, "budget": int(b), **{key: _value(r["budgets"][str(b)], key) for key, _ in PANELS}}
            for name, r in results.items() for b in r["budgets"] if b != "full"]
    fig, axes = plt.subplots(2, 2, figsize=(6.8, 4.6), sharex=True)
    for ax, (key, label) in zip(axes.flat, PANELS):
        for name, r in results.items():
            budgets = [int(b) for b in r["budgets"] if b != "full"]
            ax.plot(budgets, [_value(r["budgets"][str(b)], key) for b in budgets], marker="o", ms=3, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets)
        ax.set_xticklabels([str(b) for b in budgets])
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("budget B (lexical units)", fontsize=8)
    axes[0, 0].legend(fontsize=6, loc="best")
    fig.tight_layout()
    stem.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(f"{stem}.pdf")
    fig.savefig(f"{stem}.png", dpi=200)
    plt.close(fig)
    write_figure_data(stem.parent, stem.name, rows,
                      FigureInfo("Text-budget curves: B-eligibility, opener rate, Distinct-3 and rep-4 vs budget B", "text",
                                 "02_text_stats", f"{__name__}.plot_budget_curves"))
    return fig
