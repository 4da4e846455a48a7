"""Scene-graph parsers behind one interface (issue 13, "Scene graph").

Every parser has a ``name`` (written into every output) and ``parse_many(texts, ids) ->
[ParseResult]``; a :class:`ParseResult` holds the graph or, for a failed model call, ``None`` and
the reason.

* :class:`OfflineSceneGraphParser` — ``capaudit-offline-scene-graph``, a **heuristic baseline**:
  the claims stage's rule-based extractor (:mod:`capaudit.claims.offline`, spaCy
  ``en_core_web_sm``) gives typed units with targets, and the graph is assembled from them plus
  the spaCy dependency parse:

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

* :class:`LLMSceneGraphParser` — a model through the model-call layer: one content-addressed
  request per caption (task ``detail_scene_graph``, our instruction :data:`SYSTEM_PROMPT` /
  :func:`user_prompt`, schema :func:`~capaudit.detail.graph.scene_graph_schema`), answered by
  :func:`capaudit.llm.client.run_requests` into a resumable response store; the graph's parser
  name is the model name.

:data:`OFFLINE_BACKEND_NAME` is also registered as a ``capaudit serve`` backend that answers the
scene-graph schema with the offline parser, so the model path can run end to end offline (the
name travels into every response row).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

from capaudit.io.canonical_json import canonical, dumps_bytes

from .graph import SceneGraph, graph_from_llm, graph_to_llm, scene_graph_schema

OFFLINE_PARSER_NAME = "capaudit-offline-scene-graph"
OFFLINE_PARSER_LABEL = "capaudit-offline-scene-graph (claims units + spaCy; heuristic baseline)"
OFFLINE_PARSER_VERSION = "sg-offline-v1"
OFFLINE_BACKEND_NAME = OFFLINE_PARSER_NAME

TASK = "detail_scene_graph"
TASK_VERSION = 1
#: Bump whenever any character of SYSTEM_PROMPT, _RULES or the user-prompt layout changes: the
#: request id hashes it, so a changed prompt never reuses an old answer.
PROMPT_VERSION = "capaudit-scene-graph-v1"


@dataclass(frozen=True)
class ParseResult:
    """A parsed graph, or ``None`` with the reason when the parser could not produce one."""

    graph: Optional[SceneGraph]
    error: Optional[str] = None


class SceneGraphParser(Protocol):
    """One parser interface: ``name`` travels into outputs; ``parse_many`` keeps input order."""

    name: str
    label: str

    def parse_many(self, texts: Sequence[str], ids: Optional[Sequence[str]] = None) -> List[ParseResult]:
        ...


# -- offline ------------------------------------------------------------------------------------
def _shared_extractor() -> Any:
    """The claims backend's :class:`~capaudit.claims.offline.HeuristicExtractor` (loaded on first
    use), so spaCy loads once per process even when both offline backends are served."""
    from capaudit.claims.offline import DEFAULT_BACKEND as CLAIMS_BACKEND

    return CLAIMS_BACKEND.extractor


def offline_revision() -> str:
    """Rule-set version of the offline parser (and the extractor under it): hashed into request ids
    when the offline backend answers through the model-call layer, so changed rules never reuse
    old answers."""
    from capaudit.claims.offline import EXTRACTOR_VERSION

    return f"{OFFLINE_PARSER_VERSION}+{EXTRACTOR_VERSION}"


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
    from capaudit.claims.offline import HeuristicExtractor

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

    ``extractor``: a :class:`~capaudit.claims.offline.HeuristicExtractor` (default: one shared per
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


# -- LLM ----------------------------------------------------------------------------------------
SYSTEM_PROMPT = (
    "You convert an image caption into a scene graph: the objects the caption mentions, the "
    "attributes it gives each object, and the relations it states between two objects. Use only "
    "what the caption says; add nothing from world knowledge or guesses about the image. Reply "
    "with compact, valid JSON and nothing else."
)
_RULES = (
    "objects: every concrete thing, person, animal or scene element the caption mentions, each once, "
    "named by a short noun phrase in the singular (\"dog\", \"tennis racket\"); an object mentioned "
    "twice is listed once.",
    "attributes: short phrases the caption attaches to that object: colour, material, size, shape, "
    "texture, pose, action or state, clothing, a number (\"two\"), or text written on it.",
    "relations: subject, predicate, object, where subject and object are names from your objects list "
    "and predicate is the spatial relation or action linking them (\"on\", \"next to\", \"holding\").",
    "Leave out negated or absent things, the image's style, camera and lighting, and remarks about "
    "the picture itself.",
    "If the caption mentions no object, return empty lists.",
)
USER_HEADER = "Build the scene graph of this caption."
SCHEMA_LINE = "Answer only with JSON that matches this schema:"


def user_prompt(caption_id: str, caption: str, schema: Mapping[str, Any]) -> str:
    """The user message for one caption (newlines in the caption become spaces)."""
    lines = [USER_HEADER, "Rules:"]
    lines += [f"{i}. {r}" for i, r in enumerate(_RULES, start=1)]
    lines += [SCHEMA_LINE, canonical(schema), f"caption_id={caption_id}",
              "caption=" + " ".join(caption.split())]
    return "\n".join(lines)


def build_scene_graph_request(caption: str, caption_id: str, model: str, revision: Optional[str] = None,
                              max_tokens: int = 1024, temperature: float = 0.0,
                              meta: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """One content-addressed request row (:func:`capaudit.llm.requests.make_request`)."""
    from capaudit.llm.requests import make_request

    schema = scene_graph_schema()
    return make_request(
        task=TASK, task_version=TASK_VERSION, model=model, revision=revision, prompt_version=PROMPT_VERSION,
        schema=schema,
        messages=[{"role": "system", "content": SYSTEM_PROMPT},
                  {"role": "user", "content": user_prompt(caption_id, caption, schema)}],
        decoding={"temperature": float(temperature), "max_tokens": int(max_tokens)},
        input={"caption_id": caption_id, "caption": caption}, meta=meta)


class LLMSceneGraphParser:
    """Scene graphs from a model served behind an OpenAI-compatible endpoint (module docstring).

    ``store``: the response store (file or directory); answered request ids are not asked again.
    Extra keyword arguments go to :func:`capaudit.llm.client.run_requests`.
    """

    def __init__(self, urls: Sequence[str], model: str, store: Union[str, Path], revision: Optional[str] = None,
                 concurrency: int = 8, timeout: float = 240.0, dialect: str = "vllm", max_tokens: int = 1024,
                 progress: bool = False, **run_kwargs: Any):
        if not urls:
            raise ValueError("LLMSceneGraphParser: at least one URL is needed")
        if not model:
            raise ValueError("LLMSceneGraphParser: a model name is needed")
        self.urls = list(urls)
        self.model = model
        self.store = Path(store)
        self.revision = revision if revision is not None or model != OFFLINE_BACKEND_NAME else offline_revision()
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self.dialect = dialect
        self.max_tokens = int(max_tokens)
        self.progress = progress
        self.run_kwargs = run_kwargs
        self.name = model
        self.label = (OFFLINE_PARSER_LABEL + " via the model-call layer") if model == OFFLINE_BACKEND_NAME \
            else f"{model} (LLM scene-graph parser)"
        self.last_stats: Optional[Dict[str, Any]] = None

    def requests(self, texts: Sequence[str], ids: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
        ids = list(ids) if ids is not None else [str(i) for i in range(len(texts))]
        if len(ids) != len(texts):
            raise ValueError(f"{len(texts)} captions but {len(ids)} ids")
        return [build_scene_graph_request(t, cid, self.model, self.revision, self.max_tokens, meta={"row": i})
                for i, (t, cid) in enumerate(zip(texts, ids))]

    def parse_many(self, texts: Sequence[str], ids: Optional[Sequence[str]] = None) -> List[ParseResult]:
        from capaudit.llm.client import run_requests
        from capaudit.llm.store import merge

        rows = self.requests(texts, ids)
        self.store.parent.mkdir(parents=True, exist_ok=True)
        stats = run_requests(rows, str(self.store), self.urls, self.model, concurrency=self.concurrency,
                             timeout=self.timeout, dialect=self.dialect, resume=True, progress=self.progress,
                             handle_signals=False, **self.run_kwargs)
        self.last_stats = stats.to_dict()
        answers = merge(self.store) if self.store.exists() else {}
        out: List[ParseResult] = []
        for r in rows:
            a = answers.get(r["request_id"])
            if a is None:
                out.append(ParseResult(None, "not answered"))
            elif not a.get("ok"):
                out.append(ParseResult(None, f"{a.get('error_kind')}: {a.get('error')}"))
            else:
                try:
                    out.append(ParseResult(graph_from_llm(a.get("parsed"), parser=a.get("model") or self.model)))
                except ValueError as exc:
                    out.append(ParseResult(None, str(exc)))
        return out


# -- offline backend for `capaudit serve` -------------------------------------------------------
class SceneGraphBackend:
    """Answers scene-graph requests with the offline parser (reads ``caption=`` from the user message)."""

    def __init__(self, parser: Optional[OfflineSceneGraphParser] = None):
        self._parser = parser

    @property
    def parser(self) -> OfflineSceneGraphParser:
        if self._parser is None:
            self._parser = OfflineSceneGraphParser()
        return self._parser

    def __call__(self, messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
        from capaudit.claims.prompts import parse_user_prompt, user_message_text

        _, caption = parse_user_prompt(user_message_text(messages))
        return dumps_bytes(graph_to_llm(self.parser.parse(caption))).decode("utf-8")


DEFAULT_BACKEND = SceneGraphBackend()


def register_offline_backends() -> None:
    """Register :data:`OFFLINE_BACKEND_NAME` (and the template realiser) with ``capaudit serve``."""
    from capaudit.llm.backends import register_backend

    from .subgraphs import REALISER_NAME, realiser_backend

    register_backend(OFFLINE_BACKEND_NAME, DEFAULT_BACKEND)
    register_backend(REALISER_NAME, realiser_backend)


def make_parser(kind: str, **kwargs: Any) -> SceneGraphParser:
    """``claims`` → :class:`OfflineSceneGraphParser`; ``llm`` → :class:`LLMSceneGraphParser` (kwargs:
    ``urls``, ``model``, ``store`` …)."""
    if kind in ("claims", "offline"):
        return OfflineSceneGraphParser()
    if kind == "llm":
        return LLMSceneGraphParser(**kwargs)
    raise ValueError(f"unknown scene-graph parser {kind!r}; expected 'claims' or 'llm'")


__all__ = [
    "OFFLINE_PARSER_NAME", "OFFLINE_PARSER_LABEL", "OFFLINE_PARSER_VERSION", "OFFLINE_BACKEND_NAME", "TASK",
    "TASK_VERSION", "PROMPT_VERSION", "SYSTEM_PROMPT", "ParseResult", "SceneGraphParser", "OfflineSceneGraphParser",
    "LLMSceneGraphParser", "assemble_graph", "offline_revision", "build_scene_graph_request", "user_prompt", "SceneGraphBackend",
    "DEFAULT_BACKEND", "register_offline_backends", "make_parser",
]
