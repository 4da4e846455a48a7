"""The human-verification report: judge–human agreement and corrected-support rows (written for the
paper to render, ``paper.tables_human``) and the quoted numbers of the simulated demo."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from capaudit.summaries.agreement import JudgeAgreement
from capaudit.summaries.table_rows import write_table_rows

AGREEMENT_TABLE = "human_judge_agreement"
CORRECTED_TABLE = "human_corrected_support"


def agreement_rows(agreement: Mapping[str, JudgeAgreement], labels: str) -> List[Dict[str, Any]]:
    """Table rows: per judge, ``all`` then each surface group (estimate, percentile interval,
    bootstrap mean and std, records, image clusters, resamples, seed); ``labels`` names the annotators."""
    rows = []
    for j, a in agreement.items():
        for g, iv in [("all", a.overall)] + [(x.surface_group, x) for x in a.by_surface]:
            rows.append({"judge": j, "surface_group": g, "estimate": iv.estimate, "lower": iv.lower, "upper": iv.upper,
                         "bootstrap_mean": iv.bootstrap_mean, "bootstrap_std": iv.bootstrap_std,
                         "n_records": iv.n_records, "n_clusters": iv.n_clusters, "n_resamples": iv.n_resamples,
                         "seed": iv.seed, "labels": labels})
    return rows


def write_report_rows(agreement: Sequence[Mapping[str, Any]], corrected: Sequence[Mapping[str, Any]], artifacts: Path,
                      simulated: bool, inputs: Sequence[str] = ()) -> Dict[str, Path]:
    """``artifacts/tables/human_judge_agreement.json`` (:func:`agreement_rows`) and
    ``artifacts/tables/human_corrected_support.json`` (flat rows of
    :func:`capaudit.human.corrected.corrected_support`)."""
    meta = {"simulated": simulated}
    return {
        "agreement": write_table_rows(artifacts, AGREEMENT_TABLE, "human", agreement, function=f"{__name__}.agreement_rows",
                                      inputs=inputs, meta=meta),
        "corrected": write_table_rows(artifacts, CORRECTED_TABLE, "human", corrected,
                                      function="capaudit.human.corrected.corrected_support", inputs=inputs, meta=meta),
    }


def camel(name: str) -> str:
    """``capaudit-offline-annotation-judge`` → ``CapauditOfflineAnnotationJudge`` (a macro-name word)."""
    return "".join(w.capitalize() for w in re.split(r"[^A-Za-z]+", name) if w) or "Judge"


def demo_numbers(items: int, judgments: int, agreement: Mapping[str, JudgeAgreement]) -> Dict[str, Dict[str, Any]]:
    """The simulated demo's quoted numbers (fragment ``human``): items, judgments, each judge's overall agreement."""
    numbers: Dict[str, Dict[str, Any]] = {
        "HumanSimItems": {"value": items, "format": "int",
                          "description": "items in the simulated demo human-verification study"},
        "HumanSimJudgments": {"value": judgments, "format": "int",
                              "description": "judgments written by simulated annotators (demo only)"},
    }
    for j, a in agreement.items():
        numbers[f"HumanSimAgreement{camel(j)}"] = {
            "value": a.overall.estimate, "format": "num:2",
            "description": f"weighted judge-human exact agreement of {j} with SIMULATED annotators "
                           f"(95% interval {a.overall.lower:.2f}-{a.overall.upper:.2f}; demo only)"}
    return numbers


__all__ = ["AGREEMENT_TABLE", "CORRECTED_TABLE", "agreement_rows", "camel", "demo_numbers", "write_report_rows"]
