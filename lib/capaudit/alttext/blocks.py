"""Filter and transformation blocks of the alt-text funnels (issue 14, "Filter funnels").

A block is a named step that receives a batch of :class:`Item` s (rows still alive) and returns one
outcome per item: ``"keep"`` (checked and passed), ``"unchecked"`` (passed because the block had
nothing to check, e.g. no image metadata), ``"drop"``, or for transformations ``"changed"`` /
``"keep"`` (text unchanged) / ``"drop"`` (nothing left).  Blocks that need spaCy declare the
capabilities (``pos``, ``ner``) and read docs from the shared :class:`Context`, which parses each
distinct text once per batch with ``nlp.pipe``.  ``rare_words`` is a two-pass block: it observes every
input text first (a word-count table, exact or hashed) and filters in the second pass.

Thresholds and their provenance live in ``alttext/data/pipelines.yaml``; the defaults here are the
CC3M values.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple
from urllib.parse import urlparse

from capaudit.errors import InputError
from capaudit.lexicons import singular_candidates
from capaudit.text.lexical import LEX_RE, lex_units

from . import nlp as _nlp
from .nlp import is_name
from .rows import IMAGE_EXTENSIONS

KEEP, DROP, UNCHECKED, CHANGED = "keep", "drop", "unchecked", "changed"
URL_FIELDS = ("url", "URL", "image_url", "img_url", "link")
FORMAT_FIELDS = ("format", "image_format", "mime_type", "mimetype", "mime", "content_type", "image_ext")
WIDTH_FIELDS = ("width", "WIDTH", "original_width", "image_width", "img_width")
HEIGHT_FIELDS = ("height", "HEIGHT", "original_height", "image_height", "img_height")
IMAGE_NAME_FIELDS = ("image", "file_name", "image_path", "image_file", "filename", "url", "URL")
#: Keys of a block spec that document it and are not parameters.
DOC_KEYS = {"block", "name", "source", "doc", "chosen"}


@dataclass
class Item:
    """A row in flight: its 0-based input ordinal, the row, where it came from, its text now."""

    index: int
    row: Dict[str, Any]
    where: str
    original: str
    text: str


class Context:
    """Per-run state shared by blocks: spaCy capabilities and a per-batch parse cache."""

    def __init__(self, needs: FrozenSet[str] = frozenset(), spacy_batch_size: int = 256):
        self.needs = frozenset(needs)
        self.spacy_batch_size = spacy_batch_size
        self._docs: Dict[str, Any] = {}
        self.parsed = 0

    def new_batch(self) -> None:
        self._docs.clear()

    def docs(self, texts: Sequence[str]) -> List[Any]:
        """spaCy docs of ``texts`` (each distinct text parsed once per batch)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._docs]
        if missing:
            for t, d in zip(missing, _nlp.parse(missing, self.needs, self.spacy_batch_size)):
                self._docs[t] = d
            self.parsed += len(missing)
        return [self._docs[t] for t in texts]


def _first_present(row: Mapping[str, Any], names: Sequence[str]) -> Tuple[Optional[str], Any]:
    for n in names:
        v = row.get(n)
        if v is not None and v != "":
            return n, v
    return None, None


def _number(v: Any) -> Optional[float]:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if x == x and x > 0 else None


class Block:
    """Base class; subclasses set ``type``, ``kind``, ``needs``, ``backend`` and ``defaults``."""

    type: ClassVar[str] = ""
    kind: ClassVar[str] = "filter"
    needs: ClassVar[FrozenSet[str]] = frozenset()
    two_pass: ClassVar[bool] = False
    defaults: ClassVar[Dict[str, Any]] = {}

    def __init__(self, name: Optional[str] = None, **params: Any):
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise InputError(f"block {self.type!r}: unknown parameter(s) {sorted(unknown)} "
                             f"(known: {sorted(self.defaults)})", field=self.type)
        self.name = str(name or self.type)
        self.params = {**self.defaults, **params}
        for k, v in self.params.items():
            setattr(self, k, v)
        self.validate()

    def validate(self) -> None:  # noqa: D401 - hook
        """Check parameter values (raise :class:`InputError`)."""

    @property
    def backend(self) -> str:
        return "rule"

    def apply(self, items: List[Item], ctx: Context) -> List[str]:
        return [self.check(it) for it in items]

    def check(self, item: Item) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def _bad(self, msg: str) -> InputError:
        return InputError(f"block {self.name!r}: {msg}", field=self.name)

    # -- two-pass blocks (``two_pass = True``) ------------------------------------------------------
    # Pass 1 calls ``reset()`` then ``observe(text)`` for every non-empty input text.  A sharded run
    # observes each shard separately, collects ``state()``, combines the states with ``merge_states``
    # (exact: the result equals observing the whole input) and ``load_state``s it before pass 2.

    def reset(self) -> None:
        """Forget what pass 1 observed."""

    def observe(self, text: str) -> None:  # pragma: no cover - two-pass blocks override
        raise NotImplementedError

    def state(self) -> Any:  # pragma: no cover - two-pass blocks override
        """What pass 1 observed (picklable)."""
        raise NotImplementedError

    def load_state(self, state: Any) -> None:  # pragma: no cover - two-pass blocks override
        raise NotImplementedError

    def merge_states(self, states: Sequence[Any]) -> Any:  # pragma: no cover - two-pass blocks override
        """One state equal to observing, in order, everything the ``states`` observed."""
        raise NotImplementedError

    def table_size(self) -> int:
        return 0


# --- image metadata filters ---------------------------------------------------------------------------

def _format_of(value: Any) -> Optional[str]:
    v = str(value).strip().lower()
    if v.startswith("image/"):
        v = v[6:]
    v = v.lstrip(".")
    return IMAGE_EXTENSIONS.get(v, v or None)


class ImageFormat(Block):
    """Keep only images of an allowed format (CC3M: JPEG), from a format/mime field or the URL suffix."""

    type = "image_format"
    defaults = {"allowed": ["jpeg"], "url_extension": True, "format_fields": list(FORMAT_FIELDS),
                "url_fields": list(URL_FIELDS)}

    def validate(self) -> None:
        self.allowed_set = {_format_of(a) for a in self.allowed}

    def check(self, item: Item) -> str:
        _, fmt = _first_present(item.row, self.format_fields)
        if fmt is not None:
            return KEEP if _format_of(fmt) in self.allowed_set else DROP
        if self.url_extension:
            _, url = _first_present(item.row, self.url_fields)
            if isinstance(url, str) and url:
                path = urlparse(url).path
                ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
                if ext in IMAGE_EXTENSIONS:
                    return KEEP if IMAGE_EXTENSIONS[ext] in self.allowed_set else DROP
        return UNCHECKED


class _Dims(Block):
    defaults = {"width_fields": list(WIDTH_FIELDS), "height_fields": list(HEIGHT_FIELDS)}

    def dims(self, row: Mapping[str, Any]) -> Optional[Tuple[float, float]]:
        _, w = _first_present(row, self.width_fields)
        _, h = _first_present(row, self.height_fields)
        w, h = _number(w), _number(h)
        return (w, h) if w and h else None


class ImageMinSide(_Dims):
    """Shorter image side must exceed ``min_side`` pixels (CC3M/CC12M: > 400)."""

    type = "image_min_side"
    defaults = {**_Dims.defaults, "min_side": 400}

    def check(self, item: Item) -> str:
        d = self.dims(item.row)
        if d is None:
            return UNCHECKED
        return KEEP if min(d) > float(self.min_side) else DROP


class ImageAspectRatio(_Dims):
    """Longer / shorter side must be at most ``max_ratio`` (CC3M 2, CC12M 2.5)."""

    type = "image_aspect_ratio"
    defaults = {**_Dims.defaults, "max_ratio": 2.0}

    def check(self, item: Item) -> str:
        d = self.dims(item.row)
        if d is None:
            return UNCHECKED
        return KEEP if max(d) / min(d) <= float(self.max_ratio) else DROP


# --- text filters --------------------------------------------------------------------------------------

class WordCount(Block):
    """Number of lexical units within ``[min_words, max_words]``."""

    type = "word_count"
    defaults = {"min_words": 3, "max_words": 50}

    def validate(self) -> None:
        if int(self.min_words) < 0 or int(self.max_words) < int(self.min_words):
            raise self._bad(f"need 0 <= min_words <= max_words, got {self.min_words}..{self.max_words}")

    def check(self, item: Item) -> str:
        n = sum(1 for _ in LEX_RE.finditer(item.text))
        return KEEP if int(self.min_words) <= n <= int(self.max_words) else DROP


class English(Block):
    """Language identification with langid.py (model shipped in the package): keep ``lang`` with
    normalised probability ≥ ``min_prob``."""

    type = "english"
    defaults = {"lang": "en", "min_prob": 0.5}

    @property
    def backend(self) -> str:
        return _nlp.backend_name("langid")

    def apply(self, items: List[Item], ctx: Context) -> List[str]:
        return [KEEP if lang == self.lang and prob >= float(self.min_prob) else DROP
                for lang, prob in _nlp.identify_languages([it.text for it in items])]


def _alpha_words(text: str) -> List[str]:
    return [w for w in LEX_RE.findall(text) if any(ch.isalpha() for ch in w)]


def _first_letter_upper(word: str) -> bool:
    for ch in word:
        if ch.isalpha():
            return ch.isupper()
    return False


class Capitalisation(Block):
    """CC3M's capitalisation heuristic: the first word capitalised (``first_word``) and at most
    ``max_ratio`` of the words (with a letter) capitalised."""

    type = "capitalisation"
    defaults = {"first_word": True, "max_ratio": 0.5}

    def check(self, item: Item) -> str:
        words = _alpha_words(item.text)
        if not words:
            return DROP
        if self.first_word and not _first_letter_upper(words[0]):
            return DROP
        caps = sum(1 for w in words if _first_letter_upper(w))
        return KEEP if caps / len(words) <= float(self.max_ratio) else DROP


class UniqueWordRatio(Block):
    """Distinct / all lower-cased lexical units ≥ ``min_ratio``."""

    type = "unique_word_ratio"
    defaults = {"min_ratio": 0.7}

    def check(self, item: Item) -> str:
        words = lex_units(item.text)
        if not words:
            return DROP
        return KEEP if len(set(words)) / len(words) >= float(self.min_ratio) else DROP


class WordRepetition(Block):
    """CC12M's word-repetition rule (Changpinyo et al., CVPR 2021, Sec. 3, text-based filtering: "we
    set the maximum fraction of word repetition allowed to 0.2").

    The repetition fraction of a caption is the share of its words that repeat an earlier word:
    ``(words - distinct words) / words`` over lower-cased lexical units; a row is kept when it is at
    most ``max_fraction``. A word used once is no repetition, so "Red apple on table" scores 0 and
    "dog dog dog cat" 2/4. The paper makes no stop-word exception; ``ignore_stop_words`` (off by
    default, not the paper's rule) counts repeats of spaCy English stop words as no repetition.
    """

    type = "word_repetition"
    defaults = {"max_fraction": 0.2, "ignore_stop_words": False}

    def validate(self) -> None:
        if not 0 <= float(self.max_fraction) <= 1:
            raise self._bad(f"max_fraction must be in [0, 1], got {self.max_fraction}")
        if self.ignore_stop_words:
            from spacy.lang.en.stop_words import STOP_WORDS

            self.stop = frozenset(STOP_WORDS)
        else:
            self.stop = frozenset()

    def fraction(self, text: str) -> Optional[float]:
        """The repetition fraction of ``text`` (``None`` when it has no word)."""
        words = lex_units(text)
        if not words:
            return None
        counts = Counter(words)
        repeats = sum(c - 1 for w, c in counts.items() if w not in self.stop)
        return repeats / len(words)

    def check(self, item: Item) -> str:
        f = self.fraction(item.text)
        if f is None:
            return DROP
        return KEEP if f <= float(self.max_fraction) else DROP


class Sentiment(Block):
    """Drop texts whose VADER compound polarity has |compound| > ``max_abs_compound``."""

    type = "sentiment"
    defaults = {"max_abs_compound": 0.9}

    @property
    def backend(self) -> str:
        return _nlp.backend_name("vader")

    def check(self, item: Item) -> str:
        return KEEP if abs(_nlp.sentiment_compound(item.text)) <= float(self.max_abs_compound) else DROP


class AdultWords(Block):
    """Drop texts containing a term of the reviewed adult-content list (``adult_words.yaml``), also in
    plural form; ``terms`` replaces the list, ``extra_terms`` extends it."""

    type = "adult_words"
    defaults = {"terms": None, "extra_terms": []}

    def validate(self) -> None:
        from .resources import adult_terms

        terms = [" ".join(lex_units(str(t))) for t in self.terms] if self.terms is not None else list(adult_terms())
        terms += [" ".join(lex_units(str(t))) for t in self.extra_terms]
        terms = [t for t in terms if t]
        self.single = frozenset(t for t in terms if " " not in t)
        self.phrases = tuple(t for t in terms if " " in t)

    @property
    def backend(self) -> str:
        return "word list alttext/data/adult_words.yaml" if self.terms is None else "word list (params)"

    def check(self, item: Item) -> str:
        words = lex_units(item.text)
        single = self.single
        for w in words:
            if w in single or (w.endswith("s") and any(s in single for s in singular_candidates(w)[1:])):
                return DROP
        if self.phrases:
            joined = f" {' '.join(words)} "
            for p in self.phrases:
                if f" {p} " in joined or f" {p}s " in joined:
                    return DROP
        return KEEP


class UnwantedPhrases(Block):
    """CC3M's non-descriptive-text filter ("SEO tags or hashtags"): drop a text whose lower-cased lexical
    units contain a phrase of the reviewed lexicon ``unwanted_phrases.yaml`` (whole units) or whose raw
    text matches one of its patterns (hashtags); ``phrases`` replaces the list, ``extra_phrases`` extends
    it."""

    type = "unwanted_phrases"
    defaults = {"phrases": None, "extra_phrases": []}

    def validate(self) -> None:
        from .resources import unwanted_phrases

        shipped, self.patterns = unwanted_phrases()
        phrases = [" ".join(lex_units(str(t))) for t in self.phrases] if self.phrases is not None else list(shipped)
        phrases += [" ".join(lex_units(str(t))) for t in self.extra_phrases]
        self.phrase_set = tuple(dict.fromkeys(p for p in phrases if p))

    @property
    def backend(self) -> str:
        return "lexicon alttext/data/unwanted_phrases.yaml" if self.phrases is None else "lexicon (params)"

    def match(self, text: str) -> Optional[str]:
        """The first phrase or pattern ``text`` contains (``None``: none)."""
        joined = f" {' '.join(lex_units(text))} "
        for p in self.phrase_set:
            if f" {p} " in joined:
                return p
        for pat in self.patterns:
            m = pat.search(text)
            if m:
                return m.group(0)
        return None

    def check(self, item: Item) -> str:
        return DROP if self.match(item.text) is not None else KEEP


class UrlDedup(Block):
    """De-duplication against a URL list: drop a row whose image URL, normalised as the CC12M bridge
    normalises URLs (:func:`capaudit.cc12m.urls.normalize_url`: scheme and host lower-cased, fragment
    dropped, path and query kept), is in the list; rows without a URL are ``unchecked``.

    ``against`` is a row source (``{dataset, path, format, header, columns}`` or ``{file}``) whose
    ``url_field`` holds the URLs; ``label`` names the list in the funnel (e.g. ``cc3m_validation``).
    """

    type = "url_dedup"
    defaults = {"against": None, "url_field": "url", "label": "", "url_fields": list(URL_FIELDS)}

    def validate(self) -> None:
        from capaudit.cc12m.urls import normalize_url

        from .rows import RowSource

        if not isinstance(self.against, Mapping) or not self.against:
            raise self._bad("'against' must be a row source mapping (dataset + path, or file) of the URL list")
        self._norm = normalize_url
        src = RowSource.from_spec(dict(self.against))
        urls = set()
        n = 0
        for row, where in src:
            n += 1
            if self.url_field not in row:
                fields = sorted(str(k) for k in row if not str(k).startswith("__"))
                raise InputError(f"{where}: no URL field {self.url_field!r} in the de-duplication list "
                                 f"(fields: {', '.join(fields)})", field="url_field")
            u = normalize_url(row.get(self.url_field))
            if u is not None:
                urls.add(u)
        if not n:
            raise InputError("the de-duplication URL list has no rows", path=src.label, field="against")
        self.urls = frozenset(urls)
        self.list_label = str(self.label or src.label)

    @property
    def backend(self) -> str:
        return f"URL list {self.list_label} ({len(self.urls):,} normalised URLs, capaudit.cc12m.urls.normalize_url)"

    def check(self, item: Item) -> str:
        _, url = _first_present(item.row, self.url_fields)
        u = self._norm(url) if isinstance(url, str) else None
        if u is None:
            return UNCHECKED
        return DROP if u in self.urls else KEEP


class RareWords(Block):
    """Two-pass rare-word rule: pass 1 counts lower-cased lexical units over the whole input, pass 2
    drops a row containing a word counted fewer than ``min_count`` times.

    ``hash_buckets`` (optional) counts words in that many crc32 buckets instead of a dict, bounding
    memory for very large corpora; collisions can only raise a count, so hashing never drops a row the
    exact table keeps (it may keep a row the exact table drops).
    """

    type = "rare_words"
    two_pass = True
    defaults = {"min_count": 5, "ignore_digits": True, "hash_buckets": None}

    def validate(self) -> None:
        if int(self.min_count) < 1:
            raise self._bad("min_count must be >= 1")
        self.reset()

    def reset(self) -> None:
        self.exact: Optional[Counter] = None
        self.buckets = None
        if self.hash_buckets:
            from array import array

            self.buckets = array("I", bytes(4 * int(self.hash_buckets)))  # uint32, fast scalar access
        else:
            self.exact = Counter()
        self.observed = 0

    @property
    def backend(self) -> str:
        return f"hashed counts ({int(self.hash_buckets)} buckets)" if self.hash_buckets else "exact counts"

    def _words(self, text: str) -> List[str]:
        words = lex_units(text)
        if self.ignore_digits:
            words = [w for w in words if not any(ch.isdigit() for ch in w)]
        return words

    def observe(self, text: str) -> None:
        words = self._words(text)
        self.observed += 1
        if self.exact is not None:
            self.exact.update(words)
        else:
            n, b = len(self.buckets), self.buckets
            for w in words:
                b[zlib.crc32(w.encode("utf-8")) % n] += 1

    def count(self, word: str) -> int:
        if self.exact is not None:
            return self.exact.get(word, 0)
        return int(self.buckets[zlib.crc32(word.encode("utf-8")) % len(self.buckets)])

    def table_size(self) -> int:
        return len(self.exact) if self.exact is not None else sum(1 for c in self.buckets if c)

    def state(self) -> Dict[str, Any]:
        """``{observed, exact (Counter) | buckets (array of uint32)}``."""
        return {"observed": self.observed, "exact": self.exact, "buckets": self.buckets}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.observed = int(state["observed"])
        self.exact = state["exact"]
        self.buckets = state["buckets"]

    def merge_states(self, states: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
        """Exact counts added word by word, hashed buckets added bucket by bucket (a bucket that would
        pass 2**32 - 1 raises ``OverflowError``, as a single-process count would)."""
        states = list(states)
        observed = sum(int(s["observed"]) for s in states)
        if self.hash_buckets:
            import numpy as np
            from array import array

            total = np.zeros(int(self.hash_buckets), np.uint64)
            for s in states:
                total += np.frombuffer(s["buckets"], dtype=np.uint32)
            if total.size and int(total.max()) > 0xFFFFFFFF:
                raise OverflowError(f"block {self.name!r}: a hash bucket passed 2**32 - 1 words")
            merged = array("I")
            merged.frombytes(total.astype(np.uint32).tobytes())
            return {"observed": observed, "exact": None, "buckets": merged}
        exact: Counter = Counter()
        for s in states:
            exact.update(s["exact"])
        return {"observed": observed, "exact": exact, "buckets": None}

    def check(self, item: Item) -> str:
        m = int(self.min_count)
        return DROP if any(self.count(w) < m for w in self._words(item.text)) else KEEP


class PosRequired(Block):
    """spaCy POS requirements: each of ``require`` (noun = NOUN/PROPN, preposition = ADP,
    determiner = DET, verb = VERB/AUX, adjective = ADJ) present; optional ``max_noun_ratio``."""

    type = "pos_required"
    needs = frozenset({"pos"})
    defaults = {"require": ["determiner", "noun", "preposition"], "max_noun_ratio": None}
    TAGS = {"noun": {"NOUN", "PROPN"}, "preposition": {"ADP"}, "determiner": {"DET"}, "verb": {"VERB", "AUX"},
            "adjective": {"ADJ"}}

    def validate(self) -> None:
        bad = [r for r in self.require if r not in self.TAGS]
        if bad:
            raise self._bad(f"unknown requirement(s) {bad} (known: {sorted(self.TAGS)})")

    @property
    def backend(self) -> str:
        return _nlp.backend_name("spacy")

    def apply(self, items: List[Item], ctx: Context) -> List[str]:
        out = []
        for doc in ctx.docs([it.text for it in items]):
            pos = [t.pos_ for t in doc if not t.is_punct and not t.is_space]
            present = set(pos)
            ok = all(present & self.TAGS[r] for r in self.require)
            if ok and self.max_noun_ratio is not None and pos:
                ok = sum(p in self.TAGS["noun"] for p in pos) / len(pos) <= float(self.max_noun_ratio)
            out.append(KEEP if ok else DROP)
        return out


# --- image–text overlap (pluggable tagger) -----------------------------------------------------------

class Tagger:
    """Gives the tags of a row's image, or ``None`` when it has none (the row is then unchecked)."""

    name = "tagger"

    def tags(self, row: Mapping[str, Any]) -> Optional[Set[str]]:  # pragma: no cover - interface
        raise NotImplementedError

    def matches(self, text: str, tags: Set[str]) -> bool:
        """Does a caption token match a tag (plural/singular forms and multi-word tags allowed)?"""
        words = lex_units(text)
        forms = set(words)
        for w in words:
            forms.update(singular_candidates(w))
        joined = f" {' '.join(words)} "
        for t in tags:
            tw = lex_units(t)
            if not tw:
                continue
            if len(tw) == 1 and tw[0] in forms:
                return True
            if len(tw) > 1 and (f" {' '.join(tw)} " in joined or f" {' '.join(tw)}s " in joined):
                return True
        return False


class CocoMiniTagger(Tagger):
    """Offline stand-in for cloud-vision labels: the COCO category names annotated on the row's image
    in COCO-MINI (looked up by file name), matched through the reviewed COCO lexicon as well."""

    name = "coco_mini_annotations"

    def __init__(self, image_fields: Sequence[str] = IMAGE_NAME_FIELDS):
        from capaudit.data.coco import coco_mini
        from capaudit.lexicons import coco_lexicon

        self.index = coco_mini()
        self.lexicon = coco_lexicon()
        self.image_fields = tuple(image_fields)

    def tags(self, row: Mapping[str, Any]) -> Optional[Set[str]]:
        _, ref = _first_present(row, self.image_fields)
        if not isinstance(ref, str):
            return None
        name = urlparse(ref).path.rsplit("/", 1)[-1] if "://" in ref else ref.replace("\\", "/").rsplit("/", 1)[-1]
        img = self.index.by_file_name(name)
        if img is None:
            return None
        return set(img.category_counts(self.index.category_names, include_crowd=True))

    def matches(self, text: str, tags: Set[str]) -> bool:
        if any(cat in tags for _, cat in self.lexicon.mentions(text)):
            return True
        return super().matches(text, tags)


class FieldTagger(Tagger):
    """Tags from a row field (a list of strings or a comma-separated string), e.g. a user's detector."""

    name = "row_field_tags"

    def __init__(self, field: str = "tags"):
        self.field = field
        self.name = f"row field {field!r}"

    def tags(self, row: Mapping[str, Any]) -> Optional[Set[str]]:
        v = row.get(self.field)
        if v is None or v == "":
            return None
        if isinstance(v, str):
            return {t.strip() for t in v.split(",") if t.strip()}
        if isinstance(v, (list, tuple, set)):
            return {str(t) for t in v if str(t).strip()}
        raise InputError(f"tags must be a list or a comma-separated string, got {type(v).__name__}", field=self.field)


TAGGERS: Dict[str, Callable[..., Tagger]] = {"coco_mini": CocoMiniTagger, "field": FieldTagger}


def register_tagger(name: str, factory: Callable[..., Tagger]) -> None:
    """Make ``image_text_overlap`` accept ``tagger: <name>`` (e.g. a real vision tagger)."""
    TAGGERS[name] = factory


class ImageTextOverlap(Block):
    """Keep rows where a caption token matches one of the image's tags (CC3M image&text filter).

    The tagger is pluggable (``tagger``: a name in :data:`TAGGERS`, ``tagger_args`` its keyword
    arguments).  Rows whose image has no tags are ``unchecked`` (kept) unless ``on_missing: drop``.
    """

    type = "image_text_overlap"
    defaults = {"tagger": "coco_mini", "tagger_args": {}, "on_missing": "pass"}

    def validate(self) -> None:
        if self.tagger not in TAGGERS:
            raise self._bad(f"unknown tagger {self.tagger!r} (known: {sorted(TAGGERS)})")
        if self.on_missing not in ("pass", "drop"):
            raise self._bad("on_missing must be 'pass' or 'drop'")
        self._tagger: Optional[Tagger] = None

    @property
    def impl(self) -> Tagger:
        if self._tagger is None:
            self._tagger = TAGGERS[self.tagger](**(self.tagger_args or {}))
        return self._tagger

    @property
    def backend(self) -> str:
        name = self.impl.name
        return f"{name} (offline stand-in for cloud vision tags)" if self.tagger == "coco_mini" else name

    def check(self, item: Item) -> str:
        tags = self.impl.tags(item.row)
        if not tags:
            return DROP if self.on_missing == "drop" else UNCHECKED
        return KEEP if self.impl.matches(item.text, tags) else DROP


# --- text transformations -------------------------------------------------------------------------------

_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)\]])")
_REPEAT_PUNCT = re.compile(r"([,;:])(?:\s*[,;:])+")
_EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]")
_EDGE = re.compile(r"^[\s,;:\-–—/|]+|[\s,;:\-–—/|]+$")


def _balance(text: str) -> str:
    """Drop brackets left unmatched by a deletion ("Woman of the Year (1942)" → "Woman")."""
    drop, stack = set(), []
    for i, ch in enumerate(text):
        if ch in "([":
            stack.append(i)
        elif ch in ")]":
            if stack and text[stack[-1]] == ("(" if ch == ")" else "["):
                stack.pop()
            else:
                drop.add(i)
    drop.update(stack)
    return "".join(ch for i, ch in enumerate(text) if i not in drop) if drop else text


def tidy(text: str) -> str:
    """Collapse spaces and tidy punctuation and brackets left by deletions."""
    t = _EMPTY_BRACKETS.sub(" ", _balance(text))
    t = re.sub(r"\s+", " ", t)
    t = _SPACE_BEFORE_PUNCT.sub(r"\1", t)
    t = _REPEAT_PUNCT.sub(r"\1", t)
    t = re.sub(r"\s+", " ", t)
    return _EDGE.sub("", t).strip()


def replace_spans(text: str, spans: Iterable[Tuple[int, int, str]]) -> str:
    """Replace non-overlapping character spans ``(start, end, replacement)``; later overlaps are skipped."""
    out, pos = [], 0
    for s, e, rep in sorted(spans):
        if s < pos:
            continue
        out.append(text[pos:s])
        out.append(rep)
        pos = e
    out.append(text[pos:])
    return "".join(out)


class _Transform(Block):
    kind = "transform"

    def finish(self, item: Item, new: str) -> str:
        if new == item.text:
            return KEEP
        if not lex_units(new):
            return DROP
        item.text = new
        return CHANGED


class TimeSpanDeletion(_Transform):
    """Delete dates, times and durations: spaCy DATE/TIME entities and the patterns of
    ``time_spans.yaml``, with a directly preceding preposition; ages ("5 years old") are kept."""

    type = "time_span_deletion"
    needs = frozenset({"ner"})
    defaults = {"use_ner": True, "use_patterns": True}

    def validate(self) -> None:
        from .resources import time_span_rules

        self.rules = time_span_rules()

    @property
    def backend(self) -> str:
        return _nlp.backend_name("spacy") + " + patterns time_spans.yaml"

    def spans(self, text: str, doc: Any) -> List[Tuple[int, int]]:
        found: List[Tuple[int, int]] = []
        if self.use_ner and doc is not None:
            for e in doc.ents:
                if e.label_ in self.rules["labels"] and (
                        any(ch.isdigit() for ch in e.text)
                        or any(w in self.rules["time_words"] for w in lex_units(e.text))):
                    found.append((e.start_char, e.end_char))
        if self.use_patterns:
            for p in self.rules["patterns"]:
                found += [(m.start(), m.end()) for m in p.finditer(text)]
        keep = [(m.start(), m.end()) for p in self.rules["keep"] for m in p.finditer(text)]
        kept_spans = []
        for s, e in found:
            piece = text[s:e].strip()
            if any(ks <= s and e <= ke for ks, ke in keep) or any(p.search(piece) for p in self.rules["keep"]):
                continue
            kept_spans.append((s, e))
        merged: List[List[int]] = []
        for s, e in sorted(kept_spans):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out = []
        for s, e in merged:
            m = re.search(r"(\w+)\s+$", text[:s])
            if m and m.group(1).lower() in self.rules["prepositions"]:
                s = m.start(1)
            out.append((s, e))
        return out

    def apply(self, items: List[Item], ctx: Context) -> List[str]:
        docs = ctx.docs([it.text for it in items]) if self.use_ner else [None] * len(items)
        out = []
        for it, doc in zip(items, docs):
            spans = self.spans(it.text, doc)
            new = tidy(replace_spans(it.text, [(s, e, " ") for s, e in spans])) if spans else it.text
            out.append(self.finish(it, new))
        return out


class Hypernymise(_Transform):
    """Replace PERSON / ORG / GPE entities (spaCy NER) by WordNet hypernyms (``hypernyms.yaml``);
    "actor and actor" becomes "actors"; "a"/"an" before a replaced entity is fixed."""

    type = "hypernymise"
    needs = frozenset({"ner", "pos"})
    defaults = {"labels": ["PERSON", "ORG", "GPE"]}

    def validate(self) -> None:
        self.hyper = _nlp.Hypernymiser()
        bad = [l for l in self.labels if l not in self.hyper.labels]
        if bad:
            raise self._bad(f"no hypernym rules for label(s) {bad} (hypernyms.yaml has {sorted(self.hyper.labels)})")

    @property
    def backend(self) -> str:
        return _nlp.backend_name("spacy") + " + " + _nlp.backend_name("wordnet")

    def rewrite(self, text: str, doc: Any) -> str:
        spans = []
        used = set()
        for e in doc.ents:
            if e.label_ not in self.labels or not is_name(e):
                continue
            hyper = self.hyper.hypernym(e.text, e.label_)
            if hyper is None:
                continue
            used.add(hyper)
            start = e.start_char
            if e[0].lower_ == "the" and len(e) > 1:
                start = e[1].idx
            rep = hyper
            prev = doc[e.start - 1] if e.start > 0 else None
            if prev is not None and prev.lower_ in ("a", "an"):
                art = "an" if hyper[:1].lower() in "aeiou" else "a"
                art = art.capitalize() if prev.text[:1].isupper() else art
                spans.append((prev.idx, prev.idx + len(prev.text), art))
            spans.append((start, e.end_char, rep))
        new = replace_spans(text, spans)
        if self.hyper.merge_coordination:
            for h in sorted(used, key=len, reverse=True):
                pat = re.compile(rf"\b{re.escape(h)}(?:\s*,\s*{re.escape(h)})*\s+(?:and|&)\s+{re.escape(h)}\b")
                new = pat.sub(_nlp.pluralise(h), new)
        return tidy(new)

    def apply(self, items: List[Item], ctx: Context) -> List[str]:
        out = []
        for it, doc in zip(items, ctx.docs([it.text for it in items])):
            if not any(e.label_ in self.labels and is_name(e) for e in doc.ents):
                out.append(KEEP)
                continue
            out.append(self.finish(it, self.rewrite(it.text, doc)))
        return out


class DigitSubstitution(_Transform):
    """Replace every digit by ``replacement`` (CC3M: ``#``)."""

    type = "digit_substitution"
    defaults = {"replacement": "#"}
    _DIGIT = re.compile(r"\d")

    def check(self, item: Item) -> str:
        return self.finish(item, self._DIGIT.sub(str(self.replacement), item.text))


class PersonSubstitution(_Transform):
    """Replace person names by ``token`` (CC12M: ``<PERSON>``): spaCy PERSON entities with a PROPN
    token, kept under ``name_filter`` (:data:`capaudit.alttext.person.NAME_FILTERS`; default
    ``name_shape``, the rules of ``person_filters.yaml``; ``ner_only`` is the first-shipped reading)."""

    type = "person_substitution"
    needs = frozenset({"ner", "pos"})
    defaults = {"token": "<PERSON>", "name_filter": "name_shape"}

    def validate(self) -> None:
        from .person import NAME_FILTERS

        if self.name_filter not in NAME_FILTERS:
            raise self._bad(f"name_filter {self.name_filter!r} is not one of {list(NAME_FILTERS)}")

    @property
    def backend(self) -> str:
        return _nlp.backend_name("spacy") + f" + name filter {self.name_filter}"

    def apply(self, items: List[Item], ctx: Context) -> List[str]:
        from .person import person_spans

        out = []
        for it, doc in zip(items, ctx.docs([it.text for it in items])):
            spans = [(s, e, str(self.token)) for s, e in person_spans(doc, str(self.name_filter))]
            out.append(self.finish(it, replace_spans(it.text, spans)) if spans else KEEP)
        return out


BLOCK_TYPES: Dict[str, type] = {cls.type: cls for cls in (
    ImageFormat, ImageMinSide, ImageAspectRatio, WordCount, English, Capitalisation, UniqueWordRatio,
    WordRepetition, Sentiment, AdultWords, UnwantedPhrases, UrlDedup, RareWords, PosRequired, ImageTextOverlap,
    TimeSpanDeletion, Hypernymise, DigitSubstitution, PersonSubstitution)}


def build_block(spec: Mapping[str, Any]) -> Block:
    """A block from its spec ``{block: <type>, name: <optional>, ...params}`` (doc keys ignored)."""
    if not isinstance(spec, Mapping) or "block" not in spec:
        raise InputError(f"a block spec must be a mapping with a 'block' type, got {spec!r}")
    cls = BLOCK_TYPES.get(str(spec["block"]))
    if cls is None:
        raise InputError(f"unknown block type {spec['block']!r} (known: {sorted(BLOCK_TYPES)})", field="block")
    params = {k: v for k, v in spec.items() if k not in DOC_KEYS}
    return cls(name=spec.get("name"), **params)


__all__ = ["KEEP", "DROP", "UNCHECKED", "CHANGED", "Item", "Context", "Block", "BLOCK_TYPES", "build_block",
           "Tagger", "CocoMiniTagger", "FieldTagger", "TAGGERS", "register_tagger", "tidy", "replace_spans",
           "ImageFormat", "ImageMinSide", "ImageAspectRatio", "WordCount", "English", "Capitalisation",
           "UniqueWordRatio", "WordRepetition", "Sentiment", "AdultWords", "UnwantedPhrases", "UrlDedup", "RareWords",
           "PosRequired", "ImageTextOverlap", "TimeSpanDeletion", "Hypernymise", "DigitSubstitution", "PersonSubstitution"]
