"""Lexical units and the three "first B" window rules (reference-spec §1).

A lexical unit ("lex") is a maximal run of Unicode letters/digits, optionally joined by
ASCII apostrophes: ``[^\\W_]+(?:'[^\\W_]+)*``. The only normalisation is ``str.lower()``
(the reference claims Unicode normalisation but never applies it; we do not either).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import List

LEX_PATTERN = r"[^\W_]+(?:'[^\W_]+)*"
LEX_RE = re.compile(LEX_PATTERN, re.UNICODE)


def lex_units(text: str) -> List[str]:
    """Lower-cased lexical units of ``text`` (spec §1.1)."""
    return LEX_RE.findall(text.lower())


def lex_count(text: str) -> int:
    """Number of lexical units in ``text``."""
    return sum(1 for _ in LEX_RE.finditer(text))


class WindowMode(str, Enum):
    """The three window rules of spec §1.2, named explicitly."""

    #: survey: raw text cut at the end of the B-th lex match, then stripped.
    LEX_CUT_TEXT = "lex_cut_text"
    #: prompt support: the list of the first B lower-cased lex units.
    LEX_UNITS = "lex_units"
    #: claim extraction: the first B whitespace-separated words joined by one space.
    WHITESPACE_WORDS = "whitespace_words"


def lex_cut_text(text: str, budget: int) -> str:
    """Raw text cut after the ``budget``-th lexical unit and stripped when more units follow; a text
    of at most ``budget`` units is kept whole, unstripped (spec §1.2)."""
    if budget <= 0:
        return ""
    end = None
    for i, m in enumerate(LEX_RE.finditer(text), start=1):
        if i == budget:
            end = m.end()
        elif i > budget:
            return text[:end].strip()
    return text


def whitespace_window(text: str, budget: int) -> str:
    """First ``budget`` whitespace words joined by single spaces (claim window)."""
    return " ".join(text.split()[:budget])


def window(text: str, budget: int, mode: WindowMode | str):
    """Apply one of the three window rules; returns ``str`` or ``list[str]`` (LEX_UNITS)."""
    mode = WindowMode(mode)
    if mode is WindowMode.LEX_CUT_TEXT:
        return lex_cut_text(text, budget)
    if mode is WindowMode.LEX_UNITS:
        return lex_units(text)[:budget]
    return whitespace_window(text, budget)
