"""The ``alttext:`` params section (filters and coverage) as frozen values; the stage's only defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from capaudit.config import ParamsSection, PathLike
from capaudit.engine.executors import ENGINE_KEYS, EngineParams

SECTION = "alttext"
DEFAULT_PIPELINES = ("cc3m", "cc12m")
DEFAULT_VOCABULARIES = ("nocaps_ood", "lvis", "objects365")


def _engine(top: ParamsSection, sub: ParamsSection) -> EngineParams:
    """The engine keys of ``alttext`` with those of ``alttext.<part>`` winning (errors name the part
    when it sets any)."""
    merged = {k: sub.values.get(k, top.values.get(k)) for k in ENGINE_KEYS if k in sub.values or k in top.values}
    name = sub.name if any(k in sub.values for k in ENGINE_KEYS) else top.name
    return EngineParams.from_section(ParamsSection(merged, name, top.path))


@dataclass(frozen=True)
class FilterParams:
    """``alttext.filters``: pipelines over the filter corpora (rows sources + ``text_field``)."""

    pipelines: Tuple[Any, ...] = DEFAULT_PIPELINES  # shipped names, YAML files or {name, blocks}
    overrides: Mapping[str, Any] = field(default_factory=dict)  # {pipeline: {block: {param: value}}}
    corpora: Tuple[Mapping[str, Any], ...] = ()
    examples: int = 8
    person_labels: Optional[str] = None  # "shipped" or a labels YAML; None: not scored
    person_match: str = "overlap"
    dedup: Optional[Mapping[str, Any]] = None  # {label, url_field, <row source>}: a url_dedup step first
    engine: EngineParams = EngineParams()

    KEYS = ("pipelines", "overrides", "corpora", "examples", "person_labels", "person_match", "dedup") + ENGINE_KEYS

    @classmethod
    def from_section(cls, top: ParamsSection) -> "FilterParams":
        from .person import MATCH_RULES

        s = top.sub("filters").only(cls.KEYS)
        match = s.text("person_match", cls.person_match)
        if match not in MATCH_RULES:
            raise s.error("person_match", f"{match!r} is not one of {list(MATCH_RULES)}")
        labels = s.raw("person_labels")
        return cls(pipelines=tuple(s.raw("pipelines", cls.pipelines)), overrides=s.mapping("overrides", None),
                   corpora=tuple(s.raw("corpora") or ()), examples=s.integer("examples", cls.examples, 0),
                   person_labels=str(labels) if labels else None, person_match=match, dedup=dedup_option(s),
                   engine=_engine(top, s))


def dedup_option(filters: ParamsSection) -> Optional[Dict[str, Any]]:
    """``alttext.filters.dedup`` checked: ``None`` or ``{label, url_field, ...row source}`` (a missing
    source or a bad label names the key)."""
    d = filters.raw("dedup")
    if d is None:
        return None
    if not isinstance(d, Mapping) or not d:
        raise filters.error("dedup", f"must be a mapping (label, url_field and a row source), got {d!r}")
    out = dict(d)
    label = out.get("label")
    if not isinstance(label, str) or not label.replace("_", "").replace("-", "").isalnum():
        raise filters.error("dedup", f"label must be a name (letters, digits, '_', '-'), got {label!r}")
    if not isinstance(out.get("url_field", "url"), str):
        raise filters.error("dedup", f"url_field must be a field name, got {out.get('url_field')!r}")
    if not (out.get("file") or (out.get("dataset") and out.get("path"))):
        raise filters.error("dedup", "needs a row source: 'file', or 'dataset' + 'path'")
    return out


@dataclass(frozen=True)
class CoverageParams:
    """``alttext.coverage``: vocabularies counted over corpora, extra surfaces and kept filter rows."""

    vocabularies: Tuple[Any, ...] = DEFAULT_VOCABULARIES
    lemmatiser: str = "wordnet"
    top_k: int = 20
    corpora: Tuple[Any, ...] = ()  # row sources, or {surface: <name in surfaces:>}
    extra_surfaces: Tuple[Any, ...] = ()
    filtered: Tuple[str, ...] = ()  # filter corpora whose kept rows (per pipeline) are counted too
    hypernym_check: Tuple[str, ...] = ()
    size_unit: str = "tokens"
    size_seeds: Tuple[int, ...] = tuple(range(10))
    size_n: Optional[int] = None  # None: the smallest corpus
    engine: EngineParams = EngineParams()

    KEYS = ("vocabularies", "lemmatiser", "top_k", "corpora", "extra_surfaces", "filtered", "hypernym_check",
            "size_matched") + ENGINE_KEYS

    @classmethod
    def from_section(cls, top: ParamsSection) -> "CoverageParams":
        s = top.sub("coverage").only(cls.KEYS)
        unit, seeds, n = size_matched_options(s)
        return cls(vocabularies=tuple(s.raw("vocabularies", cls.vocabularies)),
                   lemmatiser=s.text("lemmatiser", cls.lemmatiser), top_k=s.integer("top_k", cls.top_k),
                   corpora=tuple(s.raw("corpora") or ()), extra_surfaces=tuple(s.raw("extra_surfaces") or ()),
                   filtered=tuple(s.raw("filtered") or ()), hypernym_check=tuple(s.raw("hypernym_check") or ()),
                   size_unit=unit, size_seeds=seeds, size_n=n, engine=_engine(top, s))


def size_matched_options(coverage: ParamsSection) -> Tuple[str, Tuple[int, ...], Optional[int]]:
    """``(unit, seeds, n)`` of ``alttext.coverage.size_matched`` (n ``None``: the smallest corpus), checked."""
    from .sizematch import SIZE_UNITS

    sm = coverage.sub("size_matched").only(("n", "unit", "seeds"))
    unit = sm.text("unit", CoverageParams.size_unit)
    if unit not in SIZE_UNITS:
        raise sm.error("unit", f"{unit!r} is not one of {list(SIZE_UNITS)}")
    seeds = sm.raw("seeds", list(CoverageParams.size_seeds))
    if (not isinstance(seeds, (list, tuple)) or not seeds or
            not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds)):
        raise sm.error("seeds", f"must be a non-empty list of integers >= 0, got {seeds!r}")
    n = sm.raw("n")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise sm.error("n", f"must be an integer >= 1 or null, got {n!r}")
    return unit, tuple(seeds), n


@dataclass(frozen=True)
class AlttextParams:
    """The whole ``alttext:`` section."""

    batch_size: int = 256
    filters: FilterParams = FilterParams()
    coverage: CoverageParams = CoverageParams()

    KEYS = ("batch_size", "filters", "coverage") + ENGINE_KEYS

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "AlttextParams":
        """From the params section; an unknown key or a bad value names the file, section and key."""
        s = ParamsSection.of(section, SECTION, path).only(cls.KEYS)
        return cls(s.integer("batch_size", cls.batch_size), FilterParams.from_section(s), CoverageParams.from_section(s))

    def filter_corpora(self) -> Dict[str, Mapping[str, Any]]:
        return {str(c.get("name")): c for c in self.filters.corpora}


__all__ = ["AlttextParams", "CoverageParams", "DEFAULT_PIPELINES", "DEFAULT_VOCABULARIES", "FilterParams", "SECTION",
           "dedup_option", "size_matched_options"]
