"""Offline model-call backends of the detail stage, registered with ``capaudit serve`` at import.

* ``capaudit-offline-scene-graph`` — answers the scene-graph schema
  (:func:`capaudit.detail.graph.scene_graph_schema`) with the offline parser (claims units + spaCy;
  a heuristic baseline), so ``capaudit detail score --graphs llm`` runs end to end offline;
* ``capaudit-template-realiser`` — answers the realisation schema with the template realiser.

``capaudit.llm.backends`` imports plugin modules named in its ``PLUGIN_MODULES``; until this module
is listed there, serve them with ``capaudit serve --backend
capaudit-offline-scene-graph=capaudit.detail.parsers:DEFAULT_BACKEND`` (and
``capaudit-template-realiser=capaudit.detail.subgraphs:realiser_backend``).
"""

from __future__ import annotations

from .parsers import OFFLINE_BACKEND_NAME, register_offline_backends
from .subgraphs import REALISER_NAME

register_offline_backends()

__all__ = ["OFFLINE_BACKEND_NAME", "REALISER_NAME"]
