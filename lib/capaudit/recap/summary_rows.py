"""The recap stage's summary: one row per policy (table rows for the paper) and its quoted numbers."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Dict, Mapping, Sequence

from capaudit.llm.cards import any_stand_in, card_kinds, cards_label
from capaudit.summaries.table_rows import write_table_rows

from .policies import Policy

TABLE = "recap_summary"


def summary_row(policy: Policy, surface: str, model: str, captioned: int, failed: int, captions: Sequence[str],
                asked: int, answered_earlier: int, cards: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """One policy's row: images, captioned and failed, caption length in words and lexical units,
    share of distinct captions; the length and distinctness figures are None without captions.
    ``cards``: who answered (:func:`capaudit.llm.store.answered_by` of the policy's store): the
    ``backend`` label, the ``stand_in`` flag and the cards' ``kinds``."""
    from capaudit.text.lexical import lex_count

    words = [len(c.split()) for c in captions]
    lex = [lex_count(c) for c in captions]
    return {
        "surface": surface, "policy": policy.name, "policy_version": policy.version,
        "prompt_version": policy.prompt_version, "model": model, "backend": cards_label(cards, model),
        "stand_in": any_stand_in(cards), "kinds": card_kinds(cards),
        "images": captioned + failed, "captioned": captioned, "failed": failed,
        "mean_words": round(statistics.fmean(words), 2) if words else None,
        "mean_lex": round(statistics.fmean(lex), 2) if lex else None,
        "median_lex": float(statistics.median(lex)) if lex else None,
        "distinct_caption_rate": round(len(set(captions)) / len(captions), 4) if captions else None,
        "asked_this_run": asked, "answered_earlier": answered_earlier,
    }


def write_summary_rows(rows: Sequence[Mapping[str, Any]], artifacts: Path, inputs: Sequence[str] = ()) -> Path:
    """``artifacts/tables/recap_summary.json`` (``paper.tables_recap`` renders it); meta: the captioners."""
    return write_table_rows(artifacts, TABLE, "recap", rows, function=f"{__name__}.summary_row", inputs=inputs,
                            meta={"captioners": sorted({str(r["backend"]) for r in rows}),
                                  "offline_captioner": any(r.get("stand_in") for r in rows),
                                  "captioner_kinds": sorted({str(k) for r in rows for k in r.get("kinds") or ()})})


def recap_numbers(rows: Sequence[Mapping[str, Any]], policies: int, label: str) -> Dict[str, Dict[str, Any]]:
    """The stage's quoted numbers (fragment ``recap``): policies run, images captioned under the
    first policy, images left without a caption (all policies)."""
    numbers: Dict[str, Dict[str, Any]] = {
        "RecapPolicies": {"value": policies, "format": "int",
                          "description": f"captioning policies run by the recap stage ({label})"}}
    if rows:
        numbers["RecapCaptionedImages"] = {"value": int(rows[0]["captioned"]), "format": "int",
                                           "description": f"images captioned under {rows[0]['policy']} ({label})"}
        numbers["RecapFailedImages"] = {"value": int(sum(r["failed"] for r in rows)), "format": "int",
                                        "description": "images with no caption, all policies"}
    return numbers


__all__ = ["TABLE", "recap_numbers", "summary_row", "write_summary_rows"]
