"""Scene-graph parsers behind one interface (issue 13, "Scene graph").

Every parser has a ``name`` (written into every output) and ``parse_many(texts, ids) ->
[ParseResult]``; a :class:`ParseResult` holds the graph or, for a failed model call, ``None`` and
the reason.

* the offline parser ``capaudit-offline-scene-graph`` (:func:`capaudit.detail.parser_factory.offline_parser`), a **heuristic
  baseline** built on the claims stand-in's rule-based extractor: a stand-in model, so it lives in
  :mod:`capaudit.standins.scene_graph` (its rules, and its ``capaudit serve`` backend);
* :class:`LLMSceneGraphParser` — a model through the model-call layer: one content-addressed
  request per caption (task ``detail_scene_graph``, our instruction :data:`SYSTEM_PROMPT` /
  :func:`user_prompt`, schema :func:`~capaudit.detail.graph.scene_graph_schema`), answered by
  :func:`capaudit.llm.client.run_requests` into a resumable response store; the graph's parser
  name is the model name, and its label and default revision come from the model card the server
  declares (:mod:`capaudit.llm.cards`): served by ``capaudit serve``, the offline parser says it
  is a heuristic baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Protocol, Sequence, Union

from capaudit.io.canonical_json import canonical

from .graph import SceneGraph, graph_from_llm, scene_graph_schema

#: the served name of the offline parser (a stand-in, :mod:`capaudit.standins.scene_graph`)
OFFLINE_PARSER_NAME = "capaudit-offline-scene-graph"
OFFLINE_BACKEND_NAME = OFFLINE_PARSER_NAME

TASK = "detail_scene_graph"
TASK_VERSION = 1
#: Bump whenever any character of SYSTEM_PROMPT, _RULES or the user-prompt layout changes: the
#: request id hashes it, so a changed prompt never reuses an old answer.
PROMPT_VERSION = "capaudit-scene-graph-v1"


def parse_results(answers: Mapping[str, Mapping[str, Any]], keys: Sequence[str],
                  to_graph: Any) -> List["ParseResult"]:
    """One :class:`ParseResult` per request id in ``keys``: not answered, failed (its kind and error),
    or ``to_graph(key, answer)`` (a ``ValueError`` there is the result's error)."""
    out: List[ParseResult] = []
    for k in keys:
        a = answers.get(k)
        if a is None:
            out.append(ParseResult(None, "not answered"))
        elif not a.get("ok"):
            out.append(ParseResult(None, f"{a.get('error_kind')}: {a.get('error')}"))
        else:
            try:
                out.append(ParseResult(to_graph(k, a)))
            except ValueError as exc:
                out.append(ParseResult(None, str(exc)))
    return out


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
        self._revision = revision
        self._card: Optional[Dict[str, Any]] = None
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self.dialect = dialect
        self.max_tokens = int(max_tokens)
        self.progress = progress
        self.run_kwargs = run_kwargs
        self.name = model
        self.last_stats: Optional[Dict[str, Any]] = None

    @property
    def card(self) -> Dict[str, Any]:
        """The model card the first endpoint declares for the model (read once)."""
        if self._card is None:
            from capaudit.llm.cards import fetch_card

            self._card = fetch_card(self.urls[0], self.model)
        return self._card

    @property
    def revision(self) -> Optional[str]:
        """The given revision, else the version the server declares for a stand-in (its rules,
        hashed into request ids so changed rules never reuse old answers)."""
        if self._revision is None and self.card.get("kind") not in ("real", "unknown"):
            return self.card.get("version") or None
        return self._revision

    @property
    def kinds(self) -> List[str]:
        """The kinds of the model cards that answered (recorded beside the store), else the declared one."""
        from capaudit.llm.cards import card_kinds
        from capaudit.llm.store import answered_by

        return card_kinds(answered_by(self.store) or [self.card])

    @property
    def offline(self) -> bool:
        """True when what answered is not a real model (a stand-in, a test model, or unknown)."""
        return any(k != "real" for k in self.kinds)

    @property
    def label(self) -> str:
        """The model card's label: a stand-in says what it is."""
        card = self.card
        if card.get("kind") not in ("real", "unknown"):
            return f"{card.get('label') or self.model} via the model-call layer"
        return f"{self.model} (LLM scene-graph parser)"

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
        return parse_results(answers, [r["request_id"] for r in rows],
                             lambda k, a: graph_from_llm(a.get("parsed"), parser=a.get("model") or self.model))


__all__ = [
    "OFFLINE_PARSER_NAME", "OFFLINE_BACKEND_NAME", "TASK", "TASK_VERSION", "PROMPT_VERSION", "SYSTEM_PROMPT",
    "ParseResult", "SceneGraphParser", "LLMSceneGraphParser", "build_scene_graph_request", "parse_results", "user_prompt",
]
