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
from bisect import bisect_right
from collections import Counter
from itertools import repeat
from operator import contains
from dataclasses import dataclass
from typing import Dict, List, Optional, Pattern, Sequence, Tuple

import numpy as np

try:  # the parse tree of a pattern (necessary literals, anchors)
    from re import _constants as _sre_c
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre_c  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

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


#: the non-ASCII characters an ASCII letter matches under re.IGNORECASE (U+0130 is also the only
#: character whose lower() changes length): a text holding one skips the literal pre-filters
CASE_UNSAFE = "\u0130\u0131\u017f\u212a"
_UNSAFE_RE = re.compile(f"[{CASE_UNSAFE}]")
_ALNUM_RUN = re.compile(r"[a-z0-9]+")
_ASCII_WS = np.array([c for c in range(128) if chr(c).isspace()], np.uint8)


class PatternInfo:
    """Static facts about one compiled pattern, read from its parse tree.

    ``anchored``: starts with ``^`` (a match can only start at 0, or after a newline under
    MULTILINE). ``head``: the literal right after the anchor. ``literal``: the longest run of
    literal characters every match contains. Both lower-cased; ``None`` when absent or non-ASCII.
    ``end_sensitive``: whether the pattern looks at what follows a match, so that a match in a
    prefix of a text need not be one in the text.
    """

    __slots__ = ("pattern", "anchored", "multiline", "head", "literal", "literals", "end_sensitive")

    #: end_sensitive values: "" (a match in a prefix of a text is a match in the text), "word"
    #: (``\\b``/``\\B``: only the word/non-word class of the next character matters), "any".

    def __init__(self, pattern: Pattern[str]):
        self.pattern = pattern
        self.multiline = bool(pattern.flags & re.MULTILINE)
        ops = list(_sre_parse.parse(pattern.pattern, pattern.flags))
        self.anchored = bool(ops) and ops[0][0] is _sre_c.AT and ops[0][1] in (_sre_c.AT_BEGINNING,
                                                                                 _sre_c.AT_BEGINNING_LINE)
        start = 1 if self.anchored else 0
        head_set, sets = _literal_runs(ops[start:])
        self.head = None
        if self.anchored and head_set and len(head_set) == 1:
            (h,) = head_set
            self.head = h.lower() if h.isascii() else None
        best = max(sets, key=lambda st: (min(map(len, st)), -len(st)), default=None)
        self.literals: Optional[Tuple[str, ...]] = None
        if best and all(x.isascii() for x in best) and min(map(len, best)) > 0:
            self.literals = tuple(sorted({x.lower() for x in best}))
        self.literal = self.literals[0] if self.literals and len(self.literals) == 1 else None
        src = pattern.pattern
        if any(tok in src for tok in ("$", "\\Z", "(?=", "(?!", "(?(")):
            self.end_sensitive = "any"
        elif "\\b" in src or "\\B" in src:
            self.end_sensitive = "word"
        else:
            self.end_sensitive = ""

    def matches(self, text: str, newlines: Optional[List[int]]) -> bool:
        """``pattern.search(text) is not None``; anchored patterns are tried at line starts only."""
        p = self.pattern
        if not self.anchored:
            return p.search(text) is not None
        if p.match(text):
            return True
        if self.multiline and newlines:
            return any(p.match(text, k + 1) for k in newlines)
        return False


_MAX_SET = 32


def _alternatives(op, av) -> Optional[List[str]]:
    """The strings a purely literal element can match (a literal, a group or branch of literal
    sequences), or None."""
    if op is _sre_c.LITERAL:
        return [chr(av)]
    if op is _sre_c.SUBPATTERN:
        return _sequence_strings(list(av[-1]))
    if op is _sre_c.BRANCH:
        out: List[str] = []
        for alt in av[1]:
            strs = _sequence_strings(list(alt))
            if strs is None:
                return None
            out += strs
        return out if len(out) <= _MAX_SET else None
    return None


def _sequence_strings(ops) -> Optional[List[str]]:
    acc = [""]
    for op, av in ops:
        alts = _alternatives(op, av)
        if alts is None:
            return None
        acc = [a + b for a in acc for b in alts]
        if len(acc) > _MAX_SET:
            return None
    return acc


def _literal_runs(ops) -> Tuple[Optional[set], List[set]]:
    """Maximal runs of purely literal elements of a top-level sequence, each as the set of strings
    it can match (every match of the pattern contains one string of each run). Also the run that
    starts at the first element (``None`` if the first element is not literal)."""
    runs: List[set] = []
    head: Optional[set] = None
    acc: Optional[List[str]] = None
    first = True
    first_run = False
    for op, av in ops:
        alts = _alternatives(op, av)
        if alts is None:
            if acc is not None:
                runs.append(set(acc))
                if head is None and first_run:
                    head = set(acc)
            acc = None
            first = False
            continue
        if acc is None:
            acc, first_run = [""], first
        acc = [a + b for a in acc for b in alts]
        if len(acc) > _MAX_SET:  # too many combinations: keep what we had
            acc = None
        first = False
    if acc is not None:
        runs.append(set(acc))
        if head is None and first_run:
            head = set(acc)
    return head, runs


class _Buffer:
    """Lower-cased texts joined by NUL (ASCII ones apart: a 1-byte string scans fastest), for
    literal scans that map each hit back to its text."""

    def __init__(self, lows: Sequence[str], use: np.ndarray, ascii_: np.ndarray):
        self.parts = []
        for sel in (use & ascii_, use & ~ascii_):
            idx = np.flatnonzero(sel)
            if idx.size == 0:
                continue
            texts = [lows[i] for i in idx.tolist()]
            lens = np.fromiter(map(len, texts), np.int64, len(texts))
            starts = np.zeros(len(texts), np.int64)
            starts[1:] = np.cumsum(lens[:-1] + 1)
            self.parts.append(("\x00".join(texts), starts.tolist(), idx.tolist()))

    def texts_with(self, literal: str) -> List[int]:
        """Indices of the texts containing ``literal`` (one ``find`` per text hit)."""
        out: List[int] = []
        for buf, starts, index in self.parts:
            find = buf.find
            n = len(starts)
            k = find(literal)
            while k >= 0:
                i = bisect_right(starts, k) - 1
                out.append(index[i])
                if i + 1 >= n:
                    break
                k = find(literal, starts[i + 1])
        return out


def _newlines(text: str) -> List[int]:
    out: List[int] = []
    k = text.find("\n")
    while k >= 0:
        out.append(k)
        k = text.find("\n", k + 1)
    return out


class ViolationChecker:
    """Finds the violation codes of texts (a code counts once, whichever of its patterns matches).

    :meth:`matrix` gives exactly ``any(re.search(p, text, re.MULTILINE) for p in patterns)`` per
    code (and the repetition check), but runs a pattern only where it can match:

    * patterns anchored with ``^`` are tried with ``match`` at the start and after each newline;
    * the others only on texts holding one of their necessary literals (read from the pattern's
      parse tree: every match contains one string of a run of literal elements), found by
      ``str.find`` over the lower-cased texts joined into one buffer, or from the caller's
      ``word_masks``. Lower-casing is exact for this on every text without one of the four
      characters an ASCII letter matches under IGNORECASE (U+0130, U+0131, U+017F, U+212A);
      texts holding one are checked with every pattern.
    """

    def __init__(self, opener: OpenerOptions = OpenerOptions()):
        self._codes: List[Tuple[int, List[PatternInfo]]] = []
        col = {c: j for j, c in enumerate(ALL_CODES)}
        for code, (_, pats) in CATALOG.items():
            compiled = (opener_patterns(opener) if code == "J_meta_statement"
                        else [re.compile(p, re.MULTILINE) for p in pats])
            self._codes.append((col[code], [PatternInfo(p) for p in compiled]))
        self.rep_col = col[REPETITION_CODE]
        # alphanumeric runs of the literals: a text can contain a literal only if each of its runs
        # lies inside one lexical unit of the text (callers may pass which words their units hold)
        words: Dict[str, int] = {}
        for _, infos in self._codes:
            for info in infos:
                for lit in info.literals or ():
                    for w in _ALNUM_RUN.findall(lit):
                        words.setdefault(w, len(words))
        self.literal_words: Tuple[str, ...] = tuple(words)
        self._word_bit = {w: np.uint64(1) << np.uint64(i) for i, w in enumerate(self.literal_words)}
        kinds = {i.end_sensitive for _, infos in self._codes for i in infos}
        #: what a prefix window can match that its text does not: "" (nothing), "word" (a pattern
        #: ending in \\b may match when the cut is followed by "_"), "any"
        self.end_sensitivity = "any" if "any" in kinds else "word" if "word" in kinds else ""
        self._opener_only = opener_patterns(opener)
        self._any_anchored = any_of([i.pattern for _, infos in self._codes for i in infos if i.anchored])

    def codes(self, text: str) -> List[str]:
        """Codes found in ``text``."""
        row = self.matrix([text])[0]
        return [c for c, hit in zip(ALL_CODES, row) if hit]

    def is_opener(self, text: str) -> bool:
        return any(p.search(text) for p in self._opener_only)

    def unit_word_mask(self, unit: str) -> int:
        """Bit i set when literal word i occurs inside ``unit`` (a lower-cased lexical unit)."""
        m = 0
        for i, w in enumerate(self.literal_words):
            if w in unit:
                m |= 1 << i
        return m

    def matrix(self, texts: Sequence[str], lows: Optional[Sequence[str]] = None,
               repetition: bool = True, word_masks: Optional[np.ndarray] = None) -> np.ndarray:
        """Boolean (len(texts), len(ALL_CODES)) matrix of the codes found in each text.

        ``word_masks`` (optional, uint64 per text): bits of :attr:`literal_words` found inside the
        text's lower-cased lexical units (:meth:`unit_word_mask`); it replaces text scans for
        literals that hold a word.
        """
        n = len(texts)
        out = np.zeros((n, len(ALL_CODES)), bool)
        if n == 0:
            return out
        if lows is None:
            lows = [t.lower() for t in texts]
        ascii_ = np.fromiter(map(str.isascii, texts), bool, n)
        safe = ascii_.copy()
        for i in np.flatnonzero(~ascii_).tolist():
            safe[i] = _UNSAFE_RE.search(texts[i]) is None
        unsafe = np.flatnonzero(~safe).tolist()
        buf = _Buffer(lows, safe, ascii_)
        multi = np.flatnonzero(np.fromiter(map(contains, texts, repeat("\n")), bool, n)).tolist()
        newlines = {i: _newlines(texts[i]) for i in multi}
        # the texts some anchored pattern matches at 0 (one pass); each anchored pattern is tried on these
        at_start = (range(n) if self._any_anchored is None else
                    np.flatnonzero(np.fromiter(map(bool, map(self._any_anchored.match, texts)), bool, n)).tolist())
        for j, infos in self._codes:
            col = out[:, j]
            for info in infos:
                p = info.pattern
                if info.anchored:
                    for i in at_start:
                        if not col[i] and p.match(texts[i]):
                            col[i] = True
                    if info.multiline:
                        for i in multi:
                            if not col[i] and any(p.match(texts[i], k + 1) for k in newlines[i]):
                                col[i] = True
                    continue
                if info.literals:
                    found_set = set()
                    for lit in info.literals:
                        ws = _ALNUM_RUN.findall(lit)
                        if ws and word_masks is not None and len(self.literal_words) <= 64:
                            need = np.uint64(0)
                            for w in ws:
                                need |= self._word_bit[w]
                            found_set.update(np.flatnonzero(((word_masks & need) == need) & safe).tolist())
                        else:
                            found_set.update(buf.texts_with(lit))
                    cand = sorted(found_set)
                else:
                    cand = range(n)
                for i in cand:
                    if not col[i] and p.search(texts[i]) is not None:
                        col[i] = True
                if info.literals:
                    for i in unsafe:
                        if not col[i] and p.search(texts[i]) is not None:
                            col[i] = True
        if repetition:  # >= 14 whitespace words: >= 27 characters
            for i in np.flatnonzero(np.fromiter(map(len, texts), np.int64, n) >= 27).tolist():
                if max_gram_count(lows[i], 10) >= 10:
                    out[i, self.rep_col] = True
        return out


_GLOBAL_FLAGS = re.compile(r"^(?:\(\?[aiLmsux]+\))+")
_SCOPED = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.VERBOSE, "x"))


def any_of(patterns: Sequence[Pattern[str]]) -> Optional[Pattern[str]]:
    """One pattern that matches at a position iff one of ``patterns`` does there (an alternation,
    each alternative under its own flags), or None when they cannot be joined (ASCII or LOCALE
    flags, or a pattern that does not compile inside a group)."""
    if not patterns or any(p.flags & (re.ASCII | re.LOCALE) for p in patterns):
        return None
    alts = []
    for p in patterns:
        body = _GLOBAL_FLAGS.sub("", p.pattern)  # leading global flags: already in p.flags
        on = "".join(c for f, c in _SCOPED if p.flags & f)
        off = "".join(c for f, c in _SCOPED if not p.flags & f and c != "x")
        alts.append(f"(?{on}-{off}:{body})" if off else f"(?{on}:{body})")
    try:
        return re.compile("|".join(alts))
    except re.error:
        return None


def _has_repetition(text: str, n: int = 5, threshold: int = 10) -> bool:
    """Some ``n``-gram of lower-cased whitespace words occurs at least ``threshold`` times."""
    return max_gram_count(text.lower(), threshold, n) >= threshold


def max_gram_count(low: str, at_least: int, n: int = 5) -> int:
    """The largest count of an ``n``-gram of whitespace words of ``low`` when it is >= ``at_least``,
    else 0 (exact; the start word of such an n-gram occurs >= ``at_least`` times)."""
    words = low.split()
    if len(words) - n + 1 < at_least:
        return 0
    wc = Counter(words)
    if max(wc.values()) < at_least:
        return 0
    grams = Counter(tuple(words[i:i + n]) for i in range(len(words) - n + 1) if wc[words[i]] >= at_least)
    m = max(grams.values()) if grams else 0
    return m if m >= at_least else 0
