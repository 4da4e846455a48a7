"""Reviewed data files of the alt-text stage (``alttext/data/*.yaml``), loaded and checked.

* ``pipelines.yaml``: the CC3M-style and CC12M-style pipelines (blocks, thresholds, which values
  are published and which were chosen, and why);
* ``adult_words.yaml``: the adult-content word list; ``unwanted_phrases.yaml``: CC3M's non-descriptive
  (SEO, hashtag) phrases;
* ``hypernyms.yaml``: WordNet hypernymisation targets/defaults per entity label;
* ``time_spans.yaml``: time-span deletion patterns;
* ``oi_coco_mapping.yaml``: Open Images V7 boxable → COCO-80 (nocaps out-of-domain vocabulary);
* ``domains.yaml``: multi-label public suffixes for the web-domain distribution;
* ``person_labels.yaml`` (gold person-name spans), ``person_filters.yaml`` and ``given_names.yaml``
  (the ``name_shape`` filter of the person substitution; :mod:`.person`).
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import yaml

from capaudit.errors import InputError

DATA_DIR = Path(__file__).with_name("data")


@functools.lru_cache(maxsize=None)
def _load(name: str) -> Dict[str, Any]:
    path = DATA_DIR / name
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read data file ({exc})", path=path) from None
    if not isinstance(data, dict):
        raise InputError("data file must be a mapping", path=path)
    return data


def data_file(name: str) -> Dict[str, Any]:
    """A deep copy of one reviewed data file (callers may modify it)."""
    return copy.deepcopy(_load(name))


def shipped_pipelines() -> Dict[str, List[Dict[str, Any]]]:
    """The shipped pipelines: name → ordered list of block specs (``pipelines.yaml``)."""
    return data_file("pipelines.yaml")["pipelines"]


def pipeline_sources() -> Dict[str, str]:
    return dict(_load("pipelines.yaml").get("sources", {}))


@functools.lru_cache(maxsize=None)
def adult_terms() -> Tuple[str, ...]:
    """Lower-cased adult-content terms (single words or space-joined phrases)."""
    from capaudit.text.lexical import lex_units

    terms = []
    for t in _load("adult_words.yaml").get("terms", []):
        words = lex_units(str(t))
        if not words:
            raise InputError(f"empty term {t!r}", path=DATA_DIR / "adult_words.yaml", field="terms")
        terms.append(" ".join(words))
    return tuple(dict.fromkeys(terms))


@functools.lru_cache(maxsize=None)
def unwanted_phrases() -> Tuple[Tuple[str, ...], Tuple["re.Pattern[str]", ...]]:
    """The reviewed unwanted-phrases lexicon (``unwanted_phrases.yaml``): lower-cased phrases as
    space-joined lexical units, and compiled patterns; an empty, repeated or bad entry names the file."""
    from capaudit.text.lexical import lex_units

    path = DATA_DIR / "unwanted_phrases.yaml"
    d = _load("unwanted_phrases.yaml")
    phrases: List[str] = []
    for t in d.get("phrases", []) or []:
        words = " ".join(lex_units(str(t)))
        if not words:
            raise InputError(f"empty phrase {t!r}", path=path, field="phrases")
        if words in phrases:
            raise InputError(f"phrase {t!r} repeats {words!r}", path=path, field="phrases")
        phrases.append(words)
    patterns = []
    for p in d.get("patterns", []) or []:
        try:
            patterns.append(re.compile(str(p)))
        except re.error as exc:
            raise InputError(f"bad pattern {p!r} ({exc})", path=path, field="patterns") from None
    return tuple(phrases), tuple(patterns)


def hypernym_table() -> Dict[str, Any]:
    return data_file("hypernyms.yaml")


@functools.lru_cache(maxsize=None)
def time_span_rules() -> Dict[str, Any]:
    """Compiled time-span rules: labels, prepositions, ``patterns`` and ``keep`` regexes."""
    d = _load("time_spans.yaml")
    path = DATA_DIR / "time_spans.yaml"
    out: Dict[str, Any] = {"labels": tuple(d.get("labels", [])),
                           "prepositions": frozenset(str(p).lower() for p in d.get("prepositions", [])),
                           "time_words": frozenset(str(w).lower() for w in d.get("time_words", []))}
    for key in ("patterns", "keep"):
        pats = []
        for i, p in enumerate(d.get(key, [])):
            try:
                pats.append(re.compile(p, re.IGNORECASE))
            except re.error as exc:
                raise InputError(f"{key}[{i}] is not a valid regular expression ({exc})", path=path, field=key) from None
        out[key] = tuple(pats)
    return out


def oi_coco_mapping() -> Dict[str, Any]:
    return data_file("oi_coco_mapping.yaml")


@functools.lru_cache(maxsize=None)
def multi_label_suffixes() -> frozenset:
    return frozenset(str(s).lower() for s in _load("domains.yaml").get("multi_label_suffixes", []))


def check_block_docs(pipelines: Mapping[str, List[Mapping[str, Any]]]) -> List[str]:
    """Problems with the documentation of shipped blocks: each needs a ``source`` or ``doc`` and every
    name in ``chosen`` must be a parameter of the block (empty list = fine)."""
    problems = []
    for pname, blocks in pipelines.items():
        for i, b in enumerate(blocks):
            where = f"{pname}[{i}] {b.get('block')}"
            if not (b.get("source") or b.get("doc")):
                problems.append(f"{where}: no source/doc")
            for c in b.get("chosen", []) or []:
                if c not in b:
                    problems.append(f"{where}: chosen parameter {c!r} is not set")
                if not b.get("doc"):
                    problems.append(f"{where}: chosen parameter {c!r} has no doc")
    return problems


__all__ = ["DATA_DIR", "data_file", "shipped_pipelines", "pipeline_sources", "adult_terms", "unwanted_phrases", "hypernym_table",
           "time_span_rules", "oi_coco_mapping", "multi_label_suffixes", "check_block_docs"]
