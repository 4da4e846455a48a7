"""The detail stage's backends from its params: scene-graph parser, grounding and ITM scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple, Union

from capaudit.errors import InputError

from .params import DetailParams


def build_backends(params: DetailParams, responses: Union[str, Path, None] = None,
                   itm_parser: bool = True, itm_field: str = "detail.itm") -> Tuple[Any, Any, Any]:
    """``(parser, grounding, itm scorer)`` of the params (the stage's and ``capaudit detail score``'s step).

    ``parser: claims``: the offline stand-in served by ``capaudit serve`` in this process
    (:func:`~capaudit.detail.parser_factory.offline_parser`; its name and label are those of the model
    card the server declares); ``llm``: :class:`~capaudit.detail.parsers.LLMSceneGraphParser`, its
    answers in ``responses`` (default ``params.responses``). ``itm_parser``: the annotation-precision
    scorer gets the parser (builds graphs when it is given none); the CLI gives it only the offline one.
    A bad ITM spec is an :class:`InputError` naming ``itm_field``.
    """
    from .grounding import parse_grounding_specs
    from .itm import make_itm_scorer
    from .parser_factory import offline_parser
    from .parsers import LLMSceneGraphParser

    if params.parser == "llm":
        store = responses if responses is not None else params.responses
        parser: Any = LLMSceneGraphParser(list(params.urls), str(params.model), store, revision=params.revision,
                                          concurrency=params.concurrency, timeout=params.timeout,
                                          dialect=params.dialect, max_tokens=params.max_tokens,
                                          retries=params.retries)
    else:
        # the offline stand-in, answered by capaudit serve in this process through the model-call layer;
        # its answers stay in the parser's temporary store (the artifacts are the same bytes run to run)
        parser = offline_parser()
    grounding = parse_grounding_specs(list(params.grounding))
    try:
        itm = make_itm_scorer(params.itm, grounding, parser if itm_parser or params.offline_parser else None,
                              params.image_root)
    except ValueError as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(str(exc), field=itm_field) from None
    return parser, grounding, itm


def backend_spec(params: DetailParams) -> Any:
    """The :class:`~capaudit.detail.sharded.BackendSpec` of the params (what engine workers build once
    each: the offline parser, served by ``capaudit serve`` in each worker, the grounding and the ITM
    scorer); checked, nothing loaded."""
    from .sharded import BackendSpec

    if not params.offline_parser:
        raise InputError("detail.parser llm is not sharded (its model calls already run `concurrency` at a time): "
                         "set detail.engine: local and detail.workers: 1", field="detail.engine")
    spec = BackendSpec("claims", tuple(params.grounding), params.itm, params.image_root)
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
