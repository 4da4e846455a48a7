"""Recap-stage tables: the recaptioned surfaces, one row per captioning policy."""

from __future__ import annotations

from typing import Any, Mapping

from .stage_tables import builder, columns
from .table_model import Table, stand_in_caveats


@builder("recap_summary", notebook="06_recap")
def recap_summary(data: Mapping[str, Any]) -> Table:
    """Surface, policy, images captioned and failed, mean words, mean and median lex, share of
    distinct captions; the note names the captioner(s)."""
    meta = data["meta"]
    return Table(
        id="recap_summary", title="Recaptioned surfaces", axis="recap",
        columns=columns(("surface", "Surface", "text"), ("policy", "Policy", "text"),
                        ("captioned", "Captioned", "int"), ("failed", "Failed", "int"),
                        ("mean_words", "Mean words", "num", 1), ("mean_lex", "Mean lex", "num", 1),
                        ("median_lex", "Median lex", "num", 0), ("distinct_caption_rate", "Distinct", "num", 2)),
        rows=list(data["rows"]), provenance=data["provenance"],
        notes=(f"recaptioned surfaces; captioner: {'; '.join(meta.get('captioners', []))}",),
        caveats=stand_in_caveats("captioner", meta.get("captioner_kinds") or (), bool(meta.get("offline_captioner"))))


__all__ = ["recap_summary"]
