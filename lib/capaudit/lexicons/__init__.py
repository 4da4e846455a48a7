"""Reviewed lexicons as data files, shared by every stage that needs them.

* ``coco_categories.yaml``: noun → COCO-80 category (judges, detail, recap, alttext).

:func:`coco_lexicon` loads it as a :class:`NounLexicon`; ``category_of("puppies")`` → ``"dog"``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import yaml

from capaudit.errors import InputError

LEXICON_DIR = Path(__file__).parent
_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")


def singular_candidates(word: str) -> List[str]:
    """``word`` and its plausible singulars by English plural rules (lexicon lookups only)."""
    out = [word]
    if word.endswith("ies") and len(word) > 4:
        out.append(word[:-3] + "y")
    if word.endswith("ves") and len(word) > 4:
        out += [word[:-3] + "f", word[:-3] + "fe"]
    if word.endswith("es") and len(word) > 3:
        out.append(word[:-2])
    if word.endswith("s") and not word.endswith("ss") and len(word) > 2:
        out.append(word[:-1])
    irregular = {"men": "man", "women": "woman", "children": "child", "people": "person", "mice": "mouse",
                 "geese": "goose", "teeth": "tooth", "feet": "foot", "knives": "knife", "sheep": "sheep"}
    if word in irregular:
        out.append(irregular[word])
    return out


@dataclass(frozen=True)
class NounLexicon:
    """Terms (lower-case lemmas, possibly multi-word) → category name."""

    name: str
    version: int
    term_to_category: Mapping[str, str]
    categories: Mapping[str, Mapping[str, object]]
    max_words: int

    def normalize(self, text: str) -> List[str]:
        return _WORD.findall(text.lower().replace("_", " "))

    def category_of(self, phrase: str) -> Optional[str]:
        """Category of a noun phrase: the longest lexicon term ending the phrase (its head), with
        plural forms of the last word tried; ``None`` if no term matches."""
        words = self.normalize(phrase)
        for n in range(min(self.max_words, len(words)), 0, -1):
            head = words[-n:]
            for last in singular_candidates(head[-1]):
                cat = self.term_to_category.get(" ".join(head[:-1] + [last]))
                if cat is not None:
                    return cat
        return None

    def mentions(self, text: str) -> List[Tuple[str, str]]:
        """(term, category) for every lexicon term in ``text``, longest first, non-overlapping."""
        words = self.normalize(text)
        out: List[Tuple[str, str]] = []
        i = 0
        while i < len(words):
            for n in range(min(self.max_words, len(words) - i), 0, -1):
                span = words[i:i + n]
                hit = None
                for last in singular_candidates(span[-1]):
                    term = " ".join(span[:-1] + [last])
                    if term in self.term_to_category:
                        hit = term
                        break
                if hit:
                    out.append((hit, self.term_to_category[hit]))
                    i += n
                    break
            else:
                i += 1
        return out


def load_noun_lexicon(path: Path) -> NounLexicon:
    """Load and check a ``categories: [{name, terms}]`` lexicon file (each term maps to one category)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read lexicon ({exc})", path=path) from None
    table: Dict[str, str] = {}
    cats: Dict[str, Mapping[str, object]] = {}
    for i, c in enumerate(data.get("categories", [])):
        name = c.get("name")
        if not isinstance(name, str) or not isinstance(c.get("terms"), list):
            raise InputError(f"entry {i} needs 'name' and a 'terms' list", path=path, field="categories")
        cats[name] = c
        for t in c["terms"]:
            key = " ".join(_WORD.findall(str(t).lower()))
            if key in table and table[key] != name:
                raise InputError(f"term {t!r} maps to both {table[key]!r} and {name!r}", path=path, field="terms")
            table[key] = name
    return NounLexicon(Path(path).stem, int(data.get("version", 1)), table, cats,
                       max(len(t.split()) for t in table) if table else 1)


@functools.lru_cache(maxsize=None)
def coco_lexicon() -> NounLexicon:
    """The reviewed noun → COCO-80 category lexicon."""
    return load_noun_lexicon(LEXICON_DIR / "coco_categories.yaml")


__all__ = ["NounLexicon", "load_noun_lexicon", "coco_lexicon", "singular_candidates"]
