"""Which scene-graph parser a command or params file asks for: the offline parser (a stand-in,
run in this process) or :class:`~capaudit.detail.parsers.LLMSceneGraphParser`.

Kept apart from :mod:`.parsers`, which :mod:`capaudit.standins.scene_graph` imports (its names and
:class:`~capaudit.detail.parsers.ParseResult`), so that no import circle forms.
"""

from __future__ import annotations

from typing import Any

from .parsers import LLMSceneGraphParser, SceneGraphParser


def offline_parser() -> SceneGraphParser:
    """The offline parser run in this process (:class:`capaudit.standins.scene_graph.OfflineSceneGraphParser`)."""
    from capaudit.standins.scene_graph import OfflineSceneGraphParser

    return OfflineSceneGraphParser()


def make_parser(kind: str, **kwargs: Any) -> SceneGraphParser:
    """``claims`` → the offline parser (:func:`offline_parser`); ``llm`` → :class:`LLMSceneGraphParser`
    (kwargs: ``urls``, ``model``, ``store`` …)."""
    if kind in ("claims", "offline"):
        return offline_parser()
    if kind == "llm":
        return LLMSceneGraphParser(**kwargs)
    raise ValueError(f"unknown scene-graph parser {kind!r}; expected 'claims' or 'llm'")


__all__ = ["make_parser", "offline_parser"]
