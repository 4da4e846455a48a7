"""Tables and figure of the "real judges, real people" section, from ``real_judges/summary.json``.

Every table body opens with ``%`` lines naming its source (the DSG release's real VQA answers and
human ratings), read into the caption by ``\\readnote``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from capaudit.io.atomic import write_text_atomic  # noqa: E402
from capaudit.paper.element_models import write_model  # noqa: E402
from capaudit.paper.figure_files import FigureInfo, save_figure_files  # noqa: E402
from capaudit.paper.fmt import tex_escape  # noqa: E402
from capaudit.paper.real_judges_models import CATEGORY  # noqa: E402
from capaudit.paper.real_judges_models import SOURCE as MODEL_SOURCE  # noqa: E402
from capaudit.paper.real_judges_models import (  # noqa: E402
    agreement_model,
    correlation_model,
    coverage_model,
    dsg1k_model,
    yes_rates_model,
)

SOURCE = "% " + MODEL_SOURCE
QSET = {"tifa": "TIFA", "vq2a": "VQ$^2$A", "dsg": "DSG", "dsg_no_dependency": "DSG w/o dep."}


def _f(v: Any, d: int = 3) -> str:
    return "--" if v is None else f"{v:.{d}f}"


def reproduction_tex(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """VQA & question set & Spearman (ours, published) & Kendall (ours, published) & status."""
    lines = [SOURCE, "% recomputed with capaudit judges import / item-scores / correlate --missing zero "
             "(DSG rows: --dependency on --dsg-script-quirks)",
             "% columns: VQA & questions & Spearman ours & published & Kendall ours & published & reproduced"]
    for r in rows:
        status = r"\checkmark" if r["equal"] else ("no answer key" if not r["reproducible"] else "differs")
        lines.append(" & ".join([tex_escape(r["vqa"]), QSET.get(r["question_set"], tex_escape(r["question_set"])),
                                 _f(r["spearman"]), _f(r["published_spearman"]), _f(r["kendall"]),
                                 _f(r["published_kendall"]), status]) + r" \\")
    return write_text_atomic(path, "\n".join(lines) + "\n")


def dsg1k_tex(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Prompt category & items & ours & published (percent)."""
    lines = [SOURCE, "% PaLI-17B on SD2.1 images, DSG questions, dependency on (DSG's scripts' quirks)",
             "% columns: category & images & ours & published & reproduced"]
    for r in rows:
        lines.append(" & ".join([CATEGORY.get(r["category"], tex_escape(r["category"])), str(r["items"]),
                                 f"{r['score']:.2f}", f"{r['published_score']:.1f}",
                                 r"\checkmark" if r["equal"] else "differs"]) + r" \\")
    return write_text_atomic(path, "\n".join(lines) + "\n")


def agreement_tex(agreement: Mapping[str, Any], path: Path) -> Path:
    """Category & questions & all agree & Fleiss' κ & AC1 & Krippendorff's α (three VQA models)."""
    slice_ = next(iter(agreement["all_judges"].values()))
    lines = [SOURCE, f"% judges: {', '.join(slice_['judges'])}; {agreement['images']} images answered by all",
             "% columns: category & questions & all agree & Fleiss kappa & AC1 & alpha"]
    by = slice_["by_type"]
    for cat in ["__all__"] + sorted(k for k in by if k != "__all__"):
        a = by[cat]
        lines.append(" & ".join(["all" if cat == "__all__" else tex_escape(cat.replace("_", " ")), str(a["questions"]),
                                 _f(a["exact_all_rate"]), _f(a["fleiss_kappa"]), _f(a["gwet_ac1"]),
                                 _f(a["krippendorff_alpha"])]) + r" \\")
    return write_text_atomic(path, "\n".join(lines) + "\n")


def yes_rates_tex(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """DSG category & questions & yes-rate of each judge (uncertain counts in the denominator)."""
    judges = list(dict.fromkeys(r["judge"] for r in rows))
    cats = list(dict.fromkeys(r["category"] for r in rows))
    by = {(r["judge"], r["category"]): r for r in rows}
    lines = [SOURCE, "% yes share of all questions (answers outside yes/no kept as uncertain)",
             "% columns: category & questions & " + " & ".join(judges)]
    for c in cats:
        n = by[(judges[0], c)]["questions"]
        lines.append(" & ".join(["all" if c == "__all__" else tex_escape(c), str(n)]
                                + [_f(by[(j, c)]["yes_rate"]) for j in judges]) + r" \\")
    return write_text_atomic(path, "\n".join(lines) + "\n")


def coverage_tex(rows: Sequence[Mapping[str, Any]], judge: str, path: Path) -> Path:
    """Model & n & coverage (PPI, human) & mean width (PPI, human) & width ratio."""
    lines = [SOURCE, f"% judge scores: {judge}; 95% intervals over random labelled subsets per model",
             "% columns: model & n & subsets & PPI coverage & human coverage & PPI width & human width & ratio"]
    for r in rows:
        lines.append(" & ".join([tex_escape(r["group"]), str(r["n"]), str(r["subsets"]), _f(r["ppi_coverage"]),
                                 _f(r["human_coverage"]), _f(r["ppi_width"]), _f(r["human_width"]),
                                 _f(r["relative_width"], 2)]) + r" \\")
    return write_text_atomic(path, "\n".join(lines) + "\n")


def plot_calibration(rows: Sequence[Mapping[str, Any]], stem: Path, level: float) -> Path:
    """Interval width and coverage against n, PPI++ and human-only, one line per model
    (``stem``.pdf/.png, and the plotted rows as .csv)."""
    groups = list(dict.fromkeys(r["group"] for r in rows))
    fig, (aw, ac) = plt.subplots(1, 2, figsize=(7.2, 2.8))
    for g in groups:
        rs = [r for r in rows if r["group"] == g]
        ns = [r["n"] for r in rs]
        line, = aw.plot(ns, [r["ppi_width"] for r in rs], marker="o", label=g)
        aw.plot(ns, [r["human_width"] for r in rs], marker="x", linestyle="--", color=line.get_color())
        ac.plot(ns, [r["ppi_coverage"] for r in rs], marker="o", color=line.get_color())
        ac.plot(ns, [r["human_coverage"] for r in rs], marker="x", linestyle="--", color=line.get_color())
    aw.set_xlabel("human-labelled images per model (n)")
    aw.set_ylabel("mean interval width (Likert points)")
    aw.set_title("width: PPI++ (solid) vs human only (dashed)", fontsize=8)
    ac.axhline(level, color="grey", linewidth=0.8)
    ac.set_ylim(min(0.85, min(min(r["ppi_coverage"], r["human_coverage"]) for r in rows) - 0.01), 1.0)
    ac.set_xlabel("n")
    ac.set_ylabel("coverage of the all-ratings mean")
    ac.set_title(f"coverage (nominal {level:.0%})", fontsize=8)
    aw.legend(fontsize=6)
    fig.suptitle("Real VQA judge (DSG release) corrected with real Likert ratings", fontsize=9)
    fig.tight_layout()
    info = FigureInfo("Calibrating a real VQA judge with real ratings: interval width and coverage against n",
                      "real_judges", "paper_real_judges", f"{__name__}.plot_calibration", ("published answers",))
    paths = save_figure_files(fig, stem.parent, stem.name, rows, info)
    plt.close(fig)
    return paths["png"]


def render(summary: Mapping[str, Any], tables: Path, figures: Path) -> Dict[str, Path]:
    """Every element of the section from the stage summary (each table's model beside its ``.tex``)."""
    cal = summary["calibration"]
    for model, fn in ((correlation_model, reproduction_tex), (dsg1k_model, dsg1k_tex), (agreement_model, agreement_tex),
                      (yes_rates_model, yes_rates_tex), (coverage_model, coverage_tex)):
        write_model(model(summary, fn), tables)
    return {
        "reproduction": reproduction_tex(summary["reproduction"]["correlation"], tables / "real_judges_correlation.tex"),
        "dsg1k": dsg1k_tex(summary["reproduction"]["dsg1k"], tables / "real_judges_dsg1k.tex"),
        "agreement": agreement_tex(summary["agreement"], tables / "real_judges_agreement.tex"),
        "yes_rates": yes_rates_tex(summary["yes_rates"], tables / "real_judges_yes_rates.tex"),
        "coverage": coverage_tex(cal["coverage"], cal["judge"], tables / "real_judges_coverage.tex"),
        "figure": plot_calibration(cal["coverage"], figures / "real_judges_calibration",
                                   float(summary["settings"]["calibration"]["level"])),
    }


__all__ = ["render", "reproduction_tex", "dsg1k_tex", "agreement_tex", "yes_rates_tex", "coverage_tex",
           "plot_calibration"]
