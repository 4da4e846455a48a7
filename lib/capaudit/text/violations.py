"""Violation catalog and the opener pattern (reference-spec §2.2).

``J_meta_statement`` is reproduced exactly, including two quirks of the reference that are on
by default and can be switched off with ``OpenerOptions``:

* ``multiline=True``: patterns are searched with ``re.MULTILINE``, so ``^`` also anchors at the
  start of every line, not only of the caption;
* ``verb_word_boundary=False``: no ``\\b`` after the verb, so "The image showcases" matches
  (``show`` + ``s?``).

Every other code, its severity and its patterns are the "Exact catalog" table of §2.2, verbatim
(no word boundaries beyond those shown there); they feed ``violation_rate`` and the per-code
rates. The opener rate reported by the paper is the ``J_meta_statement`` rate on the B=64
lexical window.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Pattern, Sequence, Tuple

import numpy as np

_NOUNS = "(image|picture|photo|illustration|artwork|scene)"
_VERBS = "(shows?|depicts?|features?|presents?|displays?|contains?|captures?)"

OPENER_PATTERNS: Tuple[str, ...] = (
    rf"(?i)^the {_NOUNS} {_VERBS}",
    rf"(?i)^this {_NOUNS} {_VERBS}",
    r"(?i)^in this (image|picture|photo|illustration)",
    r"(?i)^we (can )?see ",
)


@dataclass(frozen=True)
class OpenerOptions:
    """Reference quirks of the opener check; defaults reproduce the published numbers."""

    multiline: bool = True
    verb_word_boundary: bool = False


def opener_patterns(options: OpenerOptions = OpenerOptions()) -> List[Pattern[str]]:
    flags = re.MULTILINE if options.multiline else 0
    pats = []
    for p in OPENER_PATTERNS:
        if options.verb_word_boundary and p.endswith(_VERBS):
            p = p + r"\b"
        pats.append(re.compile(p, flags))
    return pats


# code -> (severity, patterns), exactly the "Exact catalog" table of reference-spec §2.2: tried in
# order with re.search(pattern, text, re.MULTILINE); the first match counts the code once.
CATALOG: Dict[str, Tuple[str, Tuple[str, ...]]] = {
    "A_prose_coord_echo": ("critical", (r"\[\s*\d{2,4}\s*,\s*\d{2,4}\s*,\s*\d{2,4}\s*,\s*\d{2,4}\s*\]",)),
    "B_text_coord_echo": ("moderate", (r"TEXT:.*\[\s*\d+\s*,\s*\d+\s*,\s*\d+\s*,\s*\d+\s*\]",)),
    "C_bbox_tag": ("moderate", (r"<bbox>", r"</bbox>", r"<ref>", r"</ref>")),
    "D_markdown_leak": ("moderate", (r"\*\*[^*]+\*\*", r"^[-*]\s", r"^#+\s", r"\[([^\]]+)\]\([^\)]+\)")),
    "E_thinking_leak": ("critical", (r"<think>", r"</think>", r"(?i)the user wants", r"(?i)let me ",
                                     r"(?i)I need to ", r"(?i)I should ", r"(?i)I will ", r"(?i)I'll describe")),
    "G_meta_instruction": ("low", (r"(?i)per (the )?instructions", r"(?i)as (instructed|requested|prompted)",
                                   r"(?i)following the (prompt|guidelines)", r"(?i)requirements?:")),
    "H_detection_meta_leak": ("moderate", (r"(?i)bounding box", r"(?i)detection (box|region|area)",
                                           r"(?i)confidence\s*[:=]\s*\d", r"(?i)detected at")),
    "I_overlay_meta_leak": ("moderate", (r"(?i)overlay", r"(?i)annotation layer", r"(?i)green rectangle", r"(?i)labeled box")),
    "J_meta_statement": ("moderate", OPENER_PATTERNS),
    "K_qwen_bbox_echo": ("moderate", (r"bbox_2d", r"\"type\"\s*:\s*\"bbox\"")),
    "L_tag_verbatim": ("low", (r"\b\w+_\w+_\w+\b",)),
    "M_numbered_list_leak": ("low", (r"^\d+\.\s+\w",)),
    "N_stage_header_leak": ("critical", (r"(?i)stage\s*[1-4]", r"(?i)resolution\s*:\s*\d+",
                                         r"(?i)caption (type|format|style)\s*:")),
}
REPETITION_CODE = "F_repetition"  # custom check: a 5-gram of whitespace words occurring >= 10 times
SEVERITY: Dict[str, str] = {code: sev for code, (sev, _) in CATALOG.items()}
SEVERITY[REPETITION_CODE] = "severe"
ALL_CODES: Tuple[str, ...] = tuple(sorted(list(CATALOG) + [REPETITION_CODE]))


# Necessary literals per code: a code's patterns can only match an ASCII text whose lower-cased
# form contains one of these substrings. They make the catalog cheap on clean captions
# without changing any result (non-ASCII texts skip the pre-filter: case folding differs).
REQUIRED_LITERALS: Dict[str, Tuple[str, ...]] = {
    "A_prose_coord_echo": ("[",),
    "B_text_coord_echo": ("text:",),
    "C_bbox_tag": ("<bbox>", "</bbox>", "<ref>", "</ref>"),
    "D_markdown_leak": ("**", "-", "*", "#", "]("),
    "E_thinking_leak": ("<think>", "</think>", "the user wants", "let me ", "i need to ", "i should ", "i will ",
                        "i'll describe"),
    "G_meta_instruction": ("instructions", "as instructed", "as requested", "as prompted", "following the prompt",
                           "following the guidelines", "requirement"),
    "H_detection_meta_leak": ("bounding box", "detection box", "detection region", "detection area", "confidence",
                              "detected at"),
    "I_overlay_meta_leak": ("overlay", "annotation layer", "green rectangle", "labeled box"),
    "J_meta_statement": ("image", "picture", "photo", "illustration", "artwork", "scene", "we "),
    "K_qwen_bbox_echo": ("bbox_2d", '"type"'),
    "L_tag_verbatim": ("_",),
    "M_numbered_list_leak": tuple(f"{d}." for d in "0123456789"),
    "N_stage_header_leak": ("stage", "resolution", "caption type", "caption format", "caption style"),
}


class ViolationChecker:
    """Finds the violation codes of a text (first matching pattern per code counts once)."""

    def __init__(self, opener: OpenerOptions = OpenerOptions()):
        self._codes: List[Tuple[str, Tuple[str, ...], List[Pattern[str]]]] = []
        for code, (_, pats) in CATALOG.items():
            compiled = (opener_patterns(opener) if code == "J_meta_statement"
                        else [re.compile(p, re.MULTILINE) for p in pats])
            self._codes.append((code, REQUIRED_LITERALS[code], compiled))
        self._opener_only = opener_patterns(opener)

    def codes(self, text: str) -> List[str]:
        """Codes found in ``text``."""
        row = self.matrix([text])[0]
        return [c for c, hit in zip(ALL_CODES, row) if hit]

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        """Boolean (len(texts), len(ALL_CODES)) matrix of codes found in each text.

        A code's regexes run only on texts that contain one of its necessary literals; the
        literal scan runs over all texts joined into one buffer, so clean texts cost almost
        nothing. Non-ASCII texts (whose case folding may differ) are checked in full.
        """
        n = len(texts)
        out = np.zeros((n, len(ALL_CODES)), bool)
        if n == 0:
            return out
        ascii_ok = np.fromiter((t.isascii() for t in texts), bool, n)
        low = "\x00".join(t.lower() if a else "" for t, a in zip(texts, ascii_ok))
        starts = np.zeros(n, np.int64)
        if n > 1:
            starts[1:] = np.cumsum(np.fromiter((len(t) if a else 0 for t, a in zip(texts, ascii_ok)), np.int64, n))[:-1] + np.arange(1, n)
        col = {c: j for j, c in enumerate(ALL_CODES)}
        always = np.flatnonzero(~ascii_ok)
        for code, lits, pats in self._codes:
            cand = set(always.tolist())
            for lit in lits:
                cand |= _windows_containing(low, lit, starts)
            j = col[code]
            # a pattern anchored with ^ (MULTILINE) can only match at 0 on a one-line text
            anchored = [p.pattern.removeprefix("(?i)").startswith("^") and bool(p.flags & re.MULTILINE) for p in pats]
            for i in cand:
                t = texts[i]
                one_line = "\n" not in t
                if any((p.match(t) if (a and one_line) else p.search(t)) for p, a in zip(pats, anchored)):
                    out[i, j] = True
        # repetition needs >= 14 whitespace words, i.e. >= 13 whitespace characters
        arr = np.frombuffer(low.encode("ascii"), np.uint8)
        ws = np.isin(arr, _ASCII_WS).astype(np.int64)
        csum = np.concatenate([[0], np.cumsum(ws)])
        ends = np.append(starts[1:] - 1, arr.size)
        ws_count = csum[ends] - csum[starts]
        j = col[REPETITION_CODE]
        for i in np.flatnonzero((ws_count >= 13) | ~ascii_ok).tolist():
            if _has_repetition(texts[i]):
                out[i, j] = True
        return out

    def is_opener(self, text: str) -> bool:
        return any(p.search(text) for p in self._opener_only)


# characters str.split() treats as whitespace in ASCII text
_ASCII_WS = np.array([c for c in range(128) if chr(c).isspace()], np.uint8)


def _windows_containing(buf: str, lit: str, starts: np.ndarray) -> set:
    """Indices of the NUL-separated texts of ``buf`` (starting at ``starts``) containing ``lit``."""
    found = set()
    pos = buf.find(lit)
    while pos >= 0:
        i = int(np.searchsorted(starts, pos, side="right")) - 1
        found.add(i)
        nxt = int(starts[i + 1]) if i + 1 < starts.size else len(buf)
        pos = buf.find(lit, nxt)
    return found


def _has_repetition(text: str, n: int = 5, threshold: int = 10) -> bool:
    """Some ``n``-gram of lower-cased whitespace words occurs at least ``threshold`` times."""
    words = text.lower().split()
    if len(words) - n + 1 < threshold:
        return False
    if max(Counter(words).values()) < threshold:  # the 5-gram's first word would repeat too
        return False
    grams = Counter(zip(*(words[i:] for i in range(n))))
    return max(grams.values()) >= threshold
