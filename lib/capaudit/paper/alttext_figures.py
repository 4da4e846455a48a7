"""Figures of the alt-text stage (issue 14): funnel bars, ≥K-per-1M coverage curves (the CC12M study's
Figure 5), top-token bars and web-domain bars.  Every figure notes the offline backends it shows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .figure_files import FigureInfo, write_figure_data  # noqa: E402

OFFLINE_NOTE = "offline backends (langid, VADER, spaCy sm, WordNet, COCO-MINI tags, our unwanted-phrase lexicon)"


def _info(title: str, notebook: str, function: str, offline: bool = False) -> FigureInfo:
    return FigureInfo(title, "alttext", notebook, f"{__name__}.{function}", ("offline backends",) if offline else (),
                      (OFFLINE_NOTE,) if offline else ())


def _save(fig: "plt.Figure", stem: Path, rows: Sequence[Mapping[str, Any]], info: FigureInfo) -> "plt.Figure":
    """``stem``.pdf and .png, and the plotted rows as ``stem``.table.json."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(f"{stem}.pdf")
    fig.savefig(f"{stem}.png", dpi=200)
    plt.close(fig)
    write_figure_data(stem.parent, stem.name, rows, info)
    return fig


def _frame_rows(frame: Any) -> List[Dict[str, Any]]:
    return frame.to_dict("records") if len(frame) else []


def _not_run(step: Any) -> bool:
    """A funnel step that checked none of the rows that reached it (no image data to read)."""
    rows_in = getattr(step, "rows_in", 0)
    return rows_in > 0 and getattr(step, "unchecked", 0) >= rows_in


def _checked(step: Any) -> Any:
    """Rows the step could check, ``"not run"``, or ``None`` when the step does not say."""
    if _not_run(step):
        return "not run"
    return step.rows_in - getattr(step, "unchecked", 0) if hasattr(step, "rows_in") else None


def _partly(step: Any) -> str:
    """`` (n of m checked)`` for a step that checked some but not all of its rows, else empty."""
    n = _checked(step)
    return f" ({n:,} of {step.rows_in:,} checked)" if isinstance(n, int) and 0 < n < step.rows_in else ""


def plot_funnels(funnels: Mapping[str, Mapping[str, Any]], stem: Path) -> "plt.Figure":
    """Per corpus, one horizontal bar panel per pipeline: rows dropped by each rule (kept at the end); a
    rule that checked no row is labelled "not run" in grey, with no bar (its data rows: ``rows`` null,
    ``checked`` "not run")."""
    panels = [(c, p, f) for c, fs in funnels.items() for p, f in fs.items()]
    rows = [{"corpus": c, "pipeline": p, "step": r.rule, "rows": None if _not_run(r) else r.dropped,
             "input_rows": f.input_rows, "checked": _checked(r)}
            for c, p, f in panels for r in f.rows]
    rows += [{"corpus": c, "pipeline": p, "step": "kept", "rows": f.kept, "input_rows": f.input_rows,
              "checked": None} for c, p, f in panels]
    n = max(1, len(panels))
    height = max(2.2, 0.22 * max((len(f.rows) + 1 for _, _, f in panels), default=8))
    fig, axes = plt.subplots(1, n, figsize=(3.4 * n, height), squeeze=False)
    for ax, (corpus, pname, f) in zip(axes[0], panels):
        off = [_not_run(r) for r in f.rows] + [False]
        labels = [r.rule + (" (not run)" if o else _partly(r)) for r, o in zip(f.rows, off)] + ["kept"]
        values = [0 if o else r.dropped for r, o in zip(f.rows, off)] + [f.kept]
        colors = ["#c44e52"] * len(f.rows) + ["#55a868"]
        y = list(range(len(labels)))[::-1]
        ax.barh(y, values, color=colors)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=6)
        for tick, o in zip(ax.get_yticklabels(), off):
            if o:
                tick.set_color("#999999")
        ax.set_title(f"{corpus}: {pname} ({f.input_rows:,} rows)", fontsize=7)
        ax.tick_params(axis="x", labelsize=6)
        for yy, v, o in zip(y, values, off):
            ax.text(v, yy, " not run: checked no row" if o else f" {v:,}", va="center", fontsize=5,
                    color="#999999" if o else "black")
        ax.set_xlabel("rows dropped by the rule (first drop) / kept", fontsize=6)
    fig.suptitle(f"Alt-text filter funnels — {OFFLINE_NOTE}; grey 'not run': the rule had nothing to read "
                 f"(image size, format, tags or URL) on any row", fontsize=7)
    fig.tight_layout()
    return _save(fig, stem, rows, _info("Alt-text filter funnels: rows dropped by each rule (first drop) and kept",
                                        "10_alttext_filters", "plot_funnels", offline=True))


def plot_coverage_curves(curves: Mapping[str, Mapping[str, Sequence[Sequence[float]]]], stem: Path) -> "plt.Figure":
    """One panel per vocabulary: number of classes with ≥ K mentions per 1M captions vs K (log x)."""
    n = max(1, len(curves))
    fig, axes = plt.subplots(1, n, figsize=(3.3 * n, 2.8), squeeze=False)
    for ax, (vocab, per_corpus) in zip(axes[0], curves.items()):
        for corpus, pts in per_corpus.items():
            ks = [p[0] for p in pts]
            ax.plot(ks, [p[1] for p in pts], marker="o", ms=2, lw=1, label=corpus)
        ax.set_xscale("log")
        ax.set_xlabel("K (mentions per 1M captions)", fontsize=7)
        ax.set_ylabel("classes with ≥ K", fontsize=7)
        ax.set_title(vocab, fontsize=8)
        ax.tick_params(labelsize=6)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=5, loc="upper right")
    fig.suptitle("Long-tail concept coverage (lexical mention matcher)", fontsize=7)
    fig.tight_layout()
    rows = [{"vocabulary": v, "corpus": c, "k": p[0], "classes": p[1]}
            for v, per_corpus in curves.items() for c, pts in per_corpus.items() for p in pts]
    return _save(fig, stem, rows, _info("Long-tail concept coverage: classes with at least K mentions per 1M captions",
                                        "10b_concept_coverage", "plot_coverage_curves"))


def plot_top_tokens(tokens: Any, stem: Path, top: int = 15) -> "plt.Figure":
    """Small multiples: the most frequent lower-cased tokens per corpus (``tokens``: a DataFrame with
    corpus, rank, token, count)."""
    corpora = list(dict.fromkeys(tokens["corpus"])) if len(tokens) else []
    n = max(1, len(corpora))
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.4 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    rows: List[Dict[str, Any]] = []
    for ax, corpus in zip(axes.flat, corpora):
        sub = tokens[tokens["corpus"] == corpus].sort_values("rank").head(top)
        rows += _frame_rows(sub[["corpus", "rank", "token", "count"]])
        ax.barh(list(range(len(sub)))[::-1], sub["count"], color="#4c72b0")
        ax.set_yticks(list(range(len(sub)))[::-1])
        ax.set_yticklabels(sub["token"], fontsize=5)
        ax.set_title(corpus, fontsize=7)
        ax.tick_params(axis="x", labelsize=5)
    fig.tight_layout()
    return _save(fig, stem, rows, _info(f"Most frequent lower-cased tokens per corpus (top {top})", "10b_concept_coverage",
                                        "plot_top_tokens"))


def plot_domains(domains: Any, stem: Path, top: int = 12) -> "plt.Figure":
    """Web-domain (site) shares per corpus with URLs."""
    corpora = list(dict.fromkeys(domains["corpus"])) if len(domains) else []
    n = max(1, len(corpora))
    fig, axes = plt.subplots(1, n, figsize=(3.4 * n, 2.8), squeeze=False)
    if not corpora:
        axes[0][0].text(0.5, 0.5, "no URLs in the configured corpora", ha="center", va="center", fontsize=8)
        axes[0][0].axis("off")
    rows: List[Dict[str, Any]] = []
    for ax, corpus in zip(axes[0], corpora):
        sub = domains[domains["corpus"] == corpus].head(top)
        rows += _frame_rows(sub)
        ax.barh(list(range(len(sub)))[::-1], sub["share"], color="#8172b2")
        ax.set_yticks(list(range(len(sub)))[::-1])
        ax.set_yticklabels(sub["site"], fontsize=5)
        urls = int(sub["urls"].iloc[0]) if len(sub) else 0
        sites = int(sub["distinct_sites"].iloc[0]) if len(sub) else 0
        ax.set_title(f"{corpus} ({urls:,} URLs, {sites:,} sites)", fontsize=7)
        ax.set_xlabel("share of URLs", fontsize=6)
        ax.tick_params(labelsize=5)
    fig.tight_layout()
    return _save(fig, stem, rows, _info(f"Web-domain (site) shares of URLs per corpus (top {top})", "10b_concept_coverage",
                                        "plot_domains"))


__all__ = ["plot_funnels", "plot_coverage_curves", "plot_top_tokens", "plot_domains"]
