"""Long-tail concept coverage of a caption corpus (issue 14, "Long-tail coverage").

Definitions (per corpus, per vocabulary; ``records`` = captions counted):

* ``per_class[c]`` = mentions of class ``c`` (:class:`~capaudit.alttext.vocab.MentionMatcher`: one
  occurrence of a class name or its plural, longest name first, non-overlapping);
* ``instances_total`` = Σ mentions; ``median_per_class`` = median over *all* vocabulary classes
  (zeros included) of mentions; ``per_million_median`` = median over classes of
  ``mentions / records × 1,000,000``;
* ``classes_at_least[K]`` = number of classes with ``mentions / records × 10⁶ ≥ K`` (the CC12M
  study's Figure 5 curve as K varies: :func:`at_least_curve`);
* ``token_type_ratio`` = lower-cased lexical units / distinct ones (grows with corpus size: the
  detail JSON carries ``words``, ``types``, ``singletons`` and ``size_note``; size-matched values in
  :mod:`.sizematch`); ``avg_words`` = mean lexical units per record; top tokens; web-domain distribution from URLs (``domains.yaml``).

:class:`CoverageCounter` is a mergeable summary: counters over shards ``merge`` into the same numbers.
Memory is the token-type table (not the captions).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import urlparse

from capaudit.errors import InputError
from capaudit.text.lexical import lex_units

from .resources import multi_label_suffixes
from .sizematch import SIZE_NOTE
from .vocab import MentionMatcher, Vocabulary, load_vocabulary

CONTRACT_KS = (1, 10, 100, 1000, 10000)
CURVE_KS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000)
CONTRACT_KEYS = ("records", "classes", "instances_total", "median_per_class", "per_million_median",
                 "classes_at_least", "token_type_ratio", "avg_words", "per_class")


def site_of(url: str) -> Tuple[Optional[str], Optional[str]]:
    """(host without ``www.``, site = last two labels or three under a multi-label suffix) of a URL."""
    if not isinstance(url, str) or not url.strip():
        return None, None
    u = url.strip()
    if "://" not in u:
        u = "http://" + u
    try:
        host = (urlparse(u).hostname or "").lower()
    except ValueError:
        return None, None
    if not host:
        return None, None
    if host.startswith("www."):
        host = host[4:]
    labels = host.split(".")
    if len(labels) <= 2 or all(p.isdigit() for p in labels):
        return host, host
    last2 = ".".join(labels[-2:])
    if last2 in multi_label_suffixes():
        return host, ".".join(labels[-3:])
    return host, last2


@dataclass
class CoverageCounter:
    """Streaming, mergeable counts for one vocabulary (mentions) and the corpus text/URL statistics."""

    vocab: Vocabulary
    lemmatiser: str = "wordnet"
    records: int = 0
    words: int = 0
    mentions: Counter = field(default_factory=Counter)
    tokens: Counter = field(default_factory=Counter)
    hosts: Counter = field(default_factory=Counter)
    sites: Counter = field(default_factory=Counter)
    urls: int = 0
    _matcher: Optional[MentionMatcher] = field(default=None, repr=False)

    @property
    def matcher(self) -> MentionMatcher:
        if self._matcher is None:
            self._matcher = self.vocab.matcher(self.lemmatiser)
        return self._matcher

    def add(self, text: str, url: Optional[str] = None) -> None:
        _add_words(self, lex_units(text), url, count_text=True)

    def update(self, texts: Iterable[Union[str, Tuple[str, Optional[str]]]]) -> "CoverageCounter":
        for t in texts:
            if isinstance(t, tuple):
                self.add(t[0], t[1])
            else:
                self.add(t)
        return self

    def merge(self, other: "CoverageCounter") -> "CoverageCounter":
        if other.vocab.name != self.vocab.name:
            raise ValueError(f"cannot merge coverage of {self.vocab.name!r} with {other.vocab.name!r}")
        self.records += other.records
        self.words += other.words
        self.urls += other.urls
        for a, b in ((self.mentions, other.mentions), (self.tokens, other.tokens), (self.hosts, other.hosts),
                     (self.sites, other.sites)):
            a.update(b)
        return self

    # -- summaries ---------------------------------------------------------------------------------------
    def per_class(self) -> Dict[str, int]:
        return {c.name: int(self.mentions.get(c.name, 0)) for c in self.vocab.classes}

    def summary(self, *, detail: bool = False, top_k: int = 30, curve_ks: Sequence[int] = CURVE_KS) -> Dict[str, Any]:
        """The ``COVERAGE.json`` contract (issue 14); ``detail`` adds the ≥K curve, per-group
        summaries, top tokens and domains."""
        pc = self.per_class()
        out = coverage_numbers(pc, self.records)
        out["token_type_ratio"] = self.words / len(self.tokens) if self.tokens else 0.0
        out["avg_words"] = self.words / self.records if self.records else 0.0
        out["per_class"] = pc
        out = {k: out[k] for k in CONTRACT_KEYS}
        if detail:
            out["vocabulary"] = {"name": self.vocab.name, "source": self.vocab.source, "classes": len(self.vocab),
                                 "lemmatiser": self.lemmatiser, "form_collisions": len(self.vocab.collisions)}
            out["words"] = self.words
            out["types"] = len(self.tokens)
            out["singletons"] = sum(1 for c in self.tokens.values() if c == 1)
            out["size_note"] = SIZE_NOTE
            out["curve"] = at_least_curve(pc, self.records, curve_ks)
            groups = self.vocab.groups()
            if groups:
                out["groups"] = {g: coverage_numbers({n: pc[n] for n in names}, self.records, with_at_least=False)
                                 for g, names in sorted(groups.items())}
            out["classes_mentioned"] = sum(1 for v in pc.values() if v > 0)
            out["top_classes"] = [[n, c] for n, c in sorted(pc.items(), key=lambda x: (-x[1], x[0]))[:top_k] if c > 0]
            out["top_tokens"] = [[w, c] for w, c in self.tokens.most_common(top_k)]
            out["domains"] = self.domains(top_k)
        return out

    def domains(self, top_k: int = 30) -> Dict[str, Any]:
        return {"urls": self.urls, "distinct_hosts": len(self.hosts), "distinct_sites": len(self.sites),
                "top_sites": [[s, c, c / self.urls] for s, c in self.sites.most_common(top_k)] if self.urls else [],
                "top_site_share": (self.sites.most_common(1)[0][1] / self.urls) if self.urls else None}


def coverage_numbers(per_class: Mapping[str, int], records: int, with_at_least: bool = True) -> Dict[str, Any]:
    """classes, instances_total, median_per_class, per_million_median and classes_at_least."""
    counts = list(per_class.values())
    per_m = [c / records * 1e6 for c in counts] if records else [0.0] * len(counts)
    out: Dict[str, Any] = {
        "records": records,
        "classes": len(counts),
        "instances_total": int(sum(counts)),
        "median_per_class": float(statistics.median(counts)) if counts else 0.0,
        "per_million_median": float(statistics.median(per_m)) if per_m else 0.0,
    }
    if with_at_least:
        out["classes_at_least"] = {str(k): sum(1 for v in per_m if v >= k) for k in CONTRACT_KS}
    return out


def at_least_curve(per_class: Mapping[str, int], records: int, ks: Sequence[int] = CURVE_KS) -> List[List[float]]:
    """``[[K, number of classes with ≥ K mentions per 1M records], ...]`` (CC12M study, Figure 5).

    Computed exactly (``mentions × 10⁶ ≥ K × records`` in integers) so K on a class's boundary counts.
    """
    counts = list(per_class.values())
    return [[k, sum(1 for c in counts if c * 1_000_000 >= k * records)] if records else [k, 0] for k in ks]


def coverage_of_texts(texts: Iterable[Union[str, Tuple[str, Optional[str]]]],
                      vocabularies: Sequence[Union[str, Vocabulary]], lemmatiser: str = "wordnet"
                      ) -> Dict[str, CoverageCounter]:
    """One pass over ``texts`` (strings, or (text, url) pairs) counting every vocabulary at once."""
    vocabs = [v if isinstance(v, Vocabulary) else load_vocabulary(v) for v in vocabularies]
    counters = {v.name: CoverageCounter(v, lemmatiser) for v in vocabs}
    first = None
    for t in texts:
        text, url = t if isinstance(t, tuple) else (t, None)
        if first is None:
            first = next(iter(counters.values()))
            for c in counters.values():
                c.matcher  # noqa: B018 - build matchers before the loop
        words = lex_units(text)
        for c in counters.values():
            _add_words(c, words, url, count_text=(c is first))
    if first is not None:
        for c in counters.values():
            if c is not first:
                c.records, c.words, c.tokens = first.records, first.words, first.tokens
                c.urls, c.hosts, c.sites = first.urls, first.hosts, first.sites
    return counters


def _add_words(c: CoverageCounter, words: List[str], url: Optional[str], count_text: bool) -> None:
    classes = c.vocab.classes
    for _, _, ci in c.matcher.find(words):
        c.mentions[classes[ci].name] += 1
    if count_text:
        c.records += 1
        c.words += len(words)
        c.tokens.update(words)
        if url is not None:
            host, site = site_of(url)
            if host:
                c.urls += 1
                c.hosts[host] += 1
                c.sites[site] += 1


#: Accepted input layouts of ``capaudit coverage`` (its ``--help``).
COVERAGE_LAYOUTS = ("rows with a text field (JSONL, Parquet, CSV/TSV, WebDataset, a JSON list of objects or "
                    "{key: object}): --text-field names it, a list of strings counts each string; "
                    "a JSON {key: caption or [captions]} (the Karpathy COCO caption files) or a JSON list of "
                    "strings: each caption is one record, no --text-field")


def texts_of_rows(rows: Iterable[Tuple[Mapping[str, Any], Any]], text_field: Optional[str],
                  url_field: Optional[str] = None, *, lists: bool = True) -> Iterator[Tuple[str, Optional[str]]]:
    """``(text, url)`` of the rows' ``text_field`` (``capaudit coverage``'s rules when ``lists``: null or
    blank skipped, a list gives each non-blank string, another type is an error; the stage's rows rule
    otherwise: non-blank strings only). A row without the field is an error naming file, row and field.

    ``text_field=None`` reads the captions of a JSON ``{key: caption | [captions]}`` file (or a JSON
    list of strings; :data:`COVERAGE_LAYOUTS`); any other row is then an error asking for the field."""
    from capaudit.surfaces.readers import CAPTIONS

    from .rows import get_field, optional_str_field

    for row, where in rows:
        if text_field is None:
            if CAPTIONS not in row:
                fields = sorted(str(k) for k in row if not str(k).startswith("__"))
                raise InputError(f"{where}: not a JSON {{key: [captions]}} file; name the text field with "
                                 f"--text-field (fields: {', '.join(fields) or 'none'})", field="--text-field")
            v = row[CAPTIONS]
            if not lists:
                if isinstance(v, str) and v.strip():
                    yield v, None
                continue
        else:
            try:
                v = get_field(row, text_field)
            except KeyError:
                if CAPTIONS in row:
                    raise InputError(f"{where}: this JSON maps keys to captions ({{key: [captions]}}, the "
                                     f"Karpathy layout): its captions are read without --text-field",
                                     field=text_field) from None
                if not lists:
                    raise InputError(f"{where}: no field {text_field!r}", field=text_field) from None
                fields = sorted(str(k) for k in row if not str(k).startswith("__"))
                raise InputError(f"{where}: no field {text_field!r} (fields: {', '.join(fields)})",
                                 field=text_field) from None
            if not lists:
                if isinstance(v, str) and v.strip():
                    yield v, optional_str_field(row, url_field)
                continue
        if v is None or (isinstance(v, str) and not v.strip()):
            continue
        if isinstance(v, list):
            vals = [x for x in v if isinstance(x, str) and x.strip()]
        elif isinstance(v, str):
            vals = [v]
        else:
            raise InputError(f"{where}: text is {type(v).__name__}, not a string", field=text_field)
        url = optional_str_field(row, url_field)
        for x in vals:
            yield x, url


@dataclass
class HypernymCounts:
    """Mergeable counts of the CC3M hypernym check (:func:`hypernym_share` plus how often "by" is
    followed by a hypernym); :meth:`row` is the ``alttext_hypernym_check`` table row."""

    hypernyms: Tuple[str, ...]
    records: int = 0
    with_hypernym: int = 0
    words: int = 0
    after_by: int = 0
    after_by_hypernym: int = 0
    counts: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._set = {h.lower() for h in self.hypernyms}

    def add(self, text: str) -> None:
        hyp = self._set
        ws = lex_units(text)
        self.records += 1
        self.words += len(ws)
        hits = [w for w in ws if w in hyp]
        if hits:
            self.with_hypernym += 1
            self.counts.update(hits)
        for a, b in zip(ws, ws[1:]):
            if a == "by":
                self.after_by += 1
                self.after_by_hypernym += b in hyp

    def feed(self, texts: Iterable[Tuple[str, Optional[str]]]) -> Iterator[Tuple[str, Optional[str]]]:
        """Pass ``(text, url)`` pairs through, counting each text."""
        for t in texts:
            self.add(t[0])
            yield t

    def merge(self, other: "HypernymCounts") -> "HypernymCounts":
        self.records += other.records
        self.with_hypernym += other.with_hypernym
        self.words += other.words
        self.after_by += other.after_by
        self.after_by_hypernym += other.after_by_hypernym
        self.counts.update(other.counts)
        return self

    def row(self) -> Dict[str, Any]:
        top = ", ".join(f"{w} {c}" for w, c in self.counts.most_common()[:6])
        return {"records": self.records,
                "share_with_hypernym": self.with_hypernym / self.records if self.records else 0.0,
                "hypernyms_per_1k_words": 1000 * sum(self.counts.values()) / self.words if self.words else 0.0,
                "by_followed_by_hypernym": self.after_by_hypernym / self.after_by if self.after_by else None,
                "by_bigrams": self.after_by, "top_hypernyms": top}


def hypernym_share(texts: Iterable[str], hypernyms: Sequence[str]) -> Dict[str, Any]:
    """How much of a corpus is hypernym tokens (CC3M check): share of records with at least one of
    ``hypernyms`` as a word, mentions per 1k words, and counts per hypernym."""
    hyp = {h.lower() for h in hypernyms}
    records = with_h = words = 0
    counts: Counter = Counter()
    for t in texts:
        ws = lex_units(t)
        records += 1
        words += len(ws)
        hits = [w for w in ws if w in hyp]
        if hits:
            with_h += 1
            counts.update(hits)
    return {"records": records, "share_with_hypernym": with_h / records if records else 0.0,
            "per_1k_words": 1000 * sum(counts.values()) / words if words else 0.0,
            "counts": dict(counts.most_common())}


__all__ = ["CONTRACT_KS", "CURVE_KS", "CONTRACT_KEYS", "COVERAGE_LAYOUTS", "site_of", "CoverageCounter", "coverage_numbers",
           "at_least_curve", "coverage_of_texts", "texts_of_rows", "HypernymCounts",
           "hypernym_share"]
