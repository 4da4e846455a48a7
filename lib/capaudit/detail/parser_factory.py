"""Which scene-graph parser a command or params file asks for: the offline parser (a stand-in,
answered by ``capaudit serve``) or :class:`~capaudit.detail.parsers.LLMSceneGraphParser`.

The offline parser ``capaudit-offline-scene-graph`` is a stand-in model
(:mod:`capaudit.standins.scene_graph`), so it is reached like a model: :class:`ServedSceneGraphParser`
sends one content-addressed request per distinct caption through the model-call layer
(:func:`capaudit.llm.client.run_requests`) to ``capaudit serve`` — started in this process on an
ephemeral 127.0.0.1 port (:func:`capaudit.llm.server.background_server`) on first use, so every
engine worker of a sharded run serves its own, or the server at ``url`` — and reads the answers
back from the response store. Its name, label, version and caveat are those of the model card the
server declares and the client records beside the store (:func:`capaudit.llm.store.answered_by`).

Unlike the LLM parser's names-only answer (:func:`~capaudit.detail.graph.scene_graph_schema`), these
requests ask for the graph's own JSON form (:mod:`.indexed_graph`), so the served graph is the graph
the parser builds.

Kept apart from :mod:`.parsers` and :mod:`.indexed_graph`, which :mod:`capaudit.standins.scene_graph`
imports, so that no import circle forms (this module reaches the server, the server the stand-ins).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from .graph import SceneGraph
from .indexed_graph import build_indexed_request
from .parsers import OFFLINE_PARSER_NAME, LLMSceneGraphParser, ParseResult, SceneGraphParser, parse_results

#: requests in flight to the in-process server, and its worker threads: concurrent requests share
#: one spaCy batch in the stand-in (:class:`capaudit.standins.batching.MicroBatcher`)
IN_PROCESS_CONCURRENCY = 32


def _stop(stack: ExitStack, tmp: Optional[str]) -> None:
    try:
        stack.close()
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


class ServedSceneGraphParser:
    """The scene graphs of a served parser (default: the offline stand-in), through the model-call layer.

    ``url``: an OpenAI-compatible server serving ``model``; default: ``capaudit serve`` in this
    process (``server_workers`` threads), started on first use and stopped with the parser (or at
    exit); ``concurrency`` requests are in flight at a time. ``store``: a response
    store file (resumable: answered captions are not asked again); default: a temporary folder of
    this parser, one file per :meth:`parse_many` call. ``name``, ``label`` and ``version`` come from
    the model card the server declares, :attr:`answered_by` from the cards the client recorded.
    """

    def __init__(self, model: str = OFFLINE_PARSER_NAME, url: Optional[str] = None,
                 store: Union[str, Path, None] = None, concurrency: int = IN_PROCESS_CONCURRENCY,
                 timeout: float = 240.0, server_workers: int = IN_PROCESS_CONCURRENCY):
        self.model = model
        self.name = model
        self.url = url
        self.store = Path(store) if store is not None else None
        self.concurrency = int(concurrency)
        self.timeout = float(timeout)
        self.server_workers = int(server_workers)
        self._base: Optional[str] = None
        self._card: Optional[Dict[str, Any]] = None
        self._tmp: Optional[str] = None
        self._calls = 0
        self._stores: List[Path] = []
        self.last_stats: Optional[Dict[str, Any]] = None
        self._finalizer: Optional[weakref.finalize] = None

    # -- the server ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The server's URL (``capaudit serve`` is started here on first use when no ``url`` was given)."""
        if self._base is None:
            if self.url:
                self._base = str(self.url)
            else:
                from capaudit.llm.server import background_server

                stack = ExitStack()
                self._base = stack.enter_context(background_server([self.model], workers=self.server_workers))
                self._finalizer = weakref.finalize(self, _stop, stack, None)
        return self._base

    def close(self) -> None:
        """Stop the in-process server and remove the temporary store (a later call starts them again)."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        self._base = None
        self._stores = []

    def __getstate__(self) -> Dict[str, Any]:  # a copy in another process serves its own
        state = dict(self.__dict__)
        state.update(_base=None if not self.url else self._base, _tmp=None, _finalizer=None, _stores=[], _calls=0)
        return state

    # -- who answers -----------------------------------------------------------------------------
    @property
    def card(self) -> Dict[str, Any]:
        """The model card the server declares for the model (read once)."""
        if self._card is None:
            from capaudit.llm.cards import fetch_card

            self._card = fetch_card(self.base_url, self.model)
        return self._card

    @property
    def version(self) -> Optional[str]:
        """The declared version (a stand-in's rule set), hashed into request ids as the revision."""
        return self.card.get("version") or None

    @property
    def label(self) -> str:
        """The label of the card that answered (else the declared one): a stand-in says what it is."""
        cards = self.answered_by or [self.card]
        labels = list(dict.fromkeys(str(c.get("label") or c.get("model") or self.model) for c in cards))
        return " + ".join(labels)

    @property
    def offline(self) -> bool:
        """True when a card that answered (else the declared one) is not a real model."""
        return any(c.get("kind") != "real" for c in (self.answered_by or [self.card]))

    @property
    def kinds(self) -> List[str]:
        """The kinds of the cards that answered (else the declared one)."""
        from capaudit.llm.cards import card_kinds

        return card_kinds(self.answered_by or [self.card])

    @property
    def answered_by(self) -> List[Dict[str, Any]]:
        """The model cards the client recorded for this parser's answers so far."""
        from capaudit.llm.store import answered_by

        out: List[Dict[str, Any]] = []
        for s in self._stores:
            out += [c for c in answered_by(s) if c not in out]
        return out

    # -- parsing ---------------------------------------------------------------------------------
    def _next_store(self) -> Path:
        if self.store is not None:
            return self.store
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="capaudit-scene-graphs-")
            weakref.finalize(self, shutil.rmtree, self._tmp, True)
        self._calls += 1
        return Path(self._tmp) / f"responses-{os.getpid()}-{self._calls:06d}.jsonl"

    def parse_many(self, texts: Sequence[str], ids: Optional[Sequence[str]] = None) -> List[ParseResult]:
        from capaudit.llm.client import run_requests
        from capaudit.llm.store import merge

        if ids is not None and len(ids) != len(texts):
            raise ValueError(f"{len(texts)} captions but {len(ids)} ids")
        if not texts:
            return []
        base, revision = self.base_url, self.version
        rows: Dict[str, Dict[str, Any]] = {}
        keys: List[str] = []
        for t in texts:
            r = build_indexed_request(t, self.model, revision)
            rows.setdefault(r["request_id"], r)
            keys.append(r["request_id"])
        store = self._next_store()
        store.parent.mkdir(parents=True, exist_ok=True)
        stats = run_requests(list(rows.values()), str(store), [base], self.model, concurrency=self.concurrency,
                             timeout=self.timeout, resume=self.store is not None, progress=False, handle_signals=False)
        self.last_stats = stats.to_dict()
        if store not in self._stores:
            self._stores.append(store)
        def to_graph(k: str, a: Mapping[str, Any]) -> SceneGraph:
            parsed = a.get("parsed")
            body = {**parsed, "parser": a.get("model") or self.model} if isinstance(parsed, Mapping) else parsed
            return SceneGraph.from_json(body, where=f"answer {k}")

        return parse_results(merge(store), keys, to_graph)

    def parse(self, text: str) -> Optional[SceneGraph]:
        """The graph of one caption (``None`` when the parser gave none)."""
        return self.parse_many([text])[0].graph


def offline_parser(store: Union[str, Path, None] = None, url: Optional[str] = None,
                   **kwargs: Any) -> ServedSceneGraphParser:
    """The offline parser ``capaudit-offline-scene-graph``, answered by ``capaudit serve`` (in this
    process unless ``url`` is given) through the model-call layer (:class:`ServedSceneGraphParser`)."""
    return ServedSceneGraphParser(OFFLINE_PARSER_NAME, url=url, store=store, **kwargs)


def make_parser(kind: str, **kwargs: Any) -> SceneGraphParser:
    """``claims`` → the offline parser (:func:`offline_parser`; kwargs: ``store``, ``url``);
    ``llm`` → :class:`LLMSceneGraphParser` (kwargs: ``urls``, ``model``, ``store`` …)."""
    if kind in ("claims", "offline"):
        return offline_parser(**kwargs)
    if kind == "llm":
        return LLMSceneGraphParser(**kwargs)
    raise ValueError(f"unknown scene-graph parser {kind!r}; expected 'claims' or 'llm'")


__all__ = ["ServedSceneGraphParser", "make_parser", "offline_parser"]
