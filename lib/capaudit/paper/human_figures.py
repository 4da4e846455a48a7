"""Figures and table bodies of human verification (reference-spec §7): judge–human confusion, agreement.

Every element built from simulated annotators says so in its title / caption comment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from capaudit.io.atomic import atomic_path, write_text_atomic  # noqa: E402
from capaudit.paper.figure_files import FigureInfo, write_figure_data  # noqa: E402
from capaudit.paper.fmt import tex_escape  # noqa: E402

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


def agreement_tex(rows: Sequence[Mapping[str, Any]], path: Path, simulated: bool) -> Path:
    """LaTeX tabular body: judge & surface group & agreement [95% interval] & records & images."""
    lines = ["% judge-human weighted exact agreement (image-cluster bootstrap, percentile 95% interval)"]
    if simulated:
        lines.append("% SIMULATED annotators: demo only, not human evidence")
    lines.append("% columns: judge & surface group & agreement & interval & records & image clusters & labels")
    for r in rows:
        lines.append(" & ".join([
            tex_escape(r["judge"]), tex_escape(r["surface_group"]), f"{r['estimate']:.3f}",
            f"[{r['lower']:.3f}, {r['upper']:.3f}]", str(r["n_records"]), str(r["n_clusters"]), tex_escape(r["labels"]),
        ]) + r" \\")
    return write_text_atomic(path, "\n".join(lines) + "\n")


def corrected_tex(rows: Sequence[Mapping[str, Any]], path: Path, simulated: bool) -> Path:
    """LaTeX tabular body of the human-corrected supported CBU per caption (flat rows of
    :meth:`capaudit.human.corrected.CorrectedRow.flat`): judge & surface & judge CBU/cap & corrected
    CBU/cap & interval & human-only & interval & λ & labelled & left out & labels. A row without an
    estimate shows "--" and its status."""
    level = next((r["level"] for r in rows), 0.95)
    lines = [f"% supported CBU per caption corrected by people: weighted PPI++ (tuned lambda) and human-only "
             f"weighted estimates, {100 * level:g}% t intervals; CBU/cap = share x claims / captions with a judged claim"]
    if simulated:
        lines.append("% SIMULATED annotators: demo only, not human evidence")
    lines.append("% columns: judge & surface & judge CBU/cap & corrected CBU/cap & interval & human-only CBU/cap & "
                 "interval & lambda & labelled & left out & labels")

    def num(x: Any) -> str:
        return "--" if x is None else f"{x:.2f}"

    for r in rows:
        surface = r["surface"] if r["scope"] == "surface" else f"{r['surface_group']} (all)"
        ok = r["status"] == "ok"
        est = [num(r["ppi_cap"]), f"[{r['ppi_cap_lo']:.2f}, {r['ppi_cap_hi']:.2f}]", num(r["human_cap"]),
               f"[{r['human_cap_lo']:.2f}, {r['human_cap_hi']:.2f}]", num(r["ppi_lam"])] if ok else \
            ["--", tex_escape(r["status"].replace("_", " ")), "--", "--", "--"]
        lines.append(" & ".join([tex_escape(r["judge"]), tex_escape(surface), num(r["judge_cap"]), *est, str(r["labelled"]),
                                 str(r["excluded_total"]), tex_escape(r["labels"])]) + r" \\")
    return write_text_atomic(path, "\n".join(lines) + "\n")


__all__ = ["HUMAN_LABELS", "JUDGE_LABELS", "agreement_tex", "corrected_tex", "plot_confusion"]
