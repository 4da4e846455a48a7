"""Figures and table bodies of human verification (reference-spec §7): judge–human confusion, agreement.

Every element built from simulated annotators says so in its title / caption comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from capaudit.io.atomic import atomic_path  # noqa: E402
from capaudit.paper.figure_files import FigureInfo, write_figure_data  # noqa: E402

HUMAN_LABELS = ("yes", "no", "uncertain", "not_visual", "image_unavailable", "prefer_not_to_answer")
JUDGE_LABELS = ("yes", "no", "uncertain")


def plot_confusion(confusion: Mapping[str, Mapping[str, Mapping[str, int]]], stem: Path, simulated: bool) -> Path:
    """One panel per judge: rows human image-support consensus, columns the judge's answer (counts).

    Writes ``stem``.pdf and ``stem``.png (atomically); returns the PNG path.
    """
    judges = list(confusion)
    if not judges:
        raise ValueError("plot_confusion: no judge")
    rows = [h for h in HUMAN_LABELS if any(h in confusion[j] for j in judges)] or list(HUMAN_LABELS[:3])
    fig, axes = plt.subplots(1, len(judges), figsize=(3.4 * len(judges) + 0.6, 0.45 * len(rows) + 1.6), squeeze=False)
    for ax, j in zip(axes[0], judges):
        m = [[confusion[j].get(h, {}).get(a, 0) for a in JUDGE_LABELS] for h in rows]
        ax.imshow(m, cmap="Blues", aspect="auto")
        for r, line in enumerate(m):
            top = max(max(x) for x in m) or 1
            for c, v in enumerate(line):
                ax.text(c, r, str(v), ha="center", va="center", fontsize=8, color="white" if v > 0.6 * top else "black")
        ax.set_xticks(range(len(JUDGE_LABELS)))
        ax.set_xticklabels(JUDGE_LABELS, fontsize=8)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([h.replace("_", " ") for h in rows], fontsize=8)
        ax.set_xlabel(f"answer of {j}", fontsize=8)
    axes[0][0].set_ylabel("human consensus", fontsize=8)
    title = "Judge vs human image support"
    if simulated:
        title += " — SIMULATED annotators (demo only, not human evidence)"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    for ext in ("pdf", "png"):
        with atomic_path(stem.with_name(f"{stem.name}.{ext}")) as tmp:
            fig.savefig(tmp, format=ext, dpi=200 if ext == "png" else None)
    plt.close(fig)
    counts = [{"judge": j, "human": h, "judge_answer": a, "count": confusion[j].get(h, {}).get(a, 0)}
              for j in judges for h in rows for a in JUDGE_LABELS]
    write_figure_data(stem.parent, stem.name, counts,
                      FigureInfo("Judge answer vs human image-support consensus (counts)", "human", "11_human_agreement",
                                 f"{__name__}.plot_confusion", ("simulated annotators",) if simulated else ()))
    return stem.with_name(f"{stem.name}.png")


__all__ = ["HUMAN_LABELS", "JUDGE_LABELS", "plot_confusion"]
