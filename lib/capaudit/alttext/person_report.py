"""Span-level precision and recall of each pipeline's ``<PERSON>`` substitution on the hand-labelled
person names (``alttext.filters.person_labels``), for its name filter and for ``ner_only`` (the before)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

PERSON_NOTE = ("person substitution scored on hand-labelled gold person-name spans (alttext/data/person_labels.yaml, "
               "200 stratified rows of the raw alt-text sample; tune/held_out halves); span-level precision = "
               "matched substituted spans / substituted spans, recall = matched gold spans / gold spans, match rule "
               "{match}; name filter ner_only = every spaCy PERSON entity with a PROPN token (first-shipped), "
               "name_shape = person_filters.yaml rules (trim, digits, product/shop nouns, common words) designed on "
               "the tune half only")


def person_substitution_rows(pipes: Mapping[str, Any], labels: str, match: str) -> List[Dict[str, Any]]:
    """One row per pipeline, person-substitution block, name filter (``ner_only`` and the block's)
    and split; ``labels`` is ``shipped`` or a labels file."""
    from .person import evaluate_person_substitution

    path: Optional[str] = None if labels == "shipped" else str(labels)
    rows: List[Dict[str, Any]] = []
    for pname, pipe in pipes.items():
        for b in pipe.blocks:
            if b.type != "person_substitution":
                continue
            for nf in dict.fromkeys(["ner_only", str(b.name_filter)]):
                for r in evaluate_person_substitution(path, name_filter=nf, match_rule=match):
                    rows.append({"pipeline": pname, "block": b.name, "chosen": nf == b.name_filter, **r})
    return rows


__all__ = ["PERSON_NOTE", "person_substitution_rows"]
