"""Paper figures (matplotlib; PDF + PNG, column width 3.3 in).

Every figure has a data function returning plain rows (what is plotted, independent of fonts and
rendering; tests check these) and a ``plot_*`` function that draws them and writes
``<name>.pdf``, ``<name>.png`` and ``<name>.csv`` (the plotted values).

* Figure 2 left — supported CBU/cap vs risk per cell (§5.4).
* Figure 2 right — CC12M budget sweep B ∈ {16, 32, 48, 64}: CBU/cap vs CBU/100 lex with
  Pareto flags (§4.4, G6).
* Figure 1 right — seven-pool mean prompt-mass support and JSD per comparison (§3.2, G8).
* Prompt-support heatmap — per pool × comparison prompt-mass delta.
"""

from __future__ import annotations

import csv
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..summaries.cells import GEMMA_JUDGE, QWEN_JUDGE, CellsFile  # noqa: E402
from ..summaries.frontier import FrontierRow  # noqa: E402
from ..summaries.vqa_layout import VqaLayout  # noqa: E402
from ..summaries.prompt_support import (  # noqa: E402
    ALL_REFERENCE_POOLS,
    JSD,
    PROMPT_MASS,
    SEVEN_PAPER_POOLS,
    PromptSupportRow,
    seven_pool_means,
)
from .figure_files import FigureInfo, write_figure_data  # noqa: E402
from .layout import BY_COMPARISON, CC12M_FRONTIER, PAIRINGS  # noqa: E402
from .table_model import caveats_in, stand_in_caveats  # noqa: E402

COLUMN_WIDTH_IN = 3.3
STYLE = {
    "font.size": 7,
    "axes.titlesize": 7,
    "axes.labelsize": 7,
    "legend.fontsize": 6,
    "xtick.labelsize": 6,
    "ytick.labelsize": 6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "pdf.fonttype": 42,
    "savefig.dpi": 300,
}
SLICE_COLORS = {
    "DataComp": "#1b9e77",
    "LAION-pop": "#d95f02",
    "PD12M": "#7570b3",
    "Danbooru": "#e7298a",
    "CC12M": "#66a61e",
    "CC12M-control": "#a6761d",
    "DataComp-control": "#666666",
}
JUDGE_MARKERS = {QWEN_JUDGE: "o", GEMMA_JUDGE: "^"}
JUDGE_SHORT = {QWEN_JUDGE: "Qwen", GEMMA_JUDGE: "Gemma"}


def _save(fig, out_dir: Path, name: str, rows: Sequence[object], info: Optional[FigureInfo] = None) -> Dict[str, Path]:
    """PDF, PNG (the style's dpi), CSV of the plotted rows and, given ``info``, their table model."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"pdf": out_dir / f"{name}.pdf", "png": out_dir / f"{name}.png", "csv": out_dir / f"{name}.csv"}
    fig.savefig(paths["pdf"], bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
    fig.savefig(paths["png"], bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        names = [f.name for f in fields(rows[0])] if rows else []  # type: ignore[arg-type]
        w = csv.DictWriter(fh, fieldnames=names, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in asdict(r).items()})  # type: ignore[call-overload]
    if info is not None:
        paths["model"] = write_figure_data(out_dir, name, rows, info)
    return paths


# -- Figure 2 left ---------------------------------------------------------------------------
@dataclass(frozen=True)
class YieldRiskPoint:
    slice: str
    judge: str
    surface: str
    ours: bool
    supported_cap: float
    risk: float
    supported_cap_std: float
    risk_std: float


def yield_risk_points(cells: CellsFile, include_controls: bool = True, layout: Optional[VqaLayout] = None) -> List[YieldRiskPoint]:
    """One point per cell: supported CBU/cap (yield) vs risk, with bootstrap stds.

    Without ``layout`` (reference run) ``ours`` = surface ``Ours`` and controls = ``*-control``
    slices; with a layout, ``ours`` = role ``ours`` and controls = roles ``control``/``probe``.
    """
    roles = {(sl.name, s.name): s.role for sl in layout.slices for s in sl.surfaces} if layout else {}

    def is_control(c) -> bool:
        return roles.get((c.slice, c.surface)) in ("control", "probe") if layout else c.slice.endswith("-control")

    return [
        YieldRiskPoint(
            c.slice,
            c.judge,
            c.surface,
            roles.get((c.slice, c.surface)) == "ours" if layout else c.surface == "Ours",
            c.all_types.supported_cap,
            c.all_types.risk,
            c.all_types.supported_cap_std,
            c.all_types.risk_std,
        )
        for c in cells.cells
        if (include_controls or not is_control(c)) and c.all_types.responses > 0
    ]


PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")
MARKERS = ("o", "^", "s", "D", "v", "P")


def plot_yield_risk(points: Sequence[YieldRiskPoint], out_dir: Path, name: str = "fig2_left_yield_risk",
                    layout: Optional[VqaLayout] = None, inputs: Sequence[str] = ()) -> Dict[str, Path]:
    """Figure 2 left: risk (x) vs supported CBU/cap (y); colour = slice (with a layout: surface),
    marker = judge, filled = ours. With a layout the legend prints the judges' labels (offline
    judges say so) and the surfaces' labels."""
    judges = list(dict.fromkeys(p.judge for p in points))
    markers = {j: JUDGE_MARKERS.get(j, MARKERS[i % len(MARKERS)]) for i, j in enumerate(judges)}
    jlabel = {j.name: j.label for j in layout.judges} if layout else {}
    if layout:
        keys = list(dict.fromkeys((p.slice, p.surface) for p in points))
        colors = {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}
        slabel = {(sl.name, s.name): s.label for sl in layout.slices for s in sl.surfaces}
        color_of = lambda p: colors[(p.slice, p.surface)]  # noqa: E731
    else:
        color_of = lambda p: SLICE_COLORS.get(p.slice, "#333333")  # noqa: E731
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2.2))
        for p in points:
            color = color_of(p)
            ax.errorbar(p.risk, p.supported_cap, xerr=p.risk_std, yerr=p.supported_cap_std, fmt="none",
                        ecolor=color, elinewidth=0.5, alpha=0.6)
            ax.scatter(p.risk, p.supported_cap, marker=markers[p.judge], s=16, linewidths=0.8,
                       edgecolors=color, facecolors=color if p.ours else "white", zorder=3)
        if layout:
            handles = [plt.Line2D([], [], marker="s", ls="", color=c, markersize=4, label=slabel.get(k, k[1]))
                       for k, c in colors.items()]
        else:
            handles = [plt.Line2D([], [], marker="s", ls="", color=c, markersize=4, label=s)
                       for s, c in SLICE_COLORS.items() if any(p.slice == s for p in points)]
        handles += [plt.Line2D([], [], marker=markers[j], ls="", color="k", markerfacecolor="white", markersize=4,
                               label=jlabel.get(j, JUDGE_SHORT.get(j, j))) for j in judges]
        handles += [plt.Line2D([], [], marker="o", ls="", color="k", markersize=4,
                               label="audited surface (filled)" if layout else "Ours (filled)")]
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2 if layout else 4,
                  frameon=False, handletextpad=0.3, columnspacing=0.8)
        ax.set_xlabel("risk (no / questions)")
        ax.set_ylabel("supported CBU per caption")
        ax.set_xlim(left=0)
        caveats = stand_in_caveats("judges", layout.judge_kinds, layout.any_offline) if layout is not None else ()
        if "offline judges" in caveats:
            ax.set_title("offline judges (annotation-grounded heuristics, not VLMs)", fontsize=6)
        elif caveats:
            ax.set_title("judges: " + ", ".join(caveats) + " (not evidence about the images)", fontsize=6)
        info = FigureInfo("Supported CBU per caption vs risk for every cell (filled: audited surface)", "judges",
                          "paper_fig2", f"{__name__}.plot_yield_risk", caveats,
                          inputs=tuple(inputs))
        return _save(fig, out_dir, name, points, info)


# -- Figure 2 right --------------------------------------------------------------------------
@dataclass(frozen=True)
class BudgetPoint:
    budget: int
    surface: str
    label: str
    cbu_per_cap: float
    cbu_per_100tok: float
    pareto: int


def budget_sweep_points(rows: Sequence[FrontierRow]) -> List[BudgetPoint]:
    """Frontier rows as plot points, ordered by surface then budget."""
    order = {s: i for i, (s, _) in enumerate(CC12M_FRONTIER)}
    pts = [BudgetPoint(r.budget, r.surface, r.label, r.cbu_per_cap, r.cbu_per_100tok, r.pareto_efficiency_yield) for r in rows]
    return sorted(pts, key=lambda p: (order.get(p.surface, len(order)), p.surface, p.budget))


def plot_budget_sweep(points: Sequence[BudgetPoint], out_dir: Path, name: str = "fig2_right_budget_sweep",
                      inputs: Sequence[str] = (), backend: Optional[str] = None) -> Dict[str, Path]:
    """Figure 2 right: CBU/100 lex (x) vs CBU/cap (y) per surface across budgets; filled = Pareto.
    ``backend`` (the extractor the claims stage recorded) is named in the title when it is
    capaudit's heuristic one, and in the figure's notes."""
    colors = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#666666"]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 2.4))
        surfaces = list(dict.fromkeys(p.surface for p in points))
        for i, s in enumerate(surfaces):
            pts = [p for p in points if p.surface == s]
            c = colors[i % len(colors)]
            ax.plot([p.cbu_per_100tok for p in pts], [p.cbu_per_cap for p in pts], "-", color=c, lw=0.8, label=pts[0].label)
            span = max(p.cbu_per_cap for p in pts) - min(p.cbu_per_cap for p in pts)
            for p in pts:
                ax.scatter(p.cbu_per_100tok, p.cbu_per_cap, s=18, marker="o", edgecolors=c,
                           facecolors=c if p.pareto else "white", linewidths=0.8, zorder=3)
                if span >= 0.5:
                    ax.annotate(f"B={p.budget}", (p.cbu_per_100tok, p.cbu_per_cap), xytext=(3, 1),
                                textcoords="offset points", fontsize=5, color=c)
            if span < 0.5:  # budgets coincide (captions shorter than every B)
                b = sorted(p.budget for p in pts)
                ax.annotate(f"B={b[0]}–{b[-1]}", (pts[-1].cbu_per_100tok, pts[-1].cbu_per_cap), xytext=(0, 5),
                            textcoords="offset points", fontsize=5, color=c, ha="center")
        ax.legend(loc="upper right", frameon=False, title="filled = Pareto-efficient at B", title_fontsize=5)
        ax.set_xlabel("CBU per 100 lex")
        ax.set_ylabel("CBU per caption")
        caveats = caveats_in([backend or ""])
        if "offline extractor" in caveats:
            ax.set_title("claims: offline heuristic extractor, not a language model", fontsize=6)
        info = FigureInfo("Budget sweep: claimed CBU per caption vs CBU per 100 lex (filled: Pareto-efficient at B)",
                          "claims", "paper_fig2", f"{__name__}.plot_budget_sweep", caveats=caveats,
                          notes=(f"claims extracted by {backend}",) if backend else (), inputs=tuple(inputs))
        return _save(fig, out_dir, name, points, info)


# -- Figure 1 right and heatmap ------------------------------------------------------------
@dataclass(frozen=True)
class PoolMeanBar:
    comparison: str
    label: str
    metric: str
    pools: int
    local_mean: float
    reference_mean: float


def prompt_support_bars(rows: Sequence[PromptSupportRow], pools: Optional[Sequence[str]] = SEVEN_PAPER_POOLS) -> List[PoolMeanBar]:
    """Pool means of local/reference block means per comparison: the paper's comparisons in paper
    order, then any other comparison of ``rows`` in file order (labelled by its name);
    ``pools=None`` averages every pool present."""
    means = {(m.comparison, m.metric): m for m in seven_pool_means(rows, pools)}
    order = [(p.comparison, p.label) for p in PAIRINGS]
    known = {c for c, _ in order}
    order += [(c, c) for c in dict.fromkeys(r.comparison for r in rows) if c not in known]
    out = []
    for comparison, label in order:
        for metric in (PROMPT_MASS, JSD):
            m = means.get((comparison, metric))
            if m is not None:
                out.append(PoolMeanBar(comparison, label, metric, m.pools, m.local_mean, m.reference_mean))
    return out


def plot_prompt_support(bars: Sequence[PoolMeanBar], out_dir: Path, name: str = "fig1_right_prompt_support",
                        inputs: Sequence[str] = ()) -> Dict[str, Path]:
    """Figure 1 right: two panels (prompt-mass support, JSD), ours vs reference per comparison."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(COLUMN_WIDTH_IN, 2.2), sharey=True)
        for ax, metric, title in ((axes[0], PROMPT_MASS, "prompt-mass support ↑"), (axes[1], JSD, "n-gram JSD ↓")):
            bs = [b for b in bars if b.metric == metric]
            ys = list(range(len(bs)))
            ax.barh([y - 0.2 for y in ys], [b.local_mean for b in bs], height=0.4, color="#1b9e77", label="Ours")
            ax.barh([y + 0.2 for y in ys], [b.reference_mean for b in bs], height=0.4, color="#bbbbbb", label="Reference")
            ax.set_yticks(ys)
            ax.set_yticklabels([b.label for b in bs])
            ax.set_title(title)
            ax.set_xlim(0, max([b.local_mean for b in bs] + [b.reference_mean for b in bs] + [0.1]) * 1.1)
            ax.set_xlabel(f"mean over {bs[0].pools if bs else 7} pools", fontsize=6)
        axes[0].invert_yaxis()  # shared y: invert once
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 0.98), ncol=2, frameon=False)
        info = FigureInfo("Prompt-mass support and n-gram JSD at B = 64, mean over pools", "prompts",
                          "paper_fig1_prompt_support", f"{__name__}.plot_prompt_support", inputs=tuple(inputs))
        return _save(fig, out_dir, name, bars, info)


@dataclass(frozen=True)
class HeatCell:
    prompt_pool: str
    comparison: str
    label: str
    metric: str
    delta: float
    in_paper_pools: bool


def prompt_support_heat(rows: Sequence[PromptSupportRow], metric: str = PROMPT_MASS,
                        pools: Optional[Sequence[str]] = SEVEN_PAPER_POOLS) -> List[HeatCell]:
    """Per (pool, comparison): block-mean delta local − reference of ``metric``; ``in_paper_pools``
    marks the pools counted in the paper (``pools=None``: every pool)."""
    out = []
    for r in rows:
        if r.metric != metric:
            continue
        p = BY_COMPARISON.get(r.comparison)
        out.append(HeatCell(r.prompt_pool, r.comparison, p.label if p else r.comparison, metric,
                            r.delta_mean_local_minus_reference, pools is None or r.prompt_pool in pools))
    order = {p.comparison: i for i, p in enumerate(PAIRINGS)}
    pool_order = {p: i for i, p in enumerate(ALL_REFERENCE_POOLS)}
    return sorted(out, key=lambda c: (pool_order.get(c.prompt_pool, 99), c.prompt_pool, order.get(c.comparison, 99)))


def plot_prompt_support_heatmap(cells: Sequence[HeatCell], out_dir: Path, name: str = "fig_prompt_support_heatmap",
                                inputs: Sequence[str] = ()) -> Dict[str, Path]:
    """Pools (rows) × comparisons (columns), diverging colours centred at 0, values annotated."""
    pools = list(dict.fromkeys(c.prompt_pool for c in cells))
    present = {c.label for c in cells}
    cmps = [p.label for p in PAIRINGS if p.label in present]
    cmps += sorted(present - set(cmps))
    grid = [[float("nan")] * len(cmps) for _ in pools]
    for c in cells:
        grid[pools.index(c.prompt_pool)][cmps.index(c.label)] = c.delta
    vmax = max([abs(c.delta) for c in cells] + [1e-9])
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN * 2, 2.6))
        im = ax.imshow(grid, cmap="RdBu", vmin=-vmax, vmax=vmax, aspect="auto")
        for i in range(len(pools)):
            for j in range(len(cmps)):
                v = grid[i][j]
                if v == v:
                    ax.text(j, i, f"{v:+.3f}", ha="center", va="center", fontsize=5,
                            color="white" if abs(v) > 0.6 * vmax else "black")
        ax.set_xticks(range(len(cmps)))
        ax.set_xticklabels(cmps, rotation=30, ha="right")
        ax.set_yticks(range(len(pools)))
        counted = {c.prompt_pool: c.in_paper_pools for c in cells}
        ax.set_yticklabels([p + ("" if counted.get(p, True) else " (sens.)") for p in pools])
        fig.colorbar(im, ax=ax, fraction=0.03, pad=0.02).set_label("prompt-mass Δ (ours − ref)")
        for s in ("top", "right"):
            ax.spines[s].set_visible(True)
        info = FigureInfo("Per-pool prompt-mass delta (first − second surface; \"sens.\": a pool not counted in pool-wins)",
                          "prompts", "paper_fig1_prompt_support", f"{__name__}.plot_prompt_support_heatmap",
                          inputs=tuple(inputs))
        return _save(fig, out_dir, name, cells, info)
