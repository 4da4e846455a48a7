"""The ``detail:`` params section (and ``capaudit detail score`` options) as one frozen value: the
detail stage's only defaults.

An unknown key or a value of the wrong type is refused in one line naming the params file, the
section and the key (``params/x.yaml: detail.selection.k: ...``), through
:class:`capaudit.config.ParamsSection`. The keys are listed in :mod:`capaudit.detail.stage`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple, Union

from capaudit.config import ParamsSection, PathLike
from capaudit.engine.executors import ENGINE_KEYS, EngineParams
from capaudit.errors import InputError

from .metrics import DEFAULT_LENGTH_UNIT, DEFAULT_RELATION_ENDS, LENGTH_UNITS, RELATION_ENDS
from .selection import STRATEGIES
from .subgraphs import FRACTIONS, MEASURES, TOLERANCE

SECTION = "detail"
#: parser kinds: the offline parser (``claims``; ``offline`` is the same) or a model (``llm``)
OFFLINE_PARSERS = ("claims", "offline")
PARSERS = OFFLINE_PARSERS + ("llm",)
#: the stage's grounding and ITM scorer (COCO-MINI's instance masks, the annotation-precision stand-in)
STAGE_GROUNDING: Tuple[str, ...] = ("coco_mini",)
STAGE_ITM = "annotation_precision"
#: ``capaudit detail score``'s: a caption file has no grounding source and no ITM scorer unless asked
SCORE_GROUNDING: Tuple[str, ...] = ()
SCORE_ITM = "none"
#: the stage's LLM parser response store, in ``artifacts/detail/``
STAGE_RESPONSES = "scene_graph_responses.jsonl"

Count = Union[int, float]


@dataclass(frozen=True)
class SurfaceSpec:
    """One item of ``detail.surfaces``: ``source: coco_mini`` or a JSONL ``path`` (``{artifacts}``,
    ``{data}`` expanded when loaded)."""

    name: str
    label: str
    source: Optional[str] = None
    path: Optional[str] = None
    caption_field: str = "caption"
    image_field: str = "image"
    id_field: Optional[str] = "id"  # None / "": ids are <surface>:<row>
    skip_empty: bool = False
    on_missing: str = "error"  # or skip: a file not there is skipped (named in skipped_surfaces)

    KEYS = ("name", "label", "source", "path", "caption_field", "image_field", "id_field", "skip_empty",
            "on_missing")

    @classmethod
    def from_item(cls, item: Any, i: int, top: ParamsSection) -> "SurfaceSpec":
        where = str(top.path) if top.path is not None else "params"
        if isinstance(item, str):
            item = {"name": item, "source": "coco_mini"} if item == "coco_human" else {"name": item}
        if not isinstance(item, Mapping) or not item.get("name"):
            raise InputError(f"detail.surfaces item {i} must be a mapping with 'name'", path=where, field="surfaces")
        s = ParamsSection(item, f"{top.name}.surfaces[{i}]", top.path).only(cls.KEYS)
        name = str(item["name"])
        source = s.raw("source")
        if source != "coco_mini" and not item.get("path"):
            raise InputError(f"detail surface {name!r} needs 'source: coco_mini' or a 'path'", path=where,
                             field="surfaces")
        id_field = s.raw("id_field", cls.id_field)
        return cls(name=name, label=str(item.get("label", name)), source=None if source is None else str(source),
                   path=str(item["path"]) if item.get("path") else None,
                   caption_field=str(s.raw("caption_field", cls.caption_field)),
                   image_field=str(s.raw("image_field", cls.image_field)),
                   id_field=str(id_field) if id_field else None, skip_empty=bool(s.raw("skip_empty", cls.skip_empty)),
                   on_missing=s.text("on_missing", cls.on_missing, ("error", "skip")))


DEFAULT_SURFACES: Tuple[SurfaceSpec, ...] = (SurfaceSpec("coco_human", "COCO human", source="coco_mini"),)


@dataclass(frozen=True)
class BootstrapParams:
    """``detail.bootstrap``: image-cluster bootstrap of the surface means."""

    n_resamples: int = 2000
    seed: int = 1477
    confidence: float = 0.95

    KEYS = ("n_resamples", "seed", "confidence")

    @classmethod
    def from_section(cls, top: ParamsSection) -> "BootstrapParams":
        s = top.sub("bootstrap").only(cls.KEYS)
        confidence = s.number("confidence", cls.confidence, 0)
        if not 0 < confidence < 1:
            raise s.error("confidence", f"expected a number in (0, 1), got {confidence!r}")
        return cls(s.integer("n_resamples", cls.n_resamples), s.integer("seed", cls.seed, None), confidence)

    def to_dict(self) -> dict:
        """As the tables and manifests write it (with the resampling unit)."""
        return {"n_resamples": self.n_resamples, "seed": self.seed, "confidence": self.confidence,
                "unit": "image clusters"}


def _count(s: ParamsSection, key: str, default: Count) -> Count:
    """K / T: a count >= 1 or a proportion in (0, 1], kept as written (int or float)."""
    value = s.raw(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0 or \
            (isinstance(value, float) and value > 1):
        raise s.error(key, f"expected a count >= 1 or a proportion in (0, 1], got {value!r}")
    return value


@dataclass(frozen=True)
class SelectionParams:
    """``detail.selection``: every strategy on one surface's pool, K and T counts or proportions of it."""

    surface: Optional[str] = None  # None: the first loaded surface
    k: Count = 0.6
    t: Count = 0.4
    seed: int = 0
    strategies: Tuple[str, ...] = tuple(STRATEGIES)

    KEYS = ("surface", "k", "t", "seed", "strategies")

    @classmethod
    def from_section(cls, top: ParamsSection) -> "SelectionParams":
        s = top.sub("selection").only(cls.KEYS)
        strategies = s.names("strategies", None) or cls.strategies
        for name in strategies:
            if name not in STRATEGIES:
                raise s.error("strategies", f"unknown strategy {name!r} (known: {', '.join(STRATEGIES)})")
        return cls(surface=s.text("surface", None), k=_count(s, "k", cls.k), t=_count(s, "t", cls.t),
                   seed=s.integer("seed", cls.seed, 0), strategies=tuple(strategies))


@dataclass(frozen=True)
class SubgraphParams:
    """``detail.subgraphs``: controlled subgraphs of a seeded caption sample."""

    surface: Optional[str] = None  # None: the selection surface
    n_captions: int = 100
    seed: int = 0
    fractions: Tuple[float, ...] = FRACTIONS
    tolerance: float = TOLERANCE
    measures: Tuple[str, ...] = MEASURES

    KEYS = ("surface", "n_captions", "seed", "fractions", "tolerance", "measures")

    @classmethod
    def from_section(cls, top: ParamsSection) -> "SubgraphParams":
        s = top.sub("subgraphs").only(cls.KEYS)
        fractions = s.raw("fractions", cls.fractions)
        if not isinstance(fractions, (list, tuple)) or not fractions or any(
                isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f < 1 for f in fractions):
            raise s.error("fractions", f"expected a non-empty list of numbers in (0, 1), got {fractions!r}")
        tolerance = s.number("tolerance", cls.tolerance, 0)
        if tolerance >= 1:
            raise s.error("tolerance", f"expected a number in [0, 1), got {tolerance!r}")
        measures = s.names("measures", cls.measures)
        for m in measures:
            if m not in MEASURES:
                raise s.error("measures", f"unknown measure {m!r} (known: {', '.join(MEASURES)})")
        return cls(surface=s.text("surface", None), n_captions=s.integer("n_captions", cls.n_captions, 0),
                   seed=s.integer("seed", cls.seed, 0), fractions=tuple(float(f) for f in fractions),
                   tolerance=tolerance, measures=tuple(measures))


@dataclass(frozen=True)
class DetailParams:
    """The detail stage's settings (``detail:``) or those of ``capaudit detail score`` (:meth:`from_args`)."""

    # the scene-graph parser
    parser: str = "claims"
    urls: Tuple[str, ...] = ()  # parser llm: OpenAI-compatible servers
    model: Optional[str] = None
    revision: Optional[str] = None
    responses: Optional[str] = None  # parser llm's response store (None: the stage's, STAGE_RESPONSES)
    concurrency: int = 8
    timeout: float = 240.0
    retries: int = 3
    dialect: str = "vllm"
    max_tokens: int = 1024
    # grounding, ITM
    grounding: Tuple[str, ...] = STAGE_GROUNDING
    itm: Optional[str] = STAGE_ITM
    image_root: Optional[str] = None
    # the measures
    relation_ends: str = DEFAULT_RELATION_ENDS
    length_unit: str = DEFAULT_LENGTH_UNIT
    engine: EngineParams = EngineParams()
    # the stage
    surfaces: Tuple[SurfaceSpec, ...] = DEFAULT_SURFACES
    bootstrap: BootstrapParams = BootstrapParams()
    selection: SelectionParams = SelectionParams()
    subgraphs: SubgraphParams = SubgraphParams()
    figure_bins: int = 5  # figures.bins: quantile bins of the ITM figure

    KEYS = ("parser", "url", "model", "revision", "concurrency", "timeout", "retries", "dialect", "max_tokens",
            "grounding", "itm", "relation_ends", "length_unit", "surfaces", "bootstrap", "selection", "subgraphs",
            "figures") + ENGINE_KEYS

    @classmethod
    def from_section(cls, section: Optional[Mapping[str, Any]], path: Optional[PathLike] = None) -> "DetailParams":
        """From the params section; an unknown key or a bad value names the file, section and key."""
        s = ParamsSection.of(section, SECTION, path).only(cls.KEYS)
        parser = s.text("parser", cls.parser, PARSERS)
        url = s.raw("url")
        urls = (url,) if isinstance(url, str) else tuple(str(u) for u in url or ())
        model, revision = s.raw("model"), s.raw("revision")
        engine = EngineParams.from_section(s)
        if parser == "llm":
            if not urls or not model:
                raise s.error("url", "parser llm needs 'url' and 'model'")
            if (engine.engine, engine.workers, engine.shards) != ("local", 1, None):
                raise s.error("engine", "parser llm is not sharded (its model calls already run `concurrency` at "
                                        "a time): set detail.engine: local and detail.workers: 1")
        g = s.raw("grounding", list(cls.grounding))
        if not (g is None or isinstance(g, str) or (isinstance(g, (list, tuple)))):
            raise s.error("grounding", f"expected a grounding spec or a list of them, got {g!r}")
        items = s.raw("surfaces") or None
        if items is not None and not isinstance(items, (list, tuple)):
            raise s.error("surfaces", f"expected a list of surfaces, got {items!r}")
        figures = s.sub("figures").only(("bins",))
        return cls(parser=parser, urls=urls, model=None if model is None else str(model),
                   revision=None if revision is None else str(revision),
                   concurrency=s.integer("concurrency", cls.concurrency), timeout=s.number("timeout", cls.timeout, 0),
                   retries=s.integer("retries", cls.retries, 0),
                   dialect=s.text("dialect", cls.dialect, ("vllm", "openai", "llamacpp")),
                   max_tokens=s.integer("max_tokens", cls.max_tokens),
                   grounding=(g,) if isinstance(g, str) else tuple(str(x) for x in g or ()),
                   itm=s.text("itm", cls.itm), relation_ends=s.text("relation_ends", cls.relation_ends, RELATION_ENDS),
                   length_unit=s.text("length_unit", cls.length_unit, LENGTH_UNITS), engine=engine,
                   surfaces=tuple(SurfaceSpec.from_item(x, i, s) for i, x in enumerate(items, start=1))
                   if items else cls.surfaces,
                   bootstrap=BootstrapParams.from_section(s), selection=SelectionParams.from_section(s),
                   subgraphs=SubgraphParams.from_section(s), figure_bins=figures.integer("bins", cls.figure_bins))

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "DetailParams":
        """From the ``capaudit detail score`` options (:func:`capaudit.detail.cli.register`)."""
        return cls(parser=args.graphs, urls=tuple(args.url), model=args.model, revision=args.revision,
                   responses=args.responses, concurrency=args.concurrency, timeout=args.timeout,
                   retries=args.retries, dialect=args.dialect, max_tokens=args.max_tokens,
                   grounding=tuple(args.grounding), itm=args.itm, image_root=args.image_root,
                   relation_ends=args.relation_ends, length_unit=args.length_unit,
                   engine=EngineParams.from_args(args))

    @property
    def offline_parser(self) -> bool:
        """The offline parser (served by ``capaudit serve``), not a model's."""
        return self.parser in OFFLINE_PARSERS

    @property
    def sharded(self) -> bool:
        """Scored in slices on the engine (any engine setting but one local worker and no shards)."""
        e = self.engine
        return (e.engine, e.workers, e.shards) != ("local", 1, None)


__all__ = ["BootstrapParams", "DEFAULT_SURFACES", "DetailParams", "OFFLINE_PARSERS", "PARSERS", "SCORE_GROUNDING",
           "SCORE_ITM", "SECTION", "STAGE_GROUNDING", "STAGE_ITM", "STAGE_RESPONSES", "SelectionParams",
           "SubgraphParams", "SurfaceSpec"]
