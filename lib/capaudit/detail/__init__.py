"""Caption detailness (issue 13): scene graphs, ICR (Eq. 2), AOD (Eq. 4), CD (Eq. 5) and
ITM-then-detailness data selection.

Modules:

* :mod:`~capaudit.detail.graph` — :class:`SceneGraph` O(c), A(c), R(c); the LLM scene-graph schema;
* :mod:`~capaudit.detail.parsers` — parsers behind one interface: the offline
  ``capaudit-offline-scene-graph`` (claims units + spaCy; a heuristic baseline) and the LLM parser
  through the model-call layer;
* :mod:`~capaudit.detail.grounding` — grounding backends: COCO instance masks (``pycocotools``,
  lexicon-matched; *things-only ICR*), the segmentation-model slot;
* :mod:`~capaudit.detail.panoptic` — COCO panoptic masks (things and stuff; *things+stuff ICR*);
* :mod:`~capaudit.detail.metrics` — ICR, AOD (``relation_ends``: Eq. 3 ``subject`` by default), CD, Length;
* :mod:`~capaudit.detail.itm` — ITM scorers: CLIP family (lazy ``torch``/``transformers``/
  ``open_clip``) and the offline CHAIR-style ``annotation-precision`` stand-in;
* :mod:`~capaudit.detail.selection` — ITM pruning to K then top T by CD, baselines, ablations;
* :mod:`~capaudit.detail.subgraphs` — controlled subgraphs at 20/40/60/80 % of ICR or AOD and their
  realisation (template baseline or a model);
* :mod:`~capaudit.detail.export` — JSONL + Parquet + WebDataset-style manifest of a subset;
* :mod:`~capaudit.detail.score` — file-level scoring (``capaudit detail score``);
* :mod:`~capaudit.detail.surfaces`, :mod:`~capaudit.detail.backends` — the stage's caption surfaces and
  backends from its params; :mod:`~capaudit.detail.definitions` — the ICR and relation-count definitions;
* :mod:`~capaudit.detail.surface_report`, :mod:`~capaudit.detail.selection_report`,
  :mod:`~capaudit.detail.subgraph_report` — the rows of the stage's tables (the paper renders them);
  :mod:`~capaudit.detail.quoted_numbers` — the numbers the paper quotes;
* :mod:`~capaudit.detail.params` — the ``detail:`` params section (and ``capaudit detail score`` options) as
  one frozen :class:`~capaudit.detail.params.DetailParams`, the stage's only defaults;
* :mod:`~capaudit.detail.stage` — the demo stage (notebook ``09_detail``): named steps and a typed
  :class:`~capaudit.detail.stage.DetailResult`; :mod:`~capaudit.detail.cli`, which calls the same steps.
"""

from __future__ import annotations

from .graph import Attribute, Relation, SceneGraph, scene_graph_schema
from .metrics import RELATION_ENDS, aod, caption_length, cd, icr, score_graph
from .selection import STRATEGIES, select

__all__ = ["Attribute", "Relation", "SceneGraph", "scene_graph_schema", "RELATION_ENDS", "aod", "caption_length",
           "cd", "icr", "score_graph", "STRATEGIES", "select"]
