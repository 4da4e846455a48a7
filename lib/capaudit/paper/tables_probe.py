"""The yes-bias probe's table: false yes on negative-only claims vs yes on true claims, per judge
and SugarCrepe perturbation type."""

from __future__ import annotations

from typing import Any, Mapping

from .shown_cells import estimate_interval_text, stage_keys
from .stage_tables import builder, columns
from .table_model import Table, judge_caveats


@builder("yes_bias_probe", notebook="05b_yes_bias_probe")
def yes_bias_probe(data: Mapping[str, Any]) -> Table:
    """Judge (grouped), perturbation, pairs, negative-only claims, false-yes rate [95% CI], true
    claims, yes rate [95% CI]."""
    rows = list(data["rows"])
    shown = [{**r, "perturbation_label": str(r.get("perturbation", "")).replace("_", " "),
              "false_yes_ci": estimate_interval_text(r.get("false_yes"), r.get("false_yes_lower"),
                                                     r.get("false_yes_upper"), 2),
              "true_yes_ci": estimate_interval_text(r.get("true_yes"), r.get("true_yes_lower"),
                                                    r.get("true_yes_upper"), 2)} for r in rows]
    return Table(
        id="yes_bias_probe", title="Yes-bias probe", axis="judges",
        columns=columns(("judge_label", "Judge", "text", {"group": True}), ("perturbation_label", "Perturbation", "text"),
                        ("pairs", "Pairs", "int"), ("negative_only_claims", "Neg.-only claims", "int"),
                        ("false_yes_ci", "False yes [95% CI]", "text"), ("positive_claims", "True claims", "int"),
                        ("true_yes_ci", "Yes [95% CI]", "text")),
        rows=shown, csv_columns=stage_keys(rows), provenance=data["provenance"],
        notes=("yes-bias probe (SugarCrepe x COCO-MINI): false-yes on negative-only claims vs yes on true claims, "
               "95% pair-bootstrap intervals",),
        caveats=judge_caveats(data["meta"]))


__all__ = ["yes_bias_probe"]
