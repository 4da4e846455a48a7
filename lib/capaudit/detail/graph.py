"""Scene graphs of captions: objects O(c), attributes A(c) attached to objects, relations R(c).

A :class:`SceneGraph` is what every parser returns (issue 13, "Scene graph"):

* ``objects``: distinct object names in order of first mention (an object named twice is one
  node: O(c) is a set);
* ``attributes``: :class:`Attribute` ``(object index, value, kind, position)``, unique per
  ``(object, value)``; ``kind`` is ``attribute`` (colour, material, size …), ``state`` (``a man
  standing``), ``count`` (``two dogs``) or ``text`` (rendered text on the object);
* ``relations``: :class:`Relation` ``(subject index, predicate, object index)``, unique per
  triple;
* ``parser``: the name of the parser that built it (offline parsers say so).

Its JSON form (stored in score rows, requests and subgraph files) uses object indices::

    {"objects": ["woman", "table"],
     "attributes": [{"object": 0, "value": "standing", "kind": "state", "position": "post"}],
     "relations": [{"subject": 0, "predicate": "at", "object": 1}],
     "parser": "..."}

:func:`scene_graph_schema` is the JSON schema the LLM parser asks for (names, not indices, which
small models get wrong less often); :func:`graph_from_llm` turns such an answer into a graph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError

ATTRIBUTE_KINDS = ("attribute", "state", "count", "text")
POSITIONS = ("pre", "post")
#: Bounds of the LLM scene-graph schema (and of names/values everywhere).
MAX_OBJECTS = 64
MAX_ATTRIBUTES_PER_OBJECT = 16
MAX_RELATIONS = 96
MAX_NAME = 80


@dataclass(frozen=True)
class Attribute:
    """An attribute of object ``object`` (index into :attr:`SceneGraph.objects`)."""

    object: int
    value: str
    kind: str = "attribute"
    position: str = "pre"

    def to_json(self) -> Dict[str, Any]:
        return {"object": self.object, "value": self.value, "kind": self.kind, "position": self.position}


@dataclass(frozen=True)
class Relation:
    """``subject`` —``predicate``→ ``object`` (indices into :attr:`SceneGraph.objects`)."""

    subject: int
    predicate: str
    object: int

    def to_json(self) -> Dict[str, Any]:
        return {"subject": self.subject, "predicate": self.predicate, "object": self.object}


def _norm(s: str) -> str:
    return " ".join(str(s).lower().split())[:MAX_NAME]


@dataclass(frozen=True)
class SceneGraph:
    """O(c), A(c), R(c) of one caption (module docstring)."""

    objects: Tuple[str, ...] = ()
    attributes: Tuple[Attribute, ...] = ()
    relations: Tuple[Relation, ...] = ()
    parser: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        n = len(self.objects)
        if len(set(self.objects)) != n:
            raise ValueError(f"scene graph: object names must be distinct, got {list(self.objects)}")
        for a in self.attributes:
            if not 0 <= a.object < n:
                raise ValueError(f"scene graph: attribute {a.value!r} points to object {a.object} of {n}")
            if a.kind not in ATTRIBUTE_KINDS:
                raise ValueError(f"scene graph: attribute kind {a.kind!r} not in {ATTRIBUTE_KINDS}")
            if a.position not in POSITIONS:
                raise ValueError(f"scene graph: attribute position {a.position!r} not in {POSITIONS}")
        for r in self.relations:
            if not (0 <= r.subject < n and 0 <= r.object < n):
                raise ValueError(f"scene graph: relation {r.predicate!r} points outside the {n} objects")

    # -- counts ---------------------------------------------------------------------------------
    @property
    def n_objects(self) -> int:
        return len(self.objects)

    @property
    def n_attributes(self) -> int:
        return len(self.attributes)

    @property
    def n_relations(self) -> int:
        return len(self.relations)

    def attributes_of(self, i: int) -> List[Attribute]:
        return [a for a in self.attributes if a.object == i]

    # -- building -------------------------------------------------------------------------------
    @classmethod
    def build(cls, objects: Iterable[str], attributes: Iterable[Tuple[str, str, str, str]] = (),
              relations: Iterable[Tuple[str, str, str]] = (), parser: str = "",
              meta: Optional[Mapping[str, Any]] = None) -> "SceneGraph":
        """A graph from names: ``attributes`` as ``(object, value, kind, position)`` and
        ``relations`` as ``(subject, predicate, object)``; names are lower-cased and
        whitespace-normalised, duplicates merged; attributes/relations naming an unknown object are
        dropped and counted in ``meta["dropped"]``."""
        names: List[str] = []
        index: Dict[str, int] = {}
        for o in objects:
            k = _norm(o)
            if k and k not in index:
                index[k] = len(names)
                names.append(k)
        dropped = 0
        attrs: List[Attribute] = []
        seen_a = set()
        for obj, value, kind, position in attributes:
            i = index.get(_norm(obj))
            v = _norm(value)
            if i is None or not v:
                dropped += 1
                continue
            if (i, v) in seen_a:
                continue
            seen_a.add((i, v))
            attrs.append(Attribute(i, v, kind, position))
        rels: List[Relation] = []
        seen_r = set()
        for s, p, o in relations:
            si, oi, pv = index.get(_norm(s)), index.get(_norm(o)), _norm(p)
            if si is None or oi is None or not pv:
                dropped += 1
                continue
            if (si, pv, oi) in seen_r:
                continue
            seen_r.add((si, pv, oi))
            rels.append(Relation(si, pv, oi))
        m = dict(meta or {})
        if dropped:
            m["dropped"] = m.get("dropped", 0) + dropped
        return cls(tuple(names), tuple(attrs), tuple(rels), parser, m)

    def subgraph(self, keep_objects: Sequence[int], keep_attributes: Optional[Sequence[int]] = None,
                 keep_relations: Optional[Sequence[int]] = None) -> "SceneGraph":
        """The graph restricted to objects ``keep_objects`` (indices, order kept as in this graph).

        Attributes/relations are kept when their objects are kept and, if ``keep_attributes`` /
        ``keep_relations`` (indices into this graph's lists) are given, when they are listed."""
        keep = sorted(set(int(i) for i in keep_objects))
        remap = {old: new for new, old in enumerate(keep)}
        ka = None if keep_attributes is None else set(keep_attributes)
        kr = None if keep_relations is None else set(keep_relations)
        attrs = tuple(Attribute(remap[a.object], a.value, a.kind, a.position) for j, a in enumerate(self.attributes)
                      if a.object in remap and (ka is None or j in ka))
        rels = tuple(Relation(remap[r.subject], r.predicate, remap[r.object]) for j, r in enumerate(self.relations)
                     if r.subject in remap and r.object in remap and (kr is None or j in kr))
        return SceneGraph(tuple(self.objects[i] for i in keep), attrs, rels, self.parser, dict(self.meta))

    # -- JSON -----------------------------------------------------------------------------------
    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {
            "objects": list(self.objects),
            "attributes": [a.to_json() for a in self.attributes],
            "relations": [r.to_json() for r in self.relations],
            "parser": self.parser,
        }
        if self.meta:
            out["meta"] = dict(self.meta)
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = "scene graph") -> "SceneGraph":
        """Inverse of :meth:`to_json`; errors name ``where``."""
        if not isinstance(data, Mapping):
            raise InputError(f"{where}: expected an object with 'objects', 'attributes', 'relations'")
        try:
            objects = tuple(str(o) for o in data.get("objects", []))
            attrs = tuple(Attribute(int(a["object"]), str(a["value"]), str(a.get("kind", "attribute")),
                                    str(a.get("position", "pre"))) for a in data.get("attributes", []))
            rels = tuple(Relation(int(r["subject"]), str(r["predicate"]), int(r["object"]))
                         for r in data.get("relations", []))
            return cls(objects, attrs, rels, str(data.get("parser", "")), dict(data.get("meta") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{where}: malformed scene graph ({exc})") from None


# -- LLM form ----------------------------------------------------------------------------------
def scene_graph_schema() -> Dict[str, Any]:
    """JSON schema of the LLM parser's answer::

        {"objects": [{"name", "attributes": [str]}], "relations": [{"subject", "predicate", "object"}]}

    Relations name their ends by object ``name``; strings are bounded (offline-backends §2.3)."""
    name = {"type": "string", "minLength": 1, "maxLength": MAX_NAME}
    return {
        "type": "object",
        "properties": {
            "objects": {
                "type": "array",
                "maxItems": MAX_OBJECTS,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": name,
                        "attributes": {"type": "array", "maxItems": MAX_ATTRIBUTES_PER_OBJECT, "items": name},
                    },
                    "required": ["name", "attributes"],
                    "additionalProperties": False,
                },
            },
            "relations": {
                "type": "array",
                "maxItems": MAX_RELATIONS,
                "items": {
                    "type": "object",
                    "properties": {"subject": name, "predicate": name, "object": name},
                    "required": ["subject", "predicate", "object"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["objects", "relations"],
        "additionalProperties": False,
    }


_COUNT_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve dozen pair couple "
                         "several many few".split())


def graph_from_llm(parsed: Any, parser: str) -> SceneGraph:
    """A :class:`SceneGraph` from an answer matching :func:`scene_graph_schema`.

    Attribute kinds are guessed from the value (a number word or digits → ``count``, a quoted
    string → ``text``, else ``attribute``); relations whose ends are not listed objects are dropped
    (``meta["dropped"]``)."""
    if not isinstance(parsed, Mapping):
        raise ValueError("scene-graph answer is not a JSON object")
    objs = [o for o in parsed.get("objects") or [] if isinstance(o, Mapping) and isinstance(o.get("name"), str)]
    attrs = []
    for o in objs:
        for v in o.get("attributes") or []:
            if not isinstance(v, str):
                continue
            s = v.strip().lower()
            kind = ("count" if s.isdigit() or s in _COUNT_WORDS else
                    "text" if s[:1] in "\"'\u201c" else "attribute")
            attrs.append((o["name"], v, kind, "pre"))
    rels = [(r.get("subject", ""), r.get("predicate", ""), r.get("object", ""))
            for r in parsed.get("relations") or [] if isinstance(r, Mapping)]
    return SceneGraph.build([o["name"] for o in objs], attrs, rels, parser=parser)


def graph_to_llm(graph: SceneGraph) -> Dict[str, Any]:
    """The LLM answer form of a graph (used by the offline backend that serves the schema)."""
    return {
        "objects": [{"name": n, "attributes": [a.value for a in graph.attributes_of(i)]}
                    for i, n in enumerate(graph.objects)],
        "relations": [{"subject": graph.objects[r.subject], "predicate": r.predicate, "object": graph.objects[r.object]}
                      for r in graph.relations],
    }


__all__ = ["ATTRIBUTE_KINDS", "Attribute", "Relation", "SceneGraph", "scene_graph_schema", "graph_from_llm",
           "graph_to_llm"]
