"""Figures of the detail stage (issue 13): detailness vs length, and ITM by ICR / AOD bins.

Each figure has a data function returning plain rows (tested) and a ``plot_*`` function that draws
them and writes ``<name>.pdf``, ``<name>.png`` and ``<name>.csv`` (the plotted values). Every
figure names the scene-graph parser, grounding and ITM backends in its footer (offline backends
say they are heuristics), and ``measure_labels`` (the stage's ``measure_labels``) name the ICR
("things-only ICR" for COCO instance masks) and the AOD relation count on the axes.

* ``detail_length_scatter`` — ICR (Eq. 2) vs Length and AOD (Eq. 4) vs Length, one column per
  surface.
* ``detail_itm_bins`` — mean ITM (± s.e.m.) in quantile bins of ICR and of AOD, one line per
  surface: the method's inverted-U analysis (does alignment fall for the most "detailed" captions?).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, List, Mapping, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .figure_files import FigureInfo  # noqa: E402
from .figure_files import save_figure_files as _save  # noqa: E402
from .table_model import caveats_in  # noqa: E402

STYLE = {"font.size": 7, "axes.titlesize": 7, "axes.labelsize": 7, "legend.fontsize": 6, "xtick.labelsize": 6,
         "ytick.labelsize": 6, "axes.spines.top": False, "axes.spines.right": False, "pdf.fonttype": 42}
MEASURE_LABELS = {"icr": "ICR (Eq. 2)", "aod": "AOD (Eq. 4)", "cd": "CD (Eq. 5)"}


@dataclass(frozen=True)
class LengthPoint:
    surface: str
    label: str
    id: str
    length: int
    icr: Optional[float]
    aod: Optional[float]


@dataclass(frozen=True)
class ITMBin:
    surface: str
    label: str
    measure: str
    bin: int
    lo: float
    hi: float
    n: int
    measure_mean: float
    itm_mean: float
    itm_sem: Optional[float]


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def length_scatter_rows(scores: Mapping[str, Sequence[Mapping[str, Any]]],
                        labels: Optional[Mapping[str, str]] = None) -> List[LengthPoint]:
    """One point per scored caption with a length (ICR ``None`` where unavailable)."""
    out = []
    for surface, rows in scores.items():
        for r in rows:
            if _num(r.get("length")) is None:
                continue
            out.append(LengthPoint(surface, (labels or {}).get(surface, surface), str(r.get("id")), int(r["length"]),
                                   _num(r.get("icr")), _num(r.get("aod"))))
    return out


def itm_bin_rows(scores: Mapping[str, Sequence[Mapping[str, Any]]], bins: int = 5,
                 measures: Sequence[str] = ("icr", "aod"), itm_field: str = "itm",
                 labels: Optional[Mapping[str, str]] = None) -> List[ITMBin]:
    """Mean ITM per quantile bin of each measure, per surface (rows with both values only).

    Edges are the ``k/bins`` quantiles (numpy 'linear'); repeated edges collapse, so a measure with
    few distinct values gets fewer bins. A value goes to the last bin whose lower edge it reaches
    (the top edge is inclusive)."""
    if bins < 1:
        raise ValueError("bins must be >= 1")
    out: List[ITMBin] = []
    for surface, rows in scores.items():
        for m in measures:
            pairs = [(_num(r.get(m)), _num(r.get(itm_field))) for r in rows]
            pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
            if not pairs:
                continue
            x = np.array([p[0] for p in pairs])
            y = np.array([p[1] for p in pairs])
            edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1)))
            if len(edges) == 1:
                edges = np.array([edges[0], edges[0]])
            idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
            for b in range(len(edges) - 1):
                sel = idx == b
                n = int(sel.sum())
                if n == 0:
                    continue
                sem = float(y[sel].std(ddof=1) / np.sqrt(n)) if n > 1 else None
                out.append(ITMBin(surface, (labels or {}).get(surface, surface), m, b, float(edges[b]),
                                  float(edges[b + 1]), n, float(x[sel].mean()), float(y[sel].mean()), sem))
    return out


def _info(title: str, function: str, backends: Optional[Mapping[str, str]],
          measure_labels: Optional[Mapping[str, str]]) -> FigureInfo:
    """The report's description of a detail figure: backends as notes, their caveats."""
    texts = [*(backends or {}).values(), *(measure_labels or {}).values()]
    caveats = caveats_in(texts)
    if any("offline" in t.lower() or "heuristic" in t.lower() for t in texts):
        caveats = ("offline backends", *caveats)
    notes = tuple(f"{k}: {v}" for k, v in (backends or {}).items())
    return FigureInfo(title, "detail", "09_detail", f"{__name__}.{function}", caveats, notes)


def _footer(fig: Any, backends: Optional[Mapping[str, str]]) -> None:
    if backends:
        text = "; ".join(f"{k}: {v}" for k, v in backends.items())
        fig.text(0.01, -0.02, text, fontsize=4.5, ha="left", va="top", wrap=True)


def plot_length_scatter(points: Sequence[LengthPoint], out_dir: Path, backends: Optional[Mapping[str, str]] = None,
                        name: str = "detail_length_scatter", measure_labels: Optional[Mapping[str, str]] = None) -> Any:
    """ICR vs length (top row) and AOD vs length (bottom row), one column per surface."""
    labels = {**MEASURE_LABELS, **(measure_labels or {})}
    surfaces = list(dict.fromkeys(p.surface for p in points))
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(2, max(1, len(surfaces)), figsize=(max(3.3, 2.2 * len(surfaces)), 3.6),
                                 squeeze=False, sharex="col")
        for j, s in enumerate(surfaces):
            pts = [p for p in points if p.surface == s]
            for i, m in enumerate(("icr", "aod")):
                ax = axes[i, j]
                xs = [p.length for p in pts if getattr(p, m) is not None]
                ys = [getattr(p, m) for p in pts if getattr(p, m) is not None]
                ax.scatter(xs, ys, s=3, alpha=0.35, linewidths=0, color=f"C{j}")
                if len(xs) > 1 and len(set(xs)) > 1:
                    r = float(np.corrcoef(xs, ys)[0, 1]) if np.std(ys) > 0 else float("nan")
                    ax.set_title(f"{pts[0].label} (n={len(xs)}, r={r:.2f})" if i == 0 else f"r={r:.2f}")
                elif i == 0 and pts:
                    ax.set_title(pts[0].label)
                ax.set_ylabel(labels[m] if j == 0 else "")
                ax.grid(alpha=0.3)
            axes[1, j].set_xlabel("length (lexical units)")
        _footer(fig, backends)
        fig.tight_layout()
        _save(fig, out_dir, name, [asdict(p) for p in points],
              _info("Detailness vs length: ICR and AOD against caption length", "plot_length_scatter", backends,
                    measure_labels))
    plt.close(fig)
    return fig


def plot_itm_bins(bins_rows: Sequence[ITMBin], out_dir: Path, backends: Optional[Mapping[str, str]] = None,
                  name: str = "detail_itm_bins", measure_labels: Optional[Mapping[str, str]] = None) -> Any:
    """Mean ITM (± s.e.m.) against the mean ICR / AOD of each quantile bin, one line per surface."""
    labels = {**MEASURE_LABELS, **(measure_labels or {})}
    measures = list(dict.fromkeys(b.measure for b in bins_rows)) or ["icr", "aod"]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(measures), figsize=(3.3 * len(measures) / 1.3, 2.2), squeeze=False)
        for ax, m in zip(axes[0], measures):
            for j, s in enumerate(dict.fromkeys(b.surface for b in bins_rows)):
                rows = [b for b in bins_rows if b.surface == s and b.measure == m]
                if not rows:
                    continue
                ax.errorbar([b.measure_mean for b in rows], [b.itm_mean for b in rows],
                            yerr=[b.itm_sem or 0.0 for b in rows], marker="o", ms=3, capsize=2, lw=1,
                            color=f"C{j}", label=rows[0].label)
            ax.set_xlabel(f"{labels.get(m, m)}, bin mean")
            ax.set_ylabel("mean ITM")
            ax.grid(alpha=0.3)
        if axes[0, 0].get_legend_handles_labels()[0]:
            axes[0, 0].legend(loc="best")
        _footer(fig, backends)
        fig.tight_layout()
        _save(fig, out_dir, name, [asdict(b) for b in bins_rows],
              _info("Mean ITM in quantile bins of ICR and AOD", "plot_itm_bins", backends, measure_labels))
    plt.close(fig)
    return fig


__all__ = ["LengthPoint", "ITMBin", "length_scatter_rows", "itm_bin_rows", "plot_length_scatter", "plot_itm_bins"]
