"""The registry of backends served by ``capaudit serve`` under their own model names.

A backend is ``fn(messages, request_payload) -> str`` (the assistant message content).
``register_backend(name, fn, requires=..., degrades=..., card=...)`` adds one; the name is the
model name clients send and the ``model`` field of every response, and its model card
(:class:`capaudit.llm.cards.ModelCard`: kind, version, label, caveat) is what the server declares
for it, so a heuristic says what it is in every artifact it feeds. ``requires`` names system resources (``capaudit.resources``) without which the
backend cannot answer: :func:`check_backends` raises one line naming the backend, the resource
and its install command, and ``capaudit serve`` refuses to start. ``degrades`` names resources
without which it answers with less (no OCR, say): :func:`degraded_notes` lists what is missing so
the server can say so in every answer.

Built in:
* ``capaudit-echo``: returns the last user message's text (smoke tests).
* ``capaudit-schema-minimal``: returns the smallest JSON instance of the requested schema
  (structured_outputs / response_format in any dialect): required properties only, empty arrays
  (or ``minItems`` copies), first enum value, ``minimum`` or 0 for numbers. Useful to exercise a
  pipeline end to end; it claims nothing.

This module holds only the generic registry and these two built-ins: the stand-in models
(:mod:`capaudit.standins`) register themselves when imported, and only the server imports them
(:func:`capaudit.llm.server.registry`). ``load_backend_spec("name=package.module:function")``
loads any other function (its card: kind ``unknown`` unless it has a ``card`` attribute).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.io.canonical_json import dumps_bytes
from capaudit.llm.cards import ModelCard
from capaudit.llm.dialects import requested_schema

BackendFn = Callable[[List[Dict[str, Any]], Dict[str, Any]], str]


class BackendRegistry:
    """Name → backend function and model card; ``plugins`` (module names) are imported on first
    lookup (none by default: the server fills the default registry with the stand-ins)."""

    def __init__(self, plugins: Sequence[str] = ()):
        self._fns: Dict[str, BackendFn] = {}
        self._requires: Dict[str, Tuple[str, ...]] = {}
        self._degrades: Dict[str, Tuple[str, ...]] = {}
        self._cards: Dict[str, ModelCard] = {}
        self._plugins = tuple(plugins)
        self._loaded = False

    def register(self, name: str, fn: BackendFn, requires: Sequence[str] = (),
                 degrades: Sequence[str] = (), card: Optional[ModelCard] = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("backend name must be a non-empty string")
        if not callable(fn):
            raise ValueError(f"backend {name!r}: fn must be callable")
        from capaudit.resources import RESOURCES

        unknown = [r for r in (*requires, *degrades) if r not in RESOURCES]
        if unknown:
            raise ValueError(f"backend {name!r}: unknown resources {unknown}; known: {', '.join(RESOURCES)}")
        if card is not None and card.name != name:
            raise ValueError(f"backend {name!r}: its card names {card.name!r}")
        self._fns[name] = fn
        self._requires[name] = tuple(requires)
        self._degrades[name] = tuple(degrades)
        self._cards[name] = card if card is not None else getattr(fn, "card", None) or ModelCard(
            name, "unknown", label=name, caveat=f"{name} is a backend registered without a model card")

    def card(self, name: str) -> ModelCard:
        """The model card of ``name`` (``KeyError`` naming the known backends)."""
        self.get(name)
        return self._cards[name]

    def check(self, name: str) -> None:
        """Raise :class:`capaudit.resources.ResourceMissing` if ``name`` lacks a required resource."""
        from capaudit.resources import require

        self.get(name)
        for r in self._requires.get(name, ()):
            require(r, needed_by=f"backend {name}")

    def degraded(self, name: str) -> List[str]:
        """One note per optional resource ``name`` runs without (empty when it runs in full)."""
        from capaudit.resources import RESOURCES, status

        self.get(name)
        notes = []
        for r in self._degrades.get(name, ()):
            ok, detail = status(r)
            if not ok:
                notes.append(f"{name} runs without {RESOURCES[r].what} ({detail}); affects: {RESOURCES[r].needed_by}")
        return notes

    def load_plugins(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for mod in self._plugins:
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as exc:
                if exc.name is None or not mod.startswith(exc.name):
                    raise

    def get(self, name: str) -> BackendFn:
        self.load_plugins()
        try:
            return self._fns[name]
        except KeyError:
            raise KeyError(f"unknown backend {name!r}; known: {', '.join(sorted(self._fns)) or 'none'}") from None

    def names(self) -> List[str]:
        self.load_plugins()
        return sorted(self._fns)


DEFAULT_BACKENDS = BackendRegistry()


def register_backend(name: str, fn: BackendFn, requires: Sequence[str] = (), degrades: Sequence[str] = (),
                     card: Optional[ModelCard] = None) -> None:
    """Register a backend ``fn(messages, request_payload) -> str`` under ``name`` with its model
    ``card``; ``requires`` / ``degrades`` name system resources (see the module docstring)."""
    DEFAULT_BACKENDS.register(name, fn, requires, degrades, card)


def check_backends(names: Sequence[str], registry: Optional[BackendRegistry] = None) -> List[str]:
    """Raise ``ResourceMissing`` for the first backend that cannot run; else the degradation notes."""
    reg = registry or DEFAULT_BACKENDS
    notes: List[str] = []
    for n in names:
        reg.check(n)
        notes.extend(reg.degraded(n))
    return notes


def get_backend(name: str) -> BackendFn:
    """The backend registered under ``name`` (``KeyError`` naming the known ones)."""
    return DEFAULT_BACKENDS.get(name)


def backend_names() -> List[str]:
    """Names of all backends registered so far (the stand-ins once the server has loaded them)."""
    return DEFAULT_BACKENDS.names()


def load_backend_spec(spec: str, registry: Optional[BackendRegistry] = None) -> str:
    """Resolve ``NAME`` or ``NAME=module:function`` (registering the latter); returns NAME."""
    reg = registry or DEFAULT_BACKENDS
    name, sep, target = spec.partition("=")
    name = name.strip()
    if not sep:
        reg.get(name)
        return name
    mod_name, colon, attr = target.partition(":")
    if not colon or not mod_name or not attr:
        raise ValueError(f"--backend {spec!r}: expected NAME or NAME=package.module:function")
    fn = getattr(importlib.import_module(mod_name), attr, None)
    if fn is None:
        raise ValueError(f"--backend {spec!r}: {mod_name} has no attribute {attr!r}")
    reg.register(name, fn)
    return name


# ---------------------------------------------------------------------------------------------
def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def echo_backend(messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
    """The last user message's text."""
    for m in reversed(messages):
        if m.get("role") == "user":
            return _text_of(m.get("content"))
    return ""


def minimal_instance(schema: Any) -> Any:
    """Smallest instance of a (simple) JSON schema; see module docstring."""
    if not isinstance(schema, Mapping):
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0])
    if schema.get("allOf"):
        merged: Dict[str, Any] = {}
        for part in schema["allOf"]:
            if isinstance(part, Mapping):
                merged.update(part)
        return minimal_instance(merged)
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), typ[0] if typ else None)
    if typ == "object" or (typ is None and "properties" in schema):
        props = schema.get("properties", {})
        return {k: minimal_instance(props.get(k, {})) for k in schema.get("required", [])}
    if typ == "array":
        n = int(schema.get("minItems", 0))
        items = schema.get("items", {})
        return [minimal_instance(items) for _ in range(n)]
    if typ == "string":
        return "x" * int(schema.get("minLength", 0))
    if typ in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        if lo is None:
            return 0
        v = lo + 1 if "exclusiveMinimum" in schema and "minimum" not in schema else lo
        return int(v) if typ == "integer" else v
    if typ == "boolean":
        return False
    if typ == "null":
        return None
    return {}


def schema_minimal_backend(messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
    """``minimal_instance`` of the payload's requested schema as compact JSON (``{}`` if none)."""
    schema = requested_schema(payload)
    return dumps_bytes(minimal_instance(schema) if schema is not None else {}).decode("utf-8")


register_backend("capaudit-echo", echo_backend, card=ModelCard(
    "capaudit-echo", "heuristic", "1", "capaudit-echo (smoke test: echoes the prompt)",
    "answers echo the last user message: a smoke test, not a model"))
register_backend("capaudit-schema-minimal", schema_minimal_backend, card=ModelCard(
    "capaudit-schema-minimal", "heuristic", "1", "capaudit-schema-minimal (smoke test: the smallest valid answer)",
    "answers are the smallest instance of the requested schema: a smoke test that claims nothing"))

__all__ = [
    "BackendRegistry",
    "DEFAULT_BACKENDS",
    "register_backend",
    "get_backend",
    "backend_names",
    "load_backend_spec",
    "minimal_instance",
    "echo_backend",
    "schema_minimal_backend",
]
