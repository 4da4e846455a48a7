"""Person names for the CC12M-style ``<PERSON>`` substitution (issue 22).

* :func:`person_spans`: the character spans a ``person_substitution`` block replaces in a spaCy doc,
  under a named filter (:data:`NAME_FILTERS`): ``ner_only`` (every PERSON entity with a PROPN token, the
  first-shipped reading) or ``name_shape`` (those that still look like a personal name after the rules
  of ``alttext/data/person_filters.yaml``: trim, digits, product/shop nouns, common words);
* :func:`load_person_labels`, :func:`match_spans`, :func:`evaluate_spans`: span-level precision and
  recall against the hand-labelled gold spans of ``alttext/data/person_labels.yaml``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Union

import yaml

from capaudit.errors import InputError

from .resources import DATA_DIR, data_file

NAME_FILTERS = ("name_shape", "ner_only")
MATCH_RULES = ("overlap", "exact")
SPLITS = ("tune", "held_out", "all")
SHIPPED_LABELS = DATA_DIR / "person_labels.yaml"
Span = Tuple[int, int]


@functools.lru_cache(maxsize=1)
def given_names() -> FrozenSet[str]:
    """Lower-cased given names (``given_names.yaml``, U.S. Census 1990 first names)."""
    return frozenset(str(n).lower() for n in data_file("given_names.yaml")["names"])


@functools.lru_cache(maxsize=1)
def product_shop_nouns() -> FrozenSet[str]:
    return frozenset(str(n).lower() for n in data_file("person_filters.yaml")["product_shop_nouns"])


@functools.lru_cache(maxsize=1)
def _wordnet() -> Any:
    from capaudit.nlp.wordnet import wordnet

    return wordnet()


@functools.lru_cache(maxsize=65536)
def is_common_word(word: str) -> bool:
    """``word`` (any case) has a WordNet 3.0 synset that is not an instance (not a proper name)."""
    w = word.lower()
    if not w.isalpha():
        return False
    try:
        synsets = _wordnet().synsets(w)
    except Exception:  # noqa: BLE001 - odd characters in web text
        return False
    return any(not s.instance_hypernyms() for s in synsets)


@functools.lru_cache(maxsize=65536)
def is_person_instance(words: Tuple[str, ...]) -> bool:
    """The words joined are a WordNet instance of a person (lexname ``noun.person``)."""
    try:
        synsets = _wordnet().synsets("_".join(words), pos="n")
    except Exception:  # noqa: BLE001
        return False
    return any(s.instance_hypernyms() and s.lexname() == "noun.person" for s in synsets)


def _edge_junk(tok: Any) -> bool:
    t = tok.text
    return (tok.is_punct or tok.is_space or t in ("'s", "'", "’s", "’") or not t[:1].isupper()
            or any(c.isdigit() for c in t))


def name_shape(ent: Any, doc: Any) -> Optional[Span]:
    """The trimmed character span of entity ``ent`` if it looks like a personal name, else ``None``
    (rules 1-4 of ``person_filters.yaml``)."""
    toks = list(ent)
    while toks and _edge_junk(toks[0]):
        toks.pop(0)
    while toks and _edge_junk(toks[-1]):
        toks.pop()
    words = [t.text for t in toks if any(c.isalpha() for c in t.text)]
    if not words:
        return None
    if any(any(c.isdigit() for c in t.text) for t in toks):
        return None
    nouns = product_shop_nouns()
    after = doc[toks[-1].i + 1] if toks[-1].i + 1 < len(doc) else None
    if any(w.lower() in nouns for w in words[1:]) or (after is not None and after.lower_ in nouns):
        return None
    if all(is_common_word(w) for w in words):
        names = given_names()
        if not any(w.lower() in names for w in words) and not is_person_instance(tuple(words)):
            return None
    return toks[0].idx, toks[-1].idx + len(toks[-1].text)


def person_spans(doc: Any, name_filter: str = "name_shape") -> List[Span]:
    """Character spans of the person names in ``doc`` under ``name_filter`` (:data:`NAME_FILTERS`)."""
    from .nlp import is_name

    out: List[Span] = []
    for e in doc.ents:
        if e.label_ != "PERSON" or not is_name(e):
            continue
        if name_filter == "ner_only":
            out.append((e.start_char, e.end_char))
        else:
            span = name_shape(e, doc)
            if span is not None:
                out.append(span)
    return out


# --- gold labels and evaluation ----------------------------------------------------------------------

@dataclass(frozen=True)
class LabelledRow:
    index: int
    split: str
    text: str
    persons: Tuple[Span, ...]


def load_person_labels(path: Union[str, Path, None] = None) -> List[LabelledRow]:
    """The labelled rows of a person-labels YAML (default: the shipped ``person_labels.yaml``);
    a bad file or row is an :class:`InputError` naming the file, row and field."""
    p = Path(path) if path is not None else SHIPPED_LABELS
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read person labels ({type(exc).__name__}: {str(exc).splitlines()[0]})",
                         path=p) from None
    rows = data.get("rows") if isinstance(data, Mapping) else None
    if not isinstance(rows, list) or not rows:
        raise InputError("a person-labels file is a mapping with a non-empty 'rows' list", path=p, field="rows")
    out = []
    for n, r in enumerate(rows, start=1):
        if not isinstance(r, Mapping):
            raise InputError("row is not a mapping", path=p, line=n, field="rows")
        for key in ("index", "split", "text", "persons"):
            if key not in r:
                raise InputError(f"rows[{n - 1}] has no {key!r}", path=p, line=n, field=key)
        text, spans = r["text"], r["persons"]
        if not isinstance(text, str) or not isinstance(spans, list):
            raise InputError(f"rows[{n - 1}]: text must be a string and persons a list", path=p, line=n,
                             field="persons")
        if r["split"] not in SPLITS[:2]:
            raise InputError(f"rows[{n - 1}]: split {r['split']!r} is not one of {list(SPLITS[:2])}", path=p,
                             line=n, field="split")
        good = []
        for s in spans:
            if (not isinstance(s, list) or len(s) != 2 or not all(isinstance(x, int) for x in s)
                    or not 0 <= s[0] < s[1] <= len(text)):
                raise InputError(f"rows[{n - 1}]: span {s!r} is not [start, end] inside the text", path=p,
                                 line=n, field="persons")
            good.append((s[0], s[1]))
        out.append(LabelledRow(int(r["index"]), str(r["split"]), text, tuple(sorted(good))))
    return out


def match_spans(pred: Sequence[Span], gold: Sequence[Span], rule: str = "overlap") -> Tuple[int, int, int]:
    """(tp, fp, fn): predicted spans paired one-to-one with gold spans, in text order; ``overlap``
    pairs spans whose character ranges intersect, ``exact`` only identical ranges."""
    if rule not in MATCH_RULES:
        raise InputError(f"match rule {rule!r} is not one of {list(MATCH_RULES)}", field="match_rule")
    used = set()
    tp = 0
    for s, e in sorted(pred):
        for i, (gs, ge) in enumerate(gold):
            if i in used:
                continue
            if (s, e) == (gs, ge) if rule == "exact" else (s < ge and gs < e):
                used.add(i)
                tp += 1
                break
    return tp, len(pred) - tp, len(gold) - tp


def evaluate_spans(rows: Sequence[LabelledRow], predicted: Sequence[Sequence[Span]], *,
                   match_rule: str = "overlap", split: str = "all") -> Dict[str, Any]:
    """Span-level precision/recall of ``predicted`` (one span list per row) on the rows of ``split``.
    Precision with no predicted span (or recall with no gold span) is ``None``, never a number."""
    if split not in SPLITS:
        raise InputError(f"split {split!r} is not one of {list(SPLITS)}", field="split")
    tp = fp = fn = n = 0
    for row, pred in zip(rows, predicted, strict=True):
        if split != "all" and row.split != split:
            continue
        a, b, c = match_spans(pred, row.persons, match_rule)
        tp, fp, fn, n = tp + a, fp + b, fn + c, n + 1
    return {"precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None,
            "tp": tp, "fp": fp, "fn": fn, "gold_spans": tp + fn, "labelled_rows": n, "match_rule": match_rule,
            "split": split}


def evaluate_person_substitution(labels: Union[str, Path, None] = None, *, name_filter: str = "name_shape",
                                 match_rule: str = "overlap", splits: Sequence[str] = SPLITS,
                                 batch_size: int = 256) -> List[Dict[str, Any]]:
    """Run the substitution's span finder (spaCy NER + ``name_filter``) on every labelled text and
    score it per split; one dict per split (:func:`evaluate_spans` plus ``name_filter`` and ``labels``)."""
    from . import nlp

    if name_filter not in NAME_FILTERS:
        raise InputError(f"name filter {name_filter!r} is not one of {list(NAME_FILTERS)}", field="name_filter")
    rows = load_person_labels(labels)
    docs = nlp.parse([r.text for r in rows], frozenset({"ner", "pos"}), batch_size)
    pred = [person_spans(d, name_filter) for d in docs]
    label = str(labels) if labels is not None else "shipped person_labels.yaml"
    return [{**evaluate_spans(rows, pred, match_rule=match_rule, split=s), "name_filter": name_filter,
             "labels": label} for s in splits]


__all__ = ["NAME_FILTERS", "MATCH_RULES", "SPLITS", "SHIPPED_LABELS", "LabelledRow", "given_names",
           "product_shop_nouns", "is_common_word", "is_person_instance", "name_shape", "person_spans",
           "load_person_labels", "match_spans", "evaluate_spans", "evaluate_person_substitution"]
