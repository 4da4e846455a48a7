"""Figures of the judges stage: the yes-bias probe (matplotlib; PDF + PNG + CSV of the plotted values).

Per perturbation type (and all types), per judge: the false-yes rate on claims that appear only in
the SugarCrepe hard negative (false by construction) beside the yes rate on claims of the true
caption, with 95 % pair-bootstrap intervals (:mod:`capaudit.judges.probe`). Judge labels come from
the probe rows, so offline judges say "offline" in the legend and the title.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .figure_files import FigureInfo  # noqa: E402
from .figures import COLUMN_WIDTH_IN, MARKERS, PALETTE, STYLE, _save  # noqa: E402


def plot_yes_bias(rows: Sequence[Any], out_dir: Path, name: str = "yes_bias_probe") -> Dict[str, Path]:
    """Dot-and-interval plot of :class:`capaudit.judges.probe.ProbeRow` rows (one panel)."""
    judges = list(dict.fromkeys(r.judge for r in rows))
    types = list(dict.fromkeys(r.perturbation for r in rows))
    labels = {r.judge: r.judge_label for r in rows}
    offline = any(r.backend == "offline" for r in rows)
    width = 0.8 / max(1, len(judges))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN * 2, 2.4))
        for ji, j in enumerate(judges):
            color = PALETTE[ji % len(PALETTE)]
            for ti, t in enumerate(types):
                r = next((x for x in rows if x.judge == j and x.perturbation == t), None)
                if r is None:
                    continue
                x = ti - 0.4 + width * (ji + 0.5)
                ax.errorbar(x - width * 0.18, r.true_yes, yerr=[[r.true_yes - r.true_yes_lower], [r.true_yes_upper - r.true_yes]],
                            fmt=MARKERS[ji % len(MARKERS)], color=color, markersize=4, elinewidth=0.8, capsize=1.5,
                            label=f"{labels[j]}: yes on true claims" if ti == 0 else None)
                ax.errorbar(x + width * 0.18, r.false_yes,
                            yerr=[[r.false_yes - r.false_yes_lower], [r.false_yes_upper - r.false_yes]],
                            fmt=MARKERS[ji % len(MARKERS)], color=color, markerfacecolor="white", markersize=4,
                            elinewidth=0.8, capsize=1.5,
                            label=f"{labels[j]}: false yes on negative-only claims" if ti == 0 else None)
        ax.set_xticks(range(len(types)))
        ax.set_xticklabels([t.replace("_", " ") + (f"\n(n={next(r.pairs for r in rows if r.perturbation == t)} pairs)")
                            for t in types])
        ax.set_ylabel("yes rate")
        ax.set_ylim(0, 1)
        ax.legend(loc="upper left", frameon=False, fontsize=5)
        title = "yes-bias probe: SugarCrepe hard negatives on COCO-MINI, 95% pair-bootstrap intervals"
        ax.set_title(title + (" (offline judges, not VLMs)" if offline else ""), fontsize=6)
        info = FigureInfo("Yes-bias probe: yes on true claims vs false yes on negative-only claims (SugarCrepe), "
                          "95% pair-bootstrap intervals", "judges", "05b_yes_bias_probe", f"{__name__}.plot_yes_bias",
                          ("offline judges",) if offline else ())
        return _save(fig, out_dir, name, list(rows), info)
