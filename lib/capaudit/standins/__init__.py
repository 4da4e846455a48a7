"""Every offline stand-in model behind one door: rule-based backends that answer like a model.

Each module registers its backends with ``capaudit serve``'s registry
(:func:`capaudit.llm.backends.register_backend`) together with a **model card**
(:class:`capaudit.llm.cards.ModelCard`, read from ``cards.yaml``: name, kind ``heuristic``,
version, label, one-line caveat). The server declares those cards (``GET /v1/models``, and every
completion), the client records them beside its response store, and the stages derive every
label, caveat and offline flag from the recorded card, never from a model name.

* :mod:`.claims_extractor` — ``capaudit-heuristic-extractor`` (spaCy + rules; claims);
* :mod:`.judges` — ``capaudit-offline-annotation-judge`` and ``capaudit-offline-refcaption-judge``;
* :mod:`.captioner` — ``capaudit-offline-coco-captioner`` (captions composed from COCO annotations);
* :mod:`.scene_graph` — ``capaudit-offline-scene-graph`` and ``capaudit-template-realiser``.

Only the server (:func:`capaudit.llm.server.registry`) imports this package; the stand-ins may
import the stage packages' pure helpers (prompt parsing, schemas), never the other way round
(tests/test_import_seams.py).
"""

from . import captioner, claims_extractor, judges, scene_graph  # noqa: F401  (each registers its backends)
from .cards import card, cards

__all__ = ["captioner", "card", "cards", "claims_extractor", "judges", "scene_graph"]
