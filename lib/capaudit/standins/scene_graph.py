"""The offline scene-graph parser and its ``capaudit serve`` backends (stand-ins of the detail stage).

* ``capaudit-offline-scene-graph`` — :class:`OfflineSceneGraphParser`, a **heuristic baseline**:
  the claims stand-in's rule-based extractor (:mod:`capaudit.standins.claims_extractor`, spaCy
  ``en_core_web_sm``) gives typed units with targets, and the graph is assembled from them plus
  the spaCy dependency parse (:func:`assemble_graph`):

  - objects O(c): the ``object`` units in lemma form (``extract_doc(doc, forms="lemma")``: noun-chunk
    heads with their noun compounds, lemmatised; one node per distinct phrase, so an object named
    twice is one node; the claims backend's units keep the caption's words instead);
  - attributes A(c): ``attribute`` units (``white refrigerator`` → ``white`` on *refrigerator*,
    kind ``attribute``, before the noun; ``woman standing`` → ``standing``, kind ``state``, after
    it), ``count`` units (``two mugs`` → ``two``, kind ``count``) and ``text_rendering`` units
    whose target is an object (kind ``text``); style/camera/lighting units describe the whole
    image, not an object, and are left out;
  - relations R(c): ``relation`` units ``<subject> <predicate> <object>`` (the subject is the
    unit's target, the object the longest object name ending the unit), plus two dependency
    rules the extractor does not cover: possessives (``the man's hat`` → *man* ``has`` *hat*)
    and noun-``of``-noun between two objects, conjuncts included (``a bowl of rice and beans`` →
    *bowl* ``of`` *rice*, *bowl* ``of`` *bean*).

  Served under that name it answers the scene-graph schema
  (:func:`capaudit.detail.graph.scene_graph_schema`), so ``capaudit detail score --graphs llm``
  runs end to end offline, and the indexed form
  (:mod:`capaudit.detail.indexed_graph`: the graph exactly as built,
  kinds and positions included) that the detail stage's default parser asks for
  (:class:`capaudit.detail.parser_factory.ServedSceneGraphParser`);
* ``capaudit-template-realiser`` — answers the realisation schema with the template realiser
  (:class:`capaudit.detail.subgraphs.TemplateRealiser`).

Both register with their model cards (``cards.yaml``) at import.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.detail.graph import SceneGraph, graph_to_llm
from capaudit.detail.parsers import OFFLINE_BACKEND_NAME, OFFLINE_PARSER_NAME, ParseResult
from capaudit.detail.subgraphs import REALISER_NAME, TemplateRealiser
from capaudit.io.canonical_json import dumps_bytes

from .cards import card

#: the parser's model card (label; version = its rules + the extractor's)
CARD = card(OFFLINE_BACKEND_NAME)
REALISER_CARD = card(REALISER_NAME)
OFFLINE_PARSER_LABEL = CARD.label
OFFLINE_PARSER_VERSION = CARD.version


def _shared_extractor() -> Any:
    """The claims backend's :class:`~capaudit.standins.claims_extractor.HeuristicExtractor`
    (loaded on first use), so spaCy loads once per process even when both offline backends are served."""
    from .claims_extractor import DEFAULT_BACKEND as CLAIMS_BACKEND

    return CLAIMS_BACKEND.extractor


def offline_revision() -> str:
    """Rule-set version of the offline parser (and the extractor under it, ``cards.yaml``): hashed
    into request ids when the offline backend answers through the model-call layer, so changed rules
    never reuse old answers."""
    return CARD.version


def _object_suffix(rest: str, names: Sequence[str]) -> Optional[Tuple[str, str]]:
    """``(predicate, object name)`` for ``rest`` = ``<predicate> <object>``: the longest object
    name that ends ``rest`` after a space."""
    best: Optional[Tuple[str, str]] = None
    for n in names:
        if rest.endswith(" " + n) and (best is None or len(n) > len(best[1])):
            pred = rest[: -len(n) - 1].strip()
            if pred:
                best = (pred, n)
    return best


def assemble_graph(units: Sequence[Mapping[str, str]], doc: Any = None, parser: str = OFFLINE_PARSER_NAME
                   ) -> SceneGraph:
    """A scene graph from claims units (``{category, unit, span, target}``) and, if given, the
    spaCy ``doc`` of the same text (module docstring: the offline assembly rules)."""
    objects = [u["unit"] for u in units if u.get("category") == "object"]
    names = list(dict.fromkeys(objects))
    known = set(names)
    attrs: List[Tuple[str, str, str, str]] = []
    rels: List[Tuple[str, str, str]] = []
    unresolved = 0
    for u in units:
        cat, unit, target = u.get("category"), u.get("unit", ""), u.get("target", "")
        if cat == "attribute":
            if target not in known:
                unresolved += 1
                continue
            if unit.endswith(" " + target):
                attrs.append((target, unit[: -len(target) - 1], "attribute", "pre"))
            elif unit.startswith(target + " "):
                attrs.append((target, unit[len(target) + 1:], "state", "post"))
            else:
                attrs.append((target, unit, "attribute", "pre"))
        elif cat == "count":
            if target not in known:
                unresolved += 1
                continue
            words = unit.split()  # "two mugs", "pair of shoes": the number word comes first
            if words:
                attrs.append((target, words[0], "count", "pre"))
        elif cat == "text_rendering":
            if target in known:
                attrs.append((target, unit, "text", "post"))
        elif cat == "relation":
            if target not in known or not unit.startswith(target + " "):
                unresolved += 1
                continue
            hit = _object_suffix(unit[len(target) + 1:], names)
            if hit is None:
                unresolved += 1
                continue
            rels.append((target, hit[0], hit[1]))
    if doc is not None:
        rels += _dependency_relations(doc, known)
    meta: Dict[str, Any] = {}
    if unresolved:
        meta["unresolved_units"] = unresolved
    return SceneGraph.build(names, attrs, rels, parser=parser, meta=meta)


def _dependency_relations(doc: Any, known: set) -> List[Tuple[str, str, str]]:
    """Possessive and noun-of-noun relations between two objects of the graph (module docstring)."""
    from .claims_extractor import HeuristicExtractor

    def name(tok: Any) -> Optional[str]:
        n = HeuristicExtractor.object_name(tok)
        return n if n is not None and n in known else None

    out: List[Tuple[str, str, str]] = []
    for tok in doc:
        if tok.dep_ == "poss":  # "the man's hat" -> man has hat
            owner, owned = name(tok), name(tok.head)
            if owner and owned and owner != owned:
                out.append((owner, "has", owned))
        elif tok.dep_ == "prep" and tok.lower_ == "of":  # "a cup of coffee" -> cup of coffee
            head = name(tok.head)
            if head is None:
                continue
            for p in tok.children:
                if p.dep_ == "pobj":
                    for q in (p,) + tuple(p.conjuncts):  # "a bowl of broccoli and noodles"
                        tail = name(q)
                        if tail and tail != head:
                            out.append((head, "of", tail))
    return out


class OfflineSceneGraphParser:
    """``capaudit-offline-scene-graph``: claims units + spaCy dependencies (module docstring).

    ``extractor``: a :class:`~capaudit.standins.claims_extractor.HeuristicExtractor` (default: one shared per
    process, so spaCy loads once)."""

    name = OFFLINE_PARSER_NAME
    label = OFFLINE_PARSER_LABEL
    version = OFFLINE_PARSER_VERSION

    def __init__(self, extractor: Any = None, batch_size: int = 64):
        self._extractor = extractor
        self.batch_size = int(batch_size)

    @property
    def extractor(self) -> Any:
        if self._extractor is None:
            self._extractor = _shared_extractor()
        return self._extractor

    def parse(self, text: str) -> SceneGraph:
        """The graph of one caption."""
        return self.parse_many([text])[0].graph  # type: ignore[return-value]

    def parse_many(self, texts: Sequence[str], ids: Optional[Sequence[str]] = None) -> List[ParseResult]:
        ex = self.extractor
        out: List[ParseResult] = []
        for doc in ex.nlp.pipe(list(texts), batch_size=self.batch_size):
            out.append(ParseResult(assemble_graph(ex.extract_doc(doc, forms="lemma"), doc, parser=self.name)))
        return out


class SceneGraphBackend:
    """Answers scene-graph requests with the offline parser (reads ``caption=``, or ``caption_json=``
    for the indexed form, from the user message). Requests answered at the same time (``capaudit
    serve --workers N``) share one ``parse_many`` batch (:class:`~capaudit.standins.batching.MicroBatcher`;
    the graph of a caption does not depend on it)."""

    def __init__(self, parser: Optional[OfflineSceneGraphParser] = None):
        from .batching import MicroBatcher
        from .claims_extractor import NLP_LOCK

        self._parser = parser
        self._lock = NLP_LOCK
        self._batcher = MicroBatcher(lambda texts: [r.graph for r in self.parser.parse_many(list(texts))], lock=NLP_LOCK)

    @property
    def parser(self) -> OfflineSceneGraphParser:
        if self._parser is None:
            with self._lock:
                if self._parser is None:
                    self._parser = OfflineSceneGraphParser()
        return self._parser

    def graph(self, caption: str) -> SceneGraph:
        """The offline parser's graph of ``caption`` (batched with concurrent requests)."""
        return self._batcher(caption)

    def __call__(self, messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
        from capaudit.claims.prompts import parse_user_prompt, user_message_text
        from capaudit.detail.indexed_graph import indexed_answer, is_indexed_request, read_indexed_request
        from capaudit.llm.dialects import requested_schema

        text = user_message_text(messages)
        if is_indexed_request(requested_schema(payload)):  # the graph's own JSON form, caption as given
            return dumps_bytes(indexed_answer(self.graph(read_indexed_request(text)))).decode("utf-8")
        _, caption = parse_user_prompt(text)
        return dumps_bytes(graph_to_llm(self.graph(caption))).decode("utf-8")


DEFAULT_BACKEND = SceneGraphBackend()


def realiser_backend(messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
    """``capaudit serve`` backend: the template realiser answering
    :func:`capaudit.detail.subgraphs.realise_schema`."""
    user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    content = user.get("content") if user else ""
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    pos = str(content).rfind("\nscene_graph=")
    if pos < 0:
        raise ValueError("user message has no 'scene_graph=' line")
    graph = SceneGraph.from_json(json.loads(str(content)[pos + len("\nscene_graph="):]))
    return dumps_bytes({"caption": TemplateRealiser().realise(graph) or "(empty scene)"}).decode("utf-8")


def register_offline_backends() -> None:
    """Register :data:`OFFLINE_BACKEND_NAME` and the template realiser with ``capaudit serve``
    (idempotent; done at import)."""
    from capaudit.llm.backends import register_backend

    register_backend(OFFLINE_BACKEND_NAME, DEFAULT_BACKEND, card=CARD)
    register_backend(REALISER_NAME, realiser_backend, card=REALISER_CARD)



register_offline_backends()

__all__ = ["CARD", "OFFLINE_BACKEND_NAME", "OFFLINE_PARSER_LABEL", "OFFLINE_PARSER_VERSION", "OfflineSceneGraphParser",
           "REALISER_CARD", "REALISER_NAME", "SceneGraphBackend", "DEFAULT_BACKEND", "assemble_graph", "offline_revision",
           "realiser_backend", "register_offline_backends"]
