"""The claim an annotator reads: the extractor's unit where it renders its caption span faithfully,
else the span itself (issue 21).

An annotator judges what the *caption* says. A unit is an extractor's rewrite of a caption span
(``pants doing trick`` for "pants doing a trick"), and a rewrite can garble it (a lemma: "pant
doing trick") or drop a content word ("person holding in hand" for "person holding a can in their
hand"). :func:`shown_claim` therefore shows

* the unit, when it is **faithful** to its span (:func:`is_faithful`): its words, case-insensitive,
  are the span's words in order, and every span word left out is a function word of the reviewed
  list ``lexicons/claim_function_words.txt`` (articles, determiners, forms of "be"). Its words are
  written as the span writes them ("St. Peter", not "st. peter"). A ``text_rendering`` unit
  ``text "X"`` is faithful when X occurs in the span; it is shown with X as the span spells it
  (rendered text keeps its case).
* otherwise the span, an exact caption substring trimmed to whole words (surrounding spaces and
  ``,;:`` dropped); with no span, the unit as given.

**Target.** ``(about: target)`` is added only where the claim would not say what it is about and
the addition stays readable: the target is not ``scene``, not a style/camera/lighting claim, and its
words are not already in the claim (a plural counts: ``two dogs`` names ``dog``). When the shown
unit lacks the target but its span names it (a unit ``red``, span ``red car``, target ``car``), the
span is shown instead of appending anything, so the claim stays in the caption's words. Only when
neither names it (``text "STOP"`` on a ``sign`` outside the span) is ``(about: target)`` appended:
marked context, not part of the claim, which :func:`is_faithful` leaves out of its check.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from capaudit.lexicons import claim_function_words, singular_candidates

#: a word: letters/digits, joined by an inner apostrophe, hyphen or full stop ("close-up", "3.5")
_WORD = re.compile(r"[^\W_]+(?:['\u2019.\-][^\W_]+)*")
_TEXT_UNIT = re.compile(r'^text\s+"(?P<text>.+)"$', re.DOTALL)
_ABOUT = re.compile(r"\s+\(about: [^()]*\)$")
_TRIM = " \t\r\n,;:"
#: claim types about the whole image: their target is ``scene`` and never shown
_GLOBAL = frozenset(("style", "camera", "lighting"))


def _words(text: str) -> List[Tuple[str, int, int]]:
    """(lower-cased word, start, end) of the words of ``text``."""
    return [(m.group(0).lower(), m.start(), m.end()) for m in _WORD.finditer(text)]


def _align(unit: str, span: str) -> Optional[List[Tuple[int, int]]]:
    """Span character ranges matched by the unit's words in order, when the only span words left
    out are reviewed function words; ``None`` otherwise (or for a unit without words)."""
    uw, sw = _words(unit), _words(span)
    if not uw:
        return None
    skip = claim_function_words()
    out: List[Tuple[int, int]] = []
    i = 0
    for w, s, e in sw:
        if i < len(uw) and w == uw[i][0]:
            out.append((s, e))
            i += 1
        elif w not in skip:
            return None
    return out if i == len(uw) else None


def _text_rendering(unit: str, span: str) -> Optional[str]:
    """``text "X"`` with X as the span writes it, when X occurs in the span (case-insensitive,
    spacing collapsed); ``None`` when the unit is not of that form or X is not in the span."""
    m = _TEXT_UNIT.match(unit.strip())
    if m is None:
        return None
    want = " ".join(m.group("text").split()).lower()
    flat = " ".join(span.split())
    at = flat.lower().find(want) if want else -1
    return None if at < 0 else f'text "{flat[at:at + len(want)]}"'


def _trim(span: str) -> str:
    return span.strip(_TRIM)


def _names(text: str, target: str) -> bool:
    """Whether every word of ``target`` is a word of ``text`` (a plural form counts)."""
    have = set()
    for w, _, _ in _words(text):
        have.update(singular_candidates(w))
    return all(any(c in have for c in singular_candidates(w)) for w, _, _ in _words(target))


def _faithful_unit(unit: str, span: str) -> Optional[str]:
    """The unit as shown (in the span's spelling) when it is faithful to ``span``, else ``None``."""
    text = _text_rendering(unit, span)
    if text is not None:
        return text
    if _TEXT_UNIT.match(unit.strip()):
        return None
    ranges = _align(unit, span)
    if ranges is None:
        return None
    out, at = [], 0
    for (_, us, ue), (ss, se) in zip(_words(unit), ranges):
        out.append(unit[at:us] + span[ss:se])
        at = ue
    return " ".join(("".join(out) + unit[at:]).split())


def shown_claim(unit: str, span: str, target: str, category: str) -> str:
    """The claim shown to annotators for one unit (module docstring)."""
    unit, span, target = (unit or "").strip(), (span or "").strip(), (target or "").strip()
    faithful = _faithful_unit(unit, span)
    claim = faithful if faithful is not None else (_trim(span) or unit)
    if not target or target.lower() == "scene" or category in _GLOBAL or _names(claim, target):
        return claim
    if faithful is not None and _trim(span) and _names(span, target):
        return _trim(span)
    return f"{claim} (about: {target})"


def renders_unit(unit: str, span: str) -> bool:
    """Whether annotators read the extractor's unit itself (faithful to its span); ``False`` when
    they read the span instead — a claim that can differ from the one the judges were asked."""
    return _faithful_unit((unit or "").strip(), (span or "").strip()) is not None


def is_faithful(shown: str, span: str) -> bool:
    """Whether a shown claim says what its span says: a ``text "X"`` claim with X in the span, or
    its words (case and punctuation aside) are the span's words in order with only reviewed
    function words left out; the span itself always is. A trailing ``(about: …)`` is context, not
    claim, and is not checked."""
    claim = _ABOUT.sub("", (shown or "").strip())
    if not claim or not (span or "").strip():
        return False
    if _TEXT_UNIT.match(claim):
        return _text_rendering(claim, span) is not None
    return _align(claim, span) is not None


__all__ = ["is_faithful", "renders_unit", "shown_claim"]
