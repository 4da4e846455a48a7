"""Claims → judge questions (reference-spec §5.1).

Only ok claim responses with a non-empty ``claimed_units`` list reach the judge. Every raw unit (no
dedup) becomes one question with id ``<caption_id>:u<index:04d>``, ``index`` being the unit's
position in the raw list, and one of the three templates verbatim (unit and target stripped, no
escaping of quotes):

* ``text_rendering``: ``Is the rendered text claim '<UNIT>' visibly supported by the image?``
* non-empty target: ``Is the visual claim '<TARGET>: <UNIT>' supported by the image?``
* empty target: ``Is the visual claim '<UNIT>' supported by the image?``

A list item that is not an object with a known category and a non-empty string unit gets no
question but keeps its index (the schema-validated answers of our extractor never contain one).
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, NamedTuple, Optional, Tuple

from capaudit.summaries.categories import UNIT_CATEGORIES



def _template(category: str, unit: str, target: str) -> str:
    """The §5.1 question for stripped ``unit``/``target`` (f-strings: on the build's hot path)."""
    if category == "text_rendering":
        return f"Is the rendered text claim '{unit}' visibly supported by the image?"
    if target:
        return f"Is the visual claim '{target}: {unit}' supported by the image?"
    return f"Is the visual claim '{unit}' supported by the image?"


# the same templates as format strings
TEXT_TEMPLATE = _template("text_rendering", "{unit}", "")
TARGET_TEMPLATE = _template("object", "{unit}", "{target}")
PLAIN_TEMPLATE = _template("object", "{unit}", "")
_CATS = frozenset(UNIT_CATEGORIES)
_TEXT_RE = re.compile(r"^Is the rendered text claim '(?P<unit>.*)' visibly supported by the image\?$", re.S)
_VISUAL_RE = re.compile(r"^Is the visual claim '(?P<body>.*)' supported by the image\?$", re.S)
_QID_RE = re.compile(r"^(?P<cid>.*):u(?P<idx>\d{4,})$")


class Question(NamedTuple):
    """One judge question and the claim it came from."""

    question_id: str
    category: str
    question: str
    unit: str
    target: str
    span: str
    index: int

    def public(self) -> dict:
        """The item sent to the judge: ``{question_id, category, question}``."""
        return {"question_id": self.question_id, "category": self.category, "question": self.question}


def question_id(caption_id: str, index: int) -> str:
    """``<caption_id>:u<index:04d>``."""
    return f"{caption_id}:u{index:04d}"


def split_question_id(qid: str) -> Tuple[str, int]:
    """``(caption_id, index)`` of a question id; ``ValueError`` if it has no ``:uNNNN`` suffix."""
    m = _QID_RE.match(qid)
    if not m:
        raise ValueError(f"question id {qid!r} does not end in ':u<index>'")
    return m.group("cid"), int(m.group("idx"))


def question_text(category: str, unit: str, target: str = "") -> str:
    """The §5.1 template for a claim."""
    return _template(category, unit.strip(), target.strip())


def parse_question_text(category: str, text: str) -> Tuple[str, str]:
    """``(unit, target)`` read back from a templated question (target ``""`` when absent).

    The target is the text before the first ``": "`` of a visual claim; a question that matches no
    template is returned as its whole text with an empty target.
    """
    m = _TEXT_RE.match(text)
    if m:
        return m.group("unit"), ""
    m = _VISUAL_RE.match(text)
    if not m:
        return text, ""
    body = m.group("body")
    if ": " in body:
        target, unit = body.split(": ", 1)
        return unit, target
    return body, ""


def _s(v: Any) -> str:
    return v.strip() if isinstance(v, str) else ""


#: ``:u<index:04d>`` suffixes of the first question indices (question ids are built per request)
_SUFFIX = tuple(f":u{i:04d}" for i in range(1000))
_new_question = tuple.__new__


def questions_from_units(caption_id: str, claimed_units: Any) -> List[Question]:
    """Questions for one caption's raw ``claimed_units`` list (module docstring)."""
    if not isinstance(claimed_units, list):
        return []
    out: List[Question] = []
    cats = _CATS
    suffix = _SUFFIX
    cid = f"{caption_id}"
    for i, item in enumerate(claimed_units):
        if not isinstance(item, dict):
            if not isinstance(item, Mapping):
                continue
            item = dict(item)
        cat = item.get("category")
        unit = item.get("unit")
        if cat not in cats or not isinstance(unit, str):
            continue
        unit = unit.strip()
        if not unit:
            continue
        target = item.get("target")
        target = target.strip() if isinstance(target, str) else ""
        span = item.get("span")
        out.append(_new_question(Question, (cid + suffix[i] if i < 1000 else f"{cid}:u{i:04d}", cat,
                                            _template(cat, unit, target), unit,
                                            target, span.strip() if isinstance(span, str) else "", i)))
    return out


def question_parents(claimed_units: Any, questions: List[Question]) -> Tuple[Optional[List[List[int]]], int]:
    """``(parents per question, links dropped)`` from the units' optional ``parents`` (claims
    schema with parent links): raw unit indices of **object** questions of the same caption, the
    unit itself excluded; a link to anything else is dropped and counted. ``None`` when no unit
    has a kept link (the request then carries no ``meta.parents``)."""
    if not isinstance(claimed_units, list) or not questions:
        return None, 0
    objects = {q.index for q in questions if q.category == "object"}
    out: List[List[int]] = []
    dropped = 0
    for q in questions:
        item = claimed_units[q.index]
        raw = item.get("parents") if isinstance(item, Mapping) else None
        kept: List[int] = []
        if isinstance(raw, list):
            for p in raw:
                if isinstance(p, int) and not isinstance(p, bool) and p in objects and p != q.index and p not in kept:
                    kept.append(p)
                else:
                    dropped += 1
        out.append(kept)
    return (out if any(out) else None), dropped


def span_offsets(window: str, span: str, unit: str) -> Optional[List[int]]:
    """``[start, end]`` of the first case-insensitive occurrence of ``span`` (else of ``unit``) in
    ``window``; ``None`` when neither occurs (judged-claims table, COMMON.md)."""
    for needle in (span, unit):
        n = needle.strip()
        if n:
            m = re.search(re.escape(n), window, re.IGNORECASE)
            if m:
                return [m.start(), m.end()]
    return None


__all__ = ["Question", "TEXT_TEMPLATE", "TARGET_TEMPLATE", "PLAIN_TEMPLATE", "question_id", "split_question_id",
           "question_text", "parse_question_text", "questions_from_units", "question_parents", "span_offsets"]
