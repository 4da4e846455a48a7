"""Judges-stage tables (reference-spec §5): the per-cell summary."""

from __future__ import annotations

from typing import Any, Mapping

from .stage_tables import builder, columns
from .tables_claims import prompt_note
from .table_model import Table, judge_caveats


@builder("judges_summary", notebook="05_judges")
def judges_summary(data: Mapping[str, Any]) -> Table:
    """One row per (slice, judge, surface) cell: responses, questions, supported CBU/cap ± std, risk
    ± std, uncertain rate; rows grouped by judge."""
    return Table(
        id="judges_summary", title="Judged claims per judge and surface", axis="judges",
        columns=columns(("judge_label", "Judge", "text", {"group": True}), ("surface_label", "Surface", "text"),
                        ("responses", "Responses", "int"), ("questions", "Questions", "int"),
                        ("supported_cap", "Supported CBU/cap", "pm", 2, {"std_key": "supported_cap_std"}),
                        ("risk", "Risk", "pm", 3, {"std_key": "risk_std"}),
                        ("uncertain_rate", "Uncertain", "num", 3)),
        rows=list(data["rows"]), provenance=data["provenance"],
        notes=("judges stage: one row per (slice, judge, surface) cell"
               + prompt_note(data["meta"].get("prompt_versions") or ()),),
        caveats=judge_caveats(data["meta"]))

