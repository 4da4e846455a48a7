"""Validation of parsed model output: JSON schema, then per-task rules (spec §4.3, §5.2).

``validate(parsed, schema)`` returns the list of schema violations (empty = valid). Validators
are compiled once per distinct schema (keyed by its canonical JSON) and cached in a bounded
per-process LRU. The fast path uses ``fastjsonschema`` when it is installed and can compile the
schema; only when it rejects an instance is ``jsonschema`` (the reference implementation) run to
list the errors, and ``jsonschema`` has the last word (an instance it accepts is valid).

Task rules are checks a JSON schema cannot express (e.g. "sorted question ids equal the expected
ids"): ``register_task_rules(task, fn)`` with ``fn(parsed, request) -> list[str]``. A stage
registers its rules when its module is imported (``capaudit.claims`` and ``capaudit.judges`` do, so
a stage that builds its requests has them). This layer names no stage: a caller that runs request
files it did not build (the ``capaudit`` command, ``llm run``) names the rule providers with
:func:`add_rule_providers`, which ``task_rule_errors`` imports lazily the first time an
unregistered task is checked (and the sharded fan-out hands on to its workers).
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from capaudit.io.canonical_json import cache_key

try:  # optional fast path
    import fastjsonschema as _fastjsonschema
except ImportError:  # pragma: no cover
    _fastjsonschema = None

RuleFn = Callable[[Any, Mapping[str, Any]], List[str]]

MAX_ERRORS = 20
_CACHE_SIZE = 256
#: Modules imported for their task rules on first need: none unless a caller adds some.
RULE_PROVIDERS: Tuple[str, ...] = ()


class _Compiled:
    __slots__ = ("fast", "full")

    def __init__(self, schema: Mapping[str, Any]):
        import jsonschema  # imported on first use: it costs ~1.5 s of start-up (format grammars)

        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"invalid JSON schema: {exc.message}") from None
        self.full = cls(schema)
        self.fast: Optional[Callable[[Any], Any]] = None
        if _fastjsonschema is not None:
            try:
                self.fast = _fastjsonschema.compile(dict(schema), use_formats=False)
            except Exception:  # draft or keyword fastjsonschema cannot compile: use jsonschema only
                self.fast = None

    def errors(self, instance: Any) -> List[str]:
        if self.fast is not None:
            try:
                self.fast(instance)
                return []
            except Exception:
                pass
        out: List[str] = []
        for err in sorted(self.full.iter_errors(instance), key=lambda e: list(e.absolute_path)):
            path = "/".join(str(p) for p in err.absolute_path) or "$"
            out.append(f"{path}: {err.message}")
            if len(out) >= MAX_ERRORS:
                break
        return out


def load_validator() -> None:
    """Import ``jsonschema`` now (~1.5 s): a run calls this before it sends anything, so the first
    answer's validation does not stall the event loop — and every request's timeout — mid-run."""
    import jsonschema  # noqa: F401


class ValidatorCache:
    """Bounded LRU of compiled validators keyed by the schema's sorted-key JSON (explicit, not global)."""

    def __init__(self, size: int = _CACHE_SIZE):
        self.size = size
        self._items: "OrderedDict[bytes, _Compiled]" = OrderedDict()
        self._by_id: Dict[int, Tuple[Mapping[str, Any], _Compiled]] = {}

    def get(self, schema: Mapping[str, Any]) -> _Compiled:
        hit = self._by_id.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        key = cache_key(schema)
        compiled = self._items.get(key)
        if compiled is None:
            compiled = _Compiled(schema)
            self._items[key] = compiled
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(key)
        if len(self._by_id) > self.size:
            self._by_id.clear()
        self._by_id[id(schema)] = (schema, compiled)
        return compiled


_DEFAULT_CACHE = ValidatorCache()


def validate(parsed: Any, schema: Mapping[str, Any], cache: Optional[ValidatorCache] = None) -> List[str]:
    """Schema violations of ``parsed`` against ``schema`` as ``"<json path>: <message>"`` strings.

    Empty list = valid. At most ``MAX_ERRORS`` messages. Raises ``ValueError`` for an invalid schema.
    """
    return (cache or _DEFAULT_CACHE).get(schema).errors(parsed)


# ---------------------------------------------------------------------------------------------
# task rules
class TaskRules:
    """Registry of per-task rule functions. ``DEFAULT_RULES`` is the one the client uses."""

    def __init__(self, providers: Tuple[str, ...] = RULE_PROVIDERS):
        self._rules: Dict[str, List[RuleFn]] = {}
        self._providers = tuple(providers)
        self._loaded = False

    @property
    def providers(self) -> Tuple[str, ...]:
        return self._providers

    def add_providers(self, names: Tuple[str, ...]) -> None:
        """Also import ``names`` (module names) for their rules on the next unregistered task."""
        new = tuple(n for n in names if n not in self._providers)
        if new:
            self._providers += new
            self._loaded = False

    def register(self, task: str, fn: RuleFn) -> None:
        fns = self._rules.setdefault(task, [])
        key = (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None))
        for i, f in enumerate(fns):  # re-registering the same function (e.g. a re-import) replaces it
            if f is fn or (key[1] is not None and (getattr(f, "__module__", None), getattr(f, "__qualname__", None)) == key):
                fns[i] = fn
                return
        fns.append(fn)

    def load_providers(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        for name in self._providers:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name is None or not name.startswith(exc.name):
                    raise

    def rules(self, task: str) -> List[RuleFn]:
        if task not in self._rules:
            self.load_providers()
        return list(self._rules.get(task, ()))

    def errors(self, task: str, parsed: Any, request: Mapping[str, Any]) -> List[str]:
        out: List[str] = []
        for fn in self.rules(task):
            try:
                errs = fn(parsed, request)
            except Exception as exc:  # a crashing rule is a rule failure, reported with its name
                errs = [f"rule {getattr(fn, '__name__', fn)!s} raised {type(exc).__name__}: {exc}"]
            out.extend(str(e) for e in (errs or ()))
        return out


DEFAULT_RULES = TaskRules()


def register_task_rules(task: str, fn: RuleFn) -> None:
    """Register ``fn(parsed, request) -> list[str]`` as a rule check for ``task`` (idempotent)."""
    DEFAULT_RULES.register(task, fn)


def add_rule_providers(names: Tuple[str, ...]) -> None:
    """Name modules that register task rules when imported (module docstring)."""
    DEFAULT_RULES.add_providers(tuple(names))


def task_rule_errors(task: str, parsed: Any, request: Mapping[str, Any]) -> List[str]:
    """Errors from every rule registered for ``task`` (run only on schema-valid output)."""
    return DEFAULT_RULES.errors(task, parsed, request)


def check_output(
    parsed: Any, request: Mapping[str, Any], cache: Optional[ValidatorCache] = None,
    rules: Optional[TaskRules] = None,
) -> Tuple[Optional[str], Optional[str]]:
    """``(error_kind, reason)`` for parsed output: ``('schema', ...)``, ``('rule', ...)`` or ``(None, None)``."""
    errs = validate(parsed, request["schema"], cache)
    if errs:
        return "schema", "; ".join(errs)
    errs = (rules or DEFAULT_RULES).errors(str(request.get("task", "")), parsed, request)
    if errs:
        return "rule", "; ".join(errs[:MAX_ERRORS])
    return None, None


__all__ = [
    "load_validator",
    "validate",
    "ValidatorCache",
    "TaskRules",
    "DEFAULT_RULES",
    "register_task_rules",
    "add_rule_providers",
    "task_rule_errors",
    "check_output",
]
