"""The detail stage's backends from its params: scene-graph parser, grounding and ITM scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

from capaudit.errors import InputError


def build_backends(section: Mapping[str, Any], artifacts: Path) -> Tuple[Any, Any, Any]:
    """``(parser, grounding, itm scorer)`` from the params section (``parser: claims``: the offline
    stand-in served by ``capaudit serve`` in this process, :func:`~capaudit.detail.parser_factory.offline_parser`;
    its name and label are those of the model card the server declares)."""
    from .grounding import CocoGrounding, parse_grounding_specs
    from .itm import make_itm_scorer
    from .parser_factory import offline_parser
    from .parsers import LLMSceneGraphParser

    kind = section.get("parser", "claims")
    if kind == "llm":
        urls = section.get("url")
        if not urls or not section.get("model"):
            raise InputError("detail.parser llm needs 'url' and 'model'", field="detail.url")
        parser: Any = LLMSceneGraphParser([urls] if isinstance(urls, str) else list(urls), str(section["model"]),
                                          artifacts / "scene_graph_responses.jsonl", revision=section.get("revision"),
                                          concurrency=int(section.get("concurrency", 8)))
    elif kind in ("claims", "offline"):
        # the offline stand-in, answered by capaudit serve in this process through the model-call layer;
        # its answers stay in the parser's temporary store (the artifacts are the same bytes run to run)
        parser = offline_parser()
    else:
        raise InputError(f"detail.parser must be 'claims' or 'llm', got {kind!r}", field="detail.parser")
    g = section.get("grounding", "coco_mini")
    if g == "coco_mini":
        grounding: Any = CocoGrounding.coco_mini()
    else:
        grounding = parse_grounding_specs([g] if isinstance(g, str) else list(g or []))
    itm = make_itm_scorer(section.get("itm", "annotation_precision"), grounding, parser)
    return parser, grounding, itm


def backend_spec(section: Mapping[str, Any]) -> Any:
    """The :class:`~capaudit.detail.sharded.BackendSpec` of the params section (what engine workers
    build once each: the offline parser, served by ``capaudit serve`` in each worker, the grounding
    and the ITM scorer)."""
    from .sharded import BackendSpec

    kind = section.get("parser", "claims")
    if kind not in ("claims", "offline"):
        raise InputError("detail.parser llm is not sharded (its model calls already run `concurrency` at a time): "
                         "set detail.engine: local and detail.workers: 1", field="detail.engine")
    g = section.get("grounding", "coco_mini")
    grounding = (g,) if isinstance(g, str) else tuple(str(x) for x in (g or []))
    spec = BackendSpec("claims", grounding, section.get("itm", "annotation_precision"))
    spec.validate()
    return spec


def backend_names(parser: Any, grounding: Any, itm: Any) -> Dict[str, str]:
    """The printed name of each backend (``parser``, ``grounding``, ``itm``)."""
    return {"parser": getattr(parser, "label", parser.name),
            "grounding": grounding.label if grounding is not None else "none (ICR unavailable)",
            "itm": itm.label if itm is not None else "none"}


def offline_backends(names: Mapping[str, str], parser: Any = None) -> List[str]:
    """The backends (of :func:`backend_names`) that are offline heuristics or stand-ins, not models:
    the parser as the model cards that answered it say (its ``offline``); grounding and ITM, which
    are computed here, not asked of a model, as their own labels say."""
    out = []
    for k, v in names.items():
        if k == "parser" and parser is not None and hasattr(parser, "offline"):
            if parser.offline:
                out.append(k)
        elif "offline" in v or "heuristic" in v:
            out.append(k)
    return out


__all__ = ["backend_names", "backend_spec", "build_backends", "offline_backends"]
