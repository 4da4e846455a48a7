"""Figures of the prompt-support stage (reference-spec §3), drawn from the stage's in-memory tables.

* ``prompt_support_pool_means`` — per comparison, the mean over pools of the local and reference block
  means: prompt-mass support (left) and n-gram JSD (right), Figure 1 (right) style.
* ``prompt_support_pool_heatmap`` — per pool × comparison, the block-delta mean (local − reference) of
  prompt-mass support and of JSD, on a diverging scale centred at zero.

Each ``plot_*`` function writes ``<name>.pdf`` and ``<name>.png`` (150 dpi) into ``out_dir`` and
returns the (closed) figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from capaudit.summaries.prompt_support import JSD, PROMPT_MASS, PoolMeans, PromptSupportRow, rows_to_records  # noqa: E402

from .figure_files import FigureInfo, write_figure_data  # noqa: E402

MEANS_NAME = "prompt_support_pool_means"
HEATMAP_NAME = "prompt_support_pool_heatmap"
DPI = 150


def _save(fig: "plt.Figure", out_dir: Path, name: str, frame: pd.DataFrame, info: FigureInfo) -> None:
    """The figure's PDF and PNG, and its plotted rows as a table model (the report shows them)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_dir / f"{name}.pdf")
    fig.savefig(out_dir / f"{name}.png", dpi=DPI)
    plt.close(fig)
    write_figure_data(out_dir, name, frame.to_dict("records"), info)


def _dumbbell(ax: "plt.Axes", frame: pd.DataFrame, xlabel: str) -> None:
    """Reference and local means per comparison, joined by a grey line."""
    ax.hlines(frame.index, frame["reference_mean"], frame["local_mean"], color="0.7")
    ax.plot(frame["reference_mean"], frame.index, "o", color="tab:gray", label="reference")
    ax.plot(frame["local_mean"], frame.index, "o", color="tab:blue", label="local")
    ax.set_xlabel(xlabel)


def plot_pool_means(means: Sequence[PoolMeans], out_dir: Path, info: Optional[FigureInfo] = None) -> "plt.Figure":
    """Mean over pools of the block means, local vs reference, per comparison; writes
    ``prompt_support_pool_means``.pdf/.png into ``out_dir`` (``info``: notebook, function and inputs
    of the figure's provenance; default the prompt-support stage)."""
    frame = pd.DataFrame(rows_to_records(means))
    if frame.empty:
        raise ValueError("prompt support: no pool means to plot (the stage compared no pools)")
    mass = frame[frame["metric"] == PROMPT_MASS].set_index("comparison")
    jsd = frame[frame["metric"] == JSD].set_index("comparison")
    fig, (ax_mass, ax_jsd) = plt.subplots(1, 2, figsize=(9, 0.6 * len(mass) + 1.8), sharey=True)
    _dumbbell(ax_mass, mass, "prompt-mass support (higher = better)")
    _dumbbell(ax_jsd, jsd, "n-gram JSD (lower = closer)")
    ax_mass.legend(loc="best", fontsize=8)
    fig.suptitle(f"Prompt-pool support, mean over {int(mass['pools'].iloc[0])} pools")
    fig.tight_layout()
    _save(fig, out_dir, MEANS_NAME, frame, info or FigureInfo(
        title="Prompt-pool support: mean over pools, local vs reference", axis="prompts",
        notebook="03_prompt_support", function=f"{__name__}.plot_pool_means"))
    return fig


def plot_pool_delta_heatmap(rows: Sequence[PromptSupportRow], out_dir: Path,
                            info: Optional[FigureInfo] = None) -> "plt.Figure":
    """Block-delta mean (local − reference) per pool × comparison, prompt-mass support and JSD;
    writes ``prompt_support_pool_heatmap``.pdf/.png into ``out_dir``."""
    frame = pd.DataFrame(rows_to_records(rows))
    if frame.empty:
        raise ValueError("prompt support: no bootstrap rows to plot (the stage compared no pools)")
    delta = frame.pivot_table(index="prompt_pool", columns=["metric", "comparison"],
                              values="delta_mean_local_minus_reference")
    mass_delta = delta[PROMPT_MASS]
    jsd_delta = delta[JSD]
    fig, (ax_m, ax_j) = plt.subplots(1, 2, figsize=(10, 0.35 * len(delta) + 2.5))
    lim_m = float(mass_delta.abs().max().max())
    lim_j = float(jsd_delta.abs().max().max())
    im_m = ax_m.imshow(mass_delta.values, cmap="RdBu", vmin=-lim_m, vmax=lim_m, aspect="auto")
    im_j = ax_j.imshow(jsd_delta.values, cmap="RdBu_r", vmin=-lim_j, vmax=lim_j, aspect="auto")
    ax_m.set_yticks(range(len(mass_delta.index)), mass_delta.index)
    ax_j.set_yticks(range(len(jsd_delta.index)), [""] * len(jsd_delta.index))
    ax_m.set_xticks(range(len(mass_delta.columns)), mass_delta.columns, rotation=30, ha="right")
    ax_j.set_xticks(range(len(jsd_delta.columns)), jsd_delta.columns, rotation=30, ha="right")
    ax_m.set_title("Δ prompt-mass support (blue: local higher)")
    ax_j.set_title("Δ JSD (blue: local lower)")
    fig.colorbar(im_m, ax=ax_m, shrink=0.8)
    fig.colorbar(im_j, ax=ax_j, shrink=0.8)
    fig.tight_layout()
    _save(fig, out_dir, HEATMAP_NAME, frame[["prompt_pool", "metric", "comparison",
                                              "delta_mean_local_minus_reference"]], info or FigureInfo(
        title="Per-pool block-delta mean (local - reference)", axis="prompts",
        notebook="03_prompt_support", function=f"{__name__}.plot_pool_delta_heatmap"))
    return fig
