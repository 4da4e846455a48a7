"""Published text-statistics summaries (reference-spec §1–2, §14 G9) as the rows of our text stage's
``text_stats`` and ``text_paired_deltas`` tables and of the budget-curve figure.

* ``fair_slices_1m_normalized_*.tsv`` (and further slices such as the URL-fixed LAION-pop TSV): one row
  per (comparison, role) → a ``text_stats`` row: ``avg_tokens`` → Avg lex, ``cov64`` → B-eligibility,
  ``prefix_top100_64`` → content top-100 prefix mass, ``d3_64`` → Distinct-3, ``rep4_64`` → rep-4;
  the opener rate is ``J_meta_statement`` of ``violation_code_breakdown.tsv`` for the same comparison
  and pair count (a slice the breakdown does not cover shows none). Columns the reference does not
  publish (truncation, raw prefix mass, Distinct-1/2, rep-3, duplicates) stay empty.
* ``paired_delta_ci.tsv`` → ``text_paired_deltas`` rows.
* ``cov64``/``cov128``/``cov256`` → B-eligibility budget curves.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.budgets import DEFAULT_BUDGET
from capaudit.errors import InputError

from .layout import BY_COMPARISON
from .reference_inputs import PathLike, integer, number, read_delimited, text

FAIR_COLUMNS = ("comparison", "role", "surface", "records", "avg_tokens", "cov64", "prefix_top100_64", "d3_64",
                "rep4_64")
#: eligibility columns of the fair-slice TSV → budget B
ELIGIBILITY_BUDGETS: Tuple[Tuple[str, int], ...] = (("cov64", 64), ("cov128", 128), ("cov256", 256))
VIOLATION_COLUMNS = ("comparison", "records", "code", "local_rate", "reference_rate")
OPENER_CODE = "J_meta_statement"
DELTA_COLUMNS = ("comparison", "records", "metric", "delta_mean_local_minus_reference", "ci95_low", "ci95_high")
BUDGET = DEFAULT_BUDGET


def comparison_label(comparison: str) -> str:
    """The printed name of a paired comparison (its id when the layout does not know it)."""
    p = BY_COMPARISON.get(comparison)
    return p.label if p else comparison


def opener_rates(path: PathLike) -> Dict[Tuple[str, int, str], float]:
    """``J_meta_statement`` rate at B=64 per (comparison, pairs, role) of ``violation_code_breakdown.tsv``."""
    out: Dict[Tuple[str, int, str], float] = {}
    for row in read_delimited(path, VIOLATION_COLUMNS):
        if text(path, row, "code") != OPENER_CODE:
            continue
        key = (text(path, row, "comparison"), integer(path, row, "records"))
        out[(*key, "local")] = number(path, row, "local_rate")
        out[(*key, "reference")] = number(path, row, "reference_rate")
    return out


def text_stats_rows(slices: Sequence[Tuple[Optional[str], PathLike]],
                    violations: Optional[PathLike] = None) -> List[Dict[str, Any]]:
    """``text_stats`` rows (B=64) of every (comparison, role) of the fair-slice TSVs; ``slices`` are
    (label prefix or None for the comparison's name, path)."""
    openers = opener_rates(violations) if violations is not None else {}
    out: List[Dict[str, Any]] = []
    for label, path in slices:
        for row in read_delimited(path, FAIR_COLUMNS):
            comparison, role = text(path, row, "comparison"), text(path, row, "role")
            if role not in ("local", "reference"):
                raise InputError(f"expected local or reference, got {role!r}", path=path, line=row[0], field="role")
            records = integer(path, row, "records")
            b = BUDGET
            r: Dict[str, Any] = {
                "surface": f"{label or comparison_label(comparison)}: {text(path, row, 'surface')}",
                "records": records, "avg_lex": number(path, row, "avg_tokens"),
                f"elig{b}": number(path, row, "cov64"), f"trunc{b}": None,
                f"opener{b}": openers.get((comparison, records, role)),
                f"prefix_raw{b}": None, f"prefix_content{b}": number(path, row, "prefix_top100_64"),
                f"d1_{b}": None, f"d2_{b}": None, f"d3_{b}": number(path, row, "d3_64"),
                f"rep3_{b}": None, f"rep4_{b}": number(path, row, "rep4_64"), "dup_rate": None,
                f"prefix_note{b}": "",
                "comparison": comparison, "role": role, "source": str(path),
            }
            out.append(r)
    return out


def eligibility_curves(slices: Sequence[Tuple[Optional[str], PathLike]]) -> Dict[str, Dict[str, Any]]:
    """Budget-curve input (:func:`capaudit.paper.text_figures.plot_budget_curves`): per surface, the
    B-eligibility at every budget the fair-slice TSVs publish (only eligibility: the other curves are
    published at B=64 alone)."""
    out: Dict[str, Dict[str, Any]] = {}
    for label, path in slices:
        rows = read_delimited(path, FAIR_COLUMNS)
        header = rows[0][1].keys()
        for row in rows:
            name = f"{label or comparison_label(text(path, row, 'comparison'))}: {text(path, row, 'surface')}"
            out[name] = {"budgets": {str(b): {"eligibility": number(path, row, col)}
                                     for col, b in ELIGIBILITY_BUDGETS if col in header}}
    return out


def paired_delta_rows(path: PathLike) -> List[Dict[str, Any]]:
    """``text_paired_deltas`` rows of ``paired_delta_ci.tsv``: per comparison and metric, pairs, mean
    paired delta (local − reference) and its normal 95% interval, as published."""
    out = []
    for row in read_delimited(path, DELTA_COLUMNS):
        comparison = text(path, row, "comparison")
        out.append({"comparison": comparison_label(comparison), "metric": text(path, row, "metric"),
                    "pairs": integer(path, row, "records"),
                    "delta_mean": number(path, row, "delta_mean_local_minus_reference"),
                    "ci95_low": number(path, row, "ci95_low"), "ci95_high": number(path, row, "ci95_high"),
                    "comparison_id": comparison})
    return out


def window_definition(meta: Mapping[str, Any]) -> str:
    """The window line of the reference's text table (from ``paper.reference_meta.text``)."""
    return str(meta.get("window_definition", "the reference survey's B-lex window (reference-spec 1.2)"))


__all__ = ["comparison_label", "eligibility_curves", "opener_rates", "paired_delta_rows", "text_stats_rows",
           "window_definition"]
