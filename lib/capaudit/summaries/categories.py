"""The category and answer vocabularies the summary schemas share with the stages that write them."""

from __future__ import annotations

#: The eight claim types, in the summarizer's order (reference-spec §4.1 ``UNIT_CATEGORIES``).
UNIT_CATEGORIES = (
    "object",
    "attribute",
    "relation",
    "style",
    "camera",
    "lighting",
    "count",
    "text_rendering",
)
#: The three judge answers (§5.2).
ANSWERS = ("yes", "no", "uncertain")


__all__ = ["UNIT_CATEGORIES", "ANSWERS"]
