"""Figures of the encoder-probe stage (reference-spec §8): truncation curves, eigen-spectra, Coverage/Density.

Each ``plot_*`` function draws plain rows returned by :mod:`capaudit.embed.stage` and writes
``<name>.pdf``, ``<name>.png`` and ``<name>.csv`` (the plotted values); the footer names the
tokenizer / encoder (and says when a model is randomly initialised).

* ``encoder_truncation_curves`` — share of captions over a token limit vs the limit, one line per
  surface and tokenizer, with the CLIP (77) and LongCLIP (248) limits marked;
* ``embedding_spectrum`` — covariance eigenvalue share λ_i/Σλ vs rank (log–log), one line per surface;
* ``embedding_coverage_density`` — Coverage@k and Density@k (query in gallery; not PRDC coverage)
  bars per prompt pool, one bar per surface.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .figure_files import FigureInfo  # noqa: E402
from .figure_files import save_figure_files as _save  # noqa: E402
from .table_model import caveats_in  # noqa: E402

STYLE = {"font.size": 7, "axes.titlesize": 7, "axes.labelsize": 7, "legend.fontsize": 6, "xtick.labelsize": 6,
         "ytick.labelsize": 6, "axes.spines.top": False, "axes.spines.right": False, "pdf.fonttype": 42}
LIMIT_MARKS = ((77, "CLIP 77"), (248, "LongCLIP 248"))


def _info(title: str, notebook: str, function: str, footer: Optional[str]) -> FigureInfo:
    """The report's description of an encoder-probe figure: the footer as a note, its caveats."""
    return FigureInfo(title, "embed", notebook, f"{__name__}.{function}", caveats_in([footer or ""]),
                      (footer,) if footer else ())


def _footer(fig: Any, text: Optional[str]) -> None:
    if text:
        fig.text(0.01, -0.02, text, fontsize=4.5, ha="left", va="top", wrap=True)


def plot_truncation_curves(curves: Sequence[Mapping[str, Any]], out_dir: Path, *, marks=LIMIT_MARKS,
                           backend: Optional[str] = None, name: str = "encoder_truncation_curves") -> Dict[str, Path]:
    """Share over limit vs limit (rows ``{surface, tokenizer, limit, share_over}``), limits marked."""
    surfaces = list(dict.fromkeys(r["surface"] for r in curves))
    toks = list(dict.fromkeys(r["tokenizer"] for r in curves))
    styles = ["-", "--", ":", "-."]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3.4, 2.3))
        for i, s in enumerate(surfaces):
            for j, t in enumerate(toks):
                pts = [r for r in curves if r["surface"] == s and r["tokenizer"] == t]
                if not pts:
                    continue
                ax.plot([r["limit"] for r in pts], [r["share_over"] for r in pts], styles[j % len(styles)],
                        color=f"C{i % 10}", lw=1, label=s if len(toks) == 1 else f"{s} ({t})")
        top = max((r["limit"] for r in curves), default=300)
        for x, label in marks:
            if x <= top:
                ax.axvline(x, color="0.4", lw=0.6, ls="--")
                ax.text(x, 1.02, label, fontsize=5, ha="center", va="bottom", color="0.3")
        ax.set_xlabel("token limit (with special tokens)")
        ax.set_ylabel("share of captions over the limit")
        ax.set_ylim(0, 1.08)
        ax.set_xlim(0, top)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", frameon=False)
        _footer(fig, backend)
        fig.tight_layout()
        paths = _save(fig, out_dir, name, curves, _info("Share of captions over an encoder's token limit",
                                                        "07_encoder_truncation", "plot_truncation_curves", backend))
    plt.close(fig)
    return paths


def spectrum_rows(spectra: Mapping[str, Sequence[float]], top: Optional[int] = None) -> List[Dict[str, Any]]:
    """``{surface, rank, eigenvalue, share}`` rows (share = λ_i/Σλ) of each surface's covariance spectrum."""
    rows = []
    for s, lam in spectra.items():
        a = np.asarray(lam, dtype=np.float64)
        total = float(a.sum()) or 1.0
        for i, v in enumerate(a[:top] if top else a, start=1):
            rows.append({"surface": s, "rank": i, "eigenvalue": float(v), "share": float(v) / total})
    return rows


#: Eigenvalue shares below this are numerical zeros (a covariance of n ≤ d rows has rank < n) and are not drawn.
SHARE_FLOOR = 1e-8


def plot_eigen_spectrum(spectra: Mapping[str, Sequence[float]], out_dir: Path, *, model: Optional[str] = None,
                        name: str = "embedding_spectrum") -> Dict[str, Path]:
    """Eigenvalue share vs rank (log–log), one line per surface; shares below :data:`SHARE_FLOOR` are not drawn."""
    rows = [r for r in spectrum_rows(spectra) if r["share"] >= SHARE_FLOOR]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(3.4, 2.3))
        for i, s in enumerate(spectra):
            pts = [r for r in rows if r["surface"] == s]
            ax.plot([r["rank"] for r in pts], [r["share"] for r in pts], color=f"C{i % 10}", lw=1, label=s)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("eigenvalue rank")
        ax.set_ylabel(r"$\lambda_i / \sum \lambda$")
        ax.grid(alpha=0.3, which="both")
        ax.legend(loc="lower left", frameon=False)
        footer = f"covariance of centred L2-normalised embeddings; encoder: {model}" if model else None
        _footer(fig, footer)
        fig.tight_layout()
        paths = _save(fig, out_dir, name, rows, _info("Covariance eigenvalue share vs rank of caption embeddings",
                                                      "08_embedding_probes", "plot_eigen_spectrum", footer))
    plt.close(fig)
    return paths


def plot_coverage_density(support: Sequence[Mapping[str, Any]], out_dir: Path, *, model: Optional[str] = None,
                          name: str = "embedding_coverage_density") -> Dict[str, Path]:
    """Coverage@k and Density@k per prompt pool (x) and surface (bars); rows from ``support_rows``."""
    pools = list(dict.fromkeys(r["pool"] for r in support))
    surfaces = list(dict.fromkeys(r["surface"] for r in support))
    k = support[0]["k"] if support else 10
    rows = [{"surface": r["surface"], "pool": r["pool"], "k": r["k"], "coverage": r["coverage"],
             "density": r["density"], "gallery": r["gallery"], "queries": r["queries"]} for r in support]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(2, 1, figsize=(max(3.4, 0.45 * len(pools) + 1.5), 3.6), sharex=True)
        width = 0.8 / max(1, len(surfaces))
        x = np.arange(len(pools))
        for ax, key, label in ((axes[0], "coverage", f"Coverage@{k}"), (axes[1], "density", f"Density@{k}")):
            for i, s in enumerate(surfaces):
                vals = [next((r[key] for r in rows if r["surface"] == s and r["pool"] == p), np.nan) for p in pools]
                n = next((r["gallery"] for r in rows if r["surface"] == s), None)
                ax.bar(x + (i - (len(surfaces) - 1) / 2) * width, vals, width, color=f"C{i % 10}",
                       label=f"{s} (gallery {n})")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3, axis="y")
        axes[0].set_title("prompt pools (queries) in caption surfaces (gallery); query-in-gallery, not PRDC coverage")
        axes[1].set_xticks(x)
        axes[1].set_xticklabels(pools, rotation=35, ha="right")
        axes[0].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        footer = f"encoder: {model}" if model else None
        _footer(fig, footer)
        fig.tight_layout()
        paths = _save(fig, out_dir, name, rows, _info("Coverage@k and Density@k of prompt pools in caption neighbourhoods",
                                                      "08_embedding_probes", "plot_coverage_density", footer))
    plt.close(fig)
    return paths


__all__ = ["LIMIT_MARKS", "SHARE_FLOOR", "plot_coverage_density", "plot_eigen_spectrum", "plot_truncation_curves", "spectrum_rows"]
