"""Concept vocabularies for long-tail coverage and the mention matcher (issue 14, "Long-tail coverage").

Vocabularies (from ``class_lists`` in the data registry, or a user file):

* ``nocaps_ood``: Open Images V7 boxable classes not mapped to COCO-80 by the reviewed mapping
  ``alttext/data/oi_coco_mapping.yaml`` (511 classes; the CC12M study's count is 394 — see
  :func:`nocaps_ood_accounting` for the difference);
* ``lvis``: the 1,203 LVIS v1 categories with their synonyms and frequency group (``r``/``c``/``f``);
* ``objects365``: the 365 Objects365 classes (fixed spellings; "A/B" names give both forms);
* ``coco80``, ``open_images``: the COCO-80 and all 601 Open Images boxable classes;
* a text file: one class name per line (blank lines and ``#`` comments ignored).

A mention (:class:`MentionMatcher`) is one occurrence of a class name or its plural in the caption's
lower-cased lexical units; multi-word names match as phrases, the longest name first and without
overlap ("sea turtles" is one mention of *sea turtle*, not also of *turtle*); the last word of a
candidate is lemmatised (exact form first, then WordNet's noun ``morphy``, then English plural
rules), so "two dogs" is one mention of *dog* and "geese" one of *goose*.
"""

from __future__ import annotations

import csv
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from capaudit.errors import InputError
from capaudit.lexicons import singular_candidates
from capaudit.text.lexical import lex_units

from .resources import oi_coco_mapping

BUILTIN = ("nocaps_ood", "lvis", "objects365", "coco80", "open_images")
OI_FILE = ("class_lists", "open_images_v7_boxable/oidv7-class-descriptions-boxable.csv")
COCO_FILE = ("class_lists", "coco_panoptic/panoptic_coco_categories.json")
LVIS_FILE = ("class_lists", "lvis_v1/lvis_v1_train_cat_info.json")
O365_FILE = ("class_lists", "objects365/Objects365_names_fix.csv")
_PAREN = re.compile(r"\([^)]*\)")


@dataclass(frozen=True)
class VocabClass:
    """One class: display ``name``, the lower-cased word forms that count as a mention, a group."""

    name: str
    forms: Tuple[str, ...]
    group: Optional[str] = None


@dataclass
class Vocabulary:
    name: str
    classes: List[VocabClass]
    source: str = ""
    collisions: Dict[str, List[str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.classes)

    @property
    def names(self) -> List[str]:
        return [c.name for c in self.classes]

    def groups(self) -> Dict[str, List[str]]:
        out: Dict[str, List[str]] = {}
        for c in self.classes:
            if c.group:
                out.setdefault(c.group, []).append(c.name)
        return out

    def matcher(self, lemmatiser: str = "wordnet") -> "MentionMatcher":
        return MentionMatcher(self, lemmatiser=lemmatiser)


def name_forms(name: str) -> Tuple[str, ...]:
    """Word forms of a class name: parentheses dropped, ``_`` → space, ``&`` → and, "A/B" → both
    ("Cutting/chopping Board" → cutting board, chopping board)."""
    base = _PAREN.sub(" ", name.replace("_", " "))
    parts = [p.strip() for p in base.split("/") if p.strip()] or [base]
    if len(parts) > 1 and len(parts[0].split()) == 1 and len(parts[-1].split()) > 1:
        parts[0] = parts[0] + " " + " ".join(parts[-1].split()[1:])
    forms: List[str] = []
    for p in parts:
        for variant in (p, p.replace("&", " and ")):
            words = lex_units(variant)
            if words:
                forms.append(" ".join(words))
    return tuple(dict.fromkeys(forms))


def _build(name: str, items: Iterable[Tuple[str, Sequence[str], Optional[str]]], source: str) -> Vocabulary:
    classes: List[VocabClass] = []
    owner: Dict[str, str] = {}
    collisions: Dict[str, List[str]] = {}
    seen_names = set()
    for cname, raw_forms, group in items:
        if cname in seen_names:
            raise InputError(f"class {cname!r} appears twice", path=source)
        seen_names.add(cname)
        forms: List[str] = []
        for rf in raw_forms:
            for f in name_forms(rf):
                if f in owner and owner[f] != cname:
                    names = collisions.setdefault(f, [owner[f]])
                    if cname not in names:
                        names.append(cname)
                    continue
                owner[f] = cname
                forms.append(f)
        classes.append(VocabClass(cname, tuple(dict.fromkeys(forms)), group))
    return Vocabulary(name, classes, source, collisions)


def _fetch(ds_path: Tuple[str, str]) -> Path:
    from capaudit.data.registry import fetch

    return fetch(*ds_path)


@functools.lru_cache(maxsize=1)
def open_images_classes() -> Tuple[str, ...]:
    with open(_fetch(OI_FILE), encoding="utf-8", newline="") as fh:
        return tuple(r["DisplayName"] for r in csv.DictReader(fh))


@functools.lru_cache(maxsize=1)
def coco80_classes() -> Tuple[str, ...]:
    cats = json.loads(_fetch(COCO_FILE).read_text(encoding="utf-8"))
    return tuple(c["name"] for c in cats if c.get("isthing") == 1)


def oi_to_coco() -> Dict[str, str]:
    """OI V7 display name → COCO-80 name, from the reviewed mapping file (checked against both lists)."""
    m = oi_coco_mapping()
    oi, coco = set(open_images_classes()), set(coco80_classes())
    out: Dict[str, str] = {}
    for c, ois in m["coco_to_oi"].items():
        if c not in coco:
            raise InputError(f"{c!r} is not a COCO-80 class", path="oi_coco_mapping.yaml", field="coco_to_oi")
        for o in ois:
            if o not in oi:
                raise InputError(f"{o!r} is not an Open Images V7 boxable class", path="oi_coco_mapping.yaml",
                                 field="coco_to_oi")
            if o in out:
                raise InputError(f"{o!r} is mapped twice", path="oi_coco_mapping.yaml", field="coco_to_oi")
            out[o] = c
    return out


def nocaps_ood_classes() -> List[str]:
    """Open Images V7 boxable classes not mapped to COCO-80 (issue 14's definition)."""
    mapped = oi_to_coco()
    return [c for c in open_images_classes() if c not in mapped]


def nocaps_ood_accounting() -> Dict[str, int]:
    """How the derived nocaps out-of-domain count relates to the 394 classes the CC12M study uses.

    ``open_images`` (601 V7 boxable) − ``mapped_to_coco`` = ``nocaps_ood``; then the non-COCO
    classes nocaps also counts as in-domain (the part of the maintainers' list we could read) and the
    generic parent classes of the Open Images hierarchy are removed in turn.
    """
    m = oi_coco_mapping()
    ood = nocaps_ood_classes()
    extra = set(m.get("nocaps_extra_in_domain", []))
    sup = set(m.get("oi_superclasses", []))
    after_extra = [c for c in ood if c not in extra]
    after_sup = [c for c in after_extra if c not in sup]
    return {"open_images": len(open_images_classes()), "mapped_to_coco": len(oi_to_coco()),
            "coco_classes": len(m["coco_to_oi"]), "nocaps_ood": len(ood),
            "nocaps_extra_in_domain_readable": len(extra), "nocaps_extra_in_domain_stated": 39,
            "after_extra_in_domain": len(after_extra), "superclasses_removed": len(after_extra) - len(after_sup),
            "after_superclasses": len(after_sup), "study": 394}


def load_vocabulary(spec: str) -> Vocabulary:
    """A built-in vocabulary by name (:data:`BUILTIN`) or a text file with one class name per line."""
    if spec == "nocaps_ood":
        return _build("nocaps_ood", ((c, [c], None) for c in nocaps_ood_classes()),
                      "class_lists/open_images_v7_boxable minus alttext/data/oi_coco_mapping.yaml")
    if spec == "open_images":
        return _build("open_images", ((c, [c], None) for c in open_images_classes()), "class_lists/open_images_v7_boxable")
    if spec == "coco80":
        return _build("coco80", ((c, [c], None) for c in coco80_classes()), "class_lists/coco_panoptic (things)")
    if spec == "lvis":
        cats = json.loads(_fetch(LVIS_FILE).read_text(encoding="utf-8"))
        cats = sorted(cats, key=lambda c: c["id"])
        return _build("lvis", ((c["name"], [c["name"], *c.get("synonyms", [])], c.get("frequency")) for c in cats),
                      "class_lists/lvis_v1 (synonyms, frequency r/c/f)")
    if spec == "objects365":
        items = []
        with open(_fetch(O365_FILE), encoding="utf-8", newline="") as fh:
            for i, row in enumerate(csv.reader(fh), start=1):
                if len(row) < 3:
                    raise InputError("expected 'id, original name, fixed name'", path=O365_FILE[1], line=i)
                items.append((row[2].strip(), [row[2].strip()], None))
        return _build("objects365", items, "class_lists/objects365 (fixed names)")
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"not a built-in vocabulary ({', '.join(BUILTIN)}) and not a file", path=spec,
                         field="vocabulary")
    items = []
    for i, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        if not lex_units(name):
            raise InputError("class name has no word", path=path, line=i)
        items.append((name, [name], None))
    if not items:
        raise InputError("vocabulary file has no class name", path=path)
    return _build(path.stem, items, str(path))


# --- mention matching ---------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _morphy() -> Callable[[str], Optional[str]]:
    from capaudit.nlp.wordnet import wordnet

    wn = wordnet()
    return lambda w: wn.morphy(w, "n")


class MentionMatcher:
    """Longest-first, non-overlapping matching of class names (and plurals) in lexical units."""

    def __init__(self, vocab: Vocabulary, lemmatiser: str = "wordnet"):
        if lemmatiser not in ("wordnet", "rules"):
            raise ValueError(f"lemmatiser must be 'wordnet' or 'rules', got {lemmatiser!r}")
        self.vocab = vocab
        self.lemmatiser = lemmatiser
        self.table: Dict[Tuple[str, ...], int] = {}
        by_first: Dict[str, set] = {}
        for ci, c in enumerate(vocab.classes):
            for f in c.forms:
                words = tuple(f.split())
                self.table.setdefault(words, ci)
                if len(words) > 1:
                    by_first.setdefault(words[0], set()).add(len(words))
        self.lengths_by_first = {w: tuple(sorted(ls, reverse=True)) for w, ls in by_first.items()}
        self._variants = functools.lru_cache(maxsize=1 << 18)(self._variants_uncached)

    def _variants_uncached(self, word: str) -> Tuple[str, ...]:
        out = [word]
        if self.lemmatiser == "wordnet":
            try:
                lemma = _morphy()(word)
            except Exception:  # noqa: BLE001 - odd web tokens
                lemma = None
            if lemma:
                out.append(lemma)
        out.extend(singular_candidates(word))
        return tuple(dict.fromkeys(out))

    def find(self, words: Sequence[str]) -> List[Tuple[int, int, int]]:
        """``(start, end, class index)`` word spans, longest name first, non-overlapping."""
        out: List[Tuple[int, int, int]] = []
        i, n, table = 0, len(words), self.table
        while i < n:
            hit = None
            for L in self.lengths_by_first.get(words[i], ()):
                if i + L > n:
                    continue
                head = tuple(words[i:i + L - 1])
                for v in self._variants(words[i + L - 1]):
                    ci = table.get(head + (v,))
                    if ci is not None:
                        hit = (i, i + L, ci)
                        break
                if hit:
                    break
            if hit is None:
                for v in self._variants(words[i]):
                    ci = table.get((v,))
                    if ci is not None:
                        hit = (i, i + 1, ci)
                        break
            if hit is None:
                i += 1
            else:
                out.append(hit)
                i = hit[1]
        return out

    def mentions(self, text: str) -> List[str]:
        """Class names mentioned in ``text`` (one entry per mention)."""
        words = lex_units(text)
        return [self.vocab.classes[ci].name for _, _, ci in self.find(words)]


__all__ = ["BUILTIN", "VocabClass", "Vocabulary", "MentionMatcher", "name_forms", "load_vocabulary",
           "open_images_classes", "coco80_classes", "oi_to_coco", "nocaps_ood_classes", "nocaps_ood_accounting"]
