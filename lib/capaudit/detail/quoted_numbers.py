"""The numbers the paper quotes from the detail stage (fragment ``numbers/detail.json``)."""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping, Sequence

#: decimals of each quoted quantity (the tables print them the same way)
MEAN_DECIMALS = (("icr", 3), ("aod", 2), ("cd", 4))
SELECTION_DECIMALS = (("avg_icr", 3), ("avg_aod", 2), ("avg_length", 1))


def number_name(*parts: str) -> str:
    """Letters-only CamelCase macro name: ``("detail", "coco_human", "ICR")`` → ``DetailCocoHumanICR``."""
    return "".join(p[:1].upper() + p[1:] for part in parts for p in re.split(r"[^A-Za-z]+", part) if p)


def detail_numbers(means: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str],
                   icr_by_surface: Mapping[str, str], selection: Sequence[Mapping[str, Any]],
                   icr: Mapping[str, str], relation_ends: str, relation_ends_label: str,
                   backends: Mapping[str, str]) -> Dict[str, Dict[str, Any]]:
    """Surface means, the selected subsets' averages and the definitions (as text); missing values
    are left out."""
    numbers: Dict[str, Dict[str, Any]] = {}
    for name, m in means.items():
        for key, d in MEAN_DECIMALS:
            est = m[key]["estimate"]
            if est is None:
                continue
            what = {"icr": icr_by_surface[name], "aod": f"AOD (relations: {relation_ends})",
                    "cd": f"CD ({icr_by_surface[name]}; relations: {relation_ends})"}[key]
            numbers[number_name("detail", name, key.upper())] = {
                "value": est, "format": f"num:{d}",
                "description": f"mean {what} of surface {labels[name]} ({backends['parser']})"}
    for r in selection:
        for key, d in SELECTION_DECIMALS:
            if r[key] is not None:
                numbers[number_name("detail", "sel", r["strategy"], key)] = {
                    "value": r[key], "format": f"num:{d}",
                    "description": f"{key} of the {r['label']} subset (ITM: {backends['itm']})"}
    for key, text, what in (("IcrKind", icr["kind"], "kind of the ICR the grounding gives (table headers)"),
                            ("IcrName", icr["name"], "name of the ICR the grounding gives"),
                            ("IcrNote", icr["note"], "what the ICR's grounding covers"),
                            ("RelationEnds", relation_ends_label, "AOD/CD relation count")):
        numbers[number_name("detail", key)] = {"value": text, "format": "text", "description": what}
    return numbers


__all__ = ["MEAN_DECIMALS", "SELECTION_DECIMALS", "detail_numbers", "number_name"]
