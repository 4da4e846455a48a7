"""Judges-stage reports: the summary table's rows, the quoted numbers and the notebook's frames."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.summaries.cells import CellsFile
from capaudit.summaries.vqa_layout import VqaLayout

from .stage_params import JudgeSpec


def summary_rows(cells: CellsFile, layout: VqaLayout) -> List[Dict[str, Any]]:
    """One row per cell: judge (label, backend), surface (label, role), counts, rates and stds."""
    out = []
    for c in cells.cells:
        j = layout.judge(c.judge)
        s = layout.slice(c.slice).surface(c.surface)
        a = c.all_types
        out.append({"slice": c.slice, "judge": c.judge, "judge_label": j.label, "backend": j.backend,
                    "surface": c.surface, "surface_label": s.label, "role": s.role,
                    "claimed_cbu_per_cap": (s.claimed or {}).get("cbu_per_cap"),
                    "responses": a.responses, "questions": a.questions, "yes": a.yes, "no": a.no,
                    "uncertain": a.uncertain, "supported_cap": a.supported_cap, "supported_cap_std": a.supported_cap_std,
                    "risk": a.risk, "risk_std": a.risk_std, "uncertain_rate": a.uncertain_rate})
    return out


def write_summary_rows(rows: List[Dict[str, Any]], artifacts: Path, judges: Sequence[JudgeSpec],
                       inputs: Sequence[str] = (), prompt_versions: Sequence[str] = (),
                       kinds: Optional[Mapping[str, Sequence[str]]] = None) -> Path:
    """The summary table's rows (``artifacts/tables/judges_summary.json``; ``paper.tables_judges``
    renders it): one row per (slice, judge, surface) cell, which judges are stand-ins and the kinds of
    the model cards that answered each (``kinds``), and the prompt versions of the judges' requests
    (the model-facing text)."""
    from capaudit.summaries.table_rows import write_table_rows

    return write_table_rows(artifacts, "judges_summary", "judges", rows, function=f"{__name__}.summary_rows",
                            inputs=inputs, meta={"offline_judges": [j.name for j in judges if j.offline],
                                  "judge_kinds": {j.name: list((kinds or {}).get(j.name, ())) for j in judges},
                                  "prompt_versions": list(prompt_versions)})


def judges_numbers(captions: int, questions: int, failures: int, bad: int,
                   judges: Sequence[JudgeSpec]) -> Dict[str, Dict[str, Any]]:
    """The stage's quoted numbers (fragment ``judges``)."""
    return {
        "JudgesCaptions": {"value": captions, "format": "int",
                           "description": "captions answered by every judge (all judged slices)"},
        "JudgesQuestions": {"value": questions, "format": "int",
                            "description": f"judged questions (raw claims) of those captions, {judges[0].name}"},
        "JudgesImageFailures": {"value": failures, "format": "int",
                                "description": "captions not judged: image missing or unreadable"},
        "JudgesBadResponses": {"value": bad, "format": "int",
                               "description": "judge responses failed or with ids not matching their questions"},
        "JudgesNames": {"value": [j.label for j in judges], "format": "list",
                        "description": "the judges of this run"},
    }


def agreement_frame(cells: CellsFile) -> Any:
    """Exact judge agreement per slice (rows) and claim type (columns), with ``joined`` counts."""
    import pandas as pd

    rows = []
    for sl, ag in cells.judge_agreement.items():
        for t, a in ag.by_type.items():
            rows.append({"slice": sl, "judges": " vs ".join(ag.judges), "type": t, "joined": a.joined, "exact": a.exact,
                         "exact_rate": a.exact_rate})
    return pd.DataFrame(rows)


def extraction_frame(cells: CellsFile) -> Any:
    """Extraction accounting per slice and surface."""
    import pandas as pd

    return pd.DataFrame([{"slice": sl, "surface": n, **e.to_dict()} for sl, block in cells.extraction.items()
                         for n, e in block.items()])


__all__ = ["agreement_frame", "extraction_frame", "judges_numbers", "summary_rows", "write_summary_rows"]
