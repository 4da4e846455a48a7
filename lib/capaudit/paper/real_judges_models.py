"""Table models of the "real judges, real people" tables (:mod:`.real_judges` prints their LaTeX).

Same rows as the ``.tex`` (the stage summary's rows, with the printed labels and statuses beside the
raw values), caveat "published answers": the answers are the DSG release's, imported, no model ran.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence

from .element_models import dotted
from .stage_tables import columns
from .table_model import Provenance, Table

SUMMARY = "artifacts/real_judges/summary.json"
SOURCE = "source: DSG release (j-min/DSG 7330119a): real VQA answers and TIFA160 Likert ratings; no model run here"
QSET = {"tifa": "TIFA", "vq2a": "VQ²A", "dsg": "DSG", "dsg_no_dependency": "DSG w/o dep."}
CATEGORY = {"tifa": "TIFA160", "paragraph": "Paragraph", "relation": "Relation", "count": "Count",
            "real_user": "Real users", "pose": "Pose", "defying": "Defying", "text": "Text", "all": "All"}


def _provenance(summary: Mapping[str, Any], function: Callable[..., Any]) -> Provenance:
    source = summary.get("source")
    return Provenance(element="real_judges", files=(SUMMARY,), notebook="paper_real_judges", function=dotted(function),
                      inputs=(str(source),) if source else ())


def _table(table_id: str, title: str, cols: Any, rows: List[Dict[str, Any]], notes: Sequence[str],
           summary: Mapping[str, Any], function: Callable[..., Any]) -> Table:
    return Table(id=table_id, title=title, axis="real_judges", columns=cols, rows=rows,
                 provenance=_provenance(summary, function), notes=(SOURCE, *notes), caveats=("published answers",))


def correlation_model(summary: Mapping[str, Any], function: Callable[..., Any]) -> Table:
    """VQA score vs mean Likert rating: Spearman and Kendall, ours and published, reproduced or why not."""
    rows = [{**r, "questions": QSET.get(r["question_set"], r["question_set"]),
             "status": "✓" if r["equal"] else ("no answer key" if not r["reproducible"] else "differs")}
            for r in summary["reproduction"]["correlation"]]
    cols = columns(("vqa", "VQA", "text"), ("questions", "Questions", "text"), ("spearman", "Spearman, ours", "num", 3),
                   ("published_spearman", "Spearman, DSG", "num", 3), ("kendall", "Kendall, ours", "num", 3),
                   ("published_kendall", "Kendall, DSG", "num", 3), ("status", "Same", "text"))
    return _table("real_judges_correlation", "DSG human correlation, reproduced", cols, rows,
                  ("recomputed with capaudit judges import / item-scores / correlate --missing zero "
                   "(DSG rows: --dependency on --dsg-script-quirks)",), summary, function)


def dsg1k_model(summary: Mapping[str, Any], function: Callable[..., Any]) -> Table:
    """PaLI-17B's DSG-1k score per prompt category, ours and published (percent)."""
    rows = [{**r, "label": CATEGORY.get(r["category"], r["category"]), "status": "✓" if r["equal"] else "differs"}
            for r in summary["reproduction"]["dsg1k"]]
    cols = columns(("label", "Category", "text"), ("items", "Images", "int"), ("score", "Ours", "num", 2, {"unit": "%"}),
                   ("published_score", "Published", "num", 1, {"unit": "%"}), ("status", "Same", "text"))
    return _table("real_judges_dsg1k", "DSG-1k scores, reproduced", cols, rows,
                  ("PaLI-17B on SD2.1 images, DSG questions, dependency on (DSG's scripts' quirks)",), summary, function)


def agreement_model(summary: Mapping[str, Any], function: Callable[..., Any]) -> Table:
    """Agreement of the three VQA models per DSG category: all agree, Fleiss' κ, AC1, Krippendorff's α."""
    agreement = summary["agreement"]
    slice_ = next(iter(agreement["all_judges"].values()))
    by = slice_["by_type"]
    rows = [{"category": "all" if cat == "__all__" else cat.replace("_", " "),
             **{k: v for k, v in by[cat].items() if k != "pairs"}}
            for cat in ["__all__"] + sorted(k for k in by if k != "__all__")]
    cols = columns(("category", "Category", "text"), ("questions", "Questions", "int"),
                   ("exact_all_rate", "All agree", "num", 3), ("fleiss_kappa", "Fleiss κ", "num", 3),
                   ("gwet_ac1", "AC1", "num", 3), ("krippendorff_alpha", "Krippendorff α", "num", 3))
    return _table("real_judges_agreement", "Agreement of three real VQA judges", cols, rows,
                  (f"judges: {', '.join(slice_['judges'])}; {agreement['images']} images answered by all",),
                  summary, function)


def yes_rates_model(summary: Mapping[str, Any], function: Callable[..., Any]) -> Table:
    """Per DSG category: questions and each judge's yes share (uncertain answers in the denominator)."""
    src = summary["yes_rates"]
    judges = list(dict.fromkeys(r["judge"] for r in src))
    cats = list(dict.fromkeys(r["category"] for r in src))
    by = {(r["judge"], r["category"]): r for r in src}
    rows = [{"category": "all" if c == "__all__" else c, "questions": by[(judges[0], c)]["questions"],
             **{f"yes_rate {j}": by[(j, c)]["yes_rate"] if (j, c) in by else None for j in judges}} for c in cats]
    cols = columns(("category", "Category", "text"), ("questions", "Questions", "int"),
                   *((f"yes_rate {j}", j, "num", 3) for j in judges))
    return _table("real_judges_yes_rates", "Yes-rates of real VQA judges", cols, rows,
                  ("yes share of all questions (answers outside yes/no kept as uncertain)",), summary, function)


def coverage_model(summary: Mapping[str, Any], function: Callable[..., Any]) -> Table:
    """Per text-to-image model and n: coverage and mean width of PPI++ and human-only 95% intervals."""
    cal = summary["calibration"]
    cols = columns(("group", "Model", "text", {"group": True}), ("n", "n", "int"), ("subsets", "Subsets", "int"),
                   ("ppi_coverage", "PPI coverage", "num", 3), ("human_coverage", "Human coverage", "num", 3),
                   ("ppi_width", "PPI width", "num", 3), ("human_width", "Human width", "num", 3),
                   ("relative_width", "Width ratio", "num", 2))
    return _table("real_judges_coverage", "Calibration with human labels", cols, [dict(r) for r in cal["coverage"]],
                  (f"judge scores: {cal['judge']}; 95% intervals over random labelled subsets per model",),
                  summary, function)


__all__ = ["agreement_model", "correlation_model", "coverage_model", "dsg1k_model", "yes_rates_model"]
