"""The indexed scene-graph request: a scene graph asked for in its own JSON form.

The detail stage's default parser (:class:`capaudit.detail.parser_factory.ServedSceneGraphParser`)
asks the served offline parser for :meth:`~capaudit.detail.graph.SceneGraph.to_json`'s form (object
indices, attribute kind and position, meta; :func:`indexed_scene_graph_schema`) rather than the
LLM parser's names-only answer, and carries the caption as one JSON string (``caption_json=``, the
caption exactly as given), so the served graph is the graph the parser builds. The backend
(:mod:`capaudit.standins.scene_graph`) tells such a request by its schema's title
(:func:`is_indexed_request`) and reads the caption with :func:`read_indexed_request`.

Pure helpers (no server, no stand-in), imported by both sides.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from capaudit.io.canonical_json import canonical

from .graph import ATTRIBUTE_KINDS, POSITIONS, SceneGraph

#: task of the indexed-graph requests (the request id hashes it, with the prompt version)
INDEXED_TASK = "detail_scene_graph_indexed"
INDEXED_TASK_VERSION = 1
INDEXED_PROMPT_VERSION = "capaudit-scene-graph-indexed-v1"
#: the schema's title: how a backend tells an indexed-graph request from a names-only one
INDEXED_SCHEMA_TITLE = "capaudit_indexed_scene_graph"
INDEXED_SYSTEM_PROMPT = (
    "You convert an image caption into a scene graph: the objects the caption mentions, the "
    "attributes it gives each object, and the relations it states between two objects. Reply with "
    "compact, valid JSON and nothing else."
)
INDEXED_HEADER = ("Build the scene graph of this caption. Objects are listed once each; attributes and "
                  "relations name objects by their index in the objects list.")
CAPTION_LINE = "caption_json="


def indexed_scene_graph_schema() -> Dict[str, Any]:
    """JSON schema of a scene graph in its own JSON form (:meth:`SceneGraph.to_json`, without ``parser``)."""
    name = {"type": "string"}
    index = {"type": "integer", "minimum": 0}
    return {
        "title": INDEXED_SCHEMA_TITLE,
        "type": "object",
        "properties": {
            "objects": {"type": "array", "items": name},
            "attributes": {"type": "array", "items": {
                "type": "object", "additionalProperties": False,
                "required": ["object", "value", "kind", "position"],
                "properties": {"object": index, "value": name, "kind": {"enum": list(ATTRIBUTE_KINDS)},
                               "position": {"enum": list(POSITIONS)}}}},
            "relations": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["subject", "predicate", "object"],
                "properties": {"subject": index, "predicate": name, "object": index}}},
            "meta": {"type": "object"},
        },
        "required": ["objects", "attributes", "relations"],
        "additionalProperties": False,
    }


def indexed_user_prompt(caption: str, schema: Mapping[str, Any]) -> str:
    """The user message of one caption: header, schema, and the caption as one JSON string."""
    return "\n".join([INDEXED_HEADER, "Answer only with JSON that matches this schema:", canonical(schema),
                      CAPTION_LINE + json.dumps(caption, ensure_ascii=False)])


def build_indexed_request(caption: str, model: str, revision: Optional[str] = None,
                          max_tokens: int = 4096) -> Dict[str, Any]:
    """One content-addressed request row for ``caption`` (input: the caption only, so a caption
    repeated anywhere is asked once)."""
    from capaudit.llm.requests import make_request

    schema = indexed_scene_graph_schema()
    return make_request(
        task=INDEXED_TASK, task_version=INDEXED_TASK_VERSION, model=model, revision=revision,
        prompt_version=INDEXED_PROMPT_VERSION, schema=schema,
        messages=[{"role": "system", "content": INDEXED_SYSTEM_PROMPT},
                  {"role": "user", "content": indexed_user_prompt(caption, schema)}],
        decoding={"temperature": 0.0, "max_tokens": int(max_tokens)}, input={"caption": caption})


def is_indexed_request(schema: Any) -> bool:
    """Whether a request's schema asks for the indexed graph form."""
    return isinstance(schema, Mapping) and schema.get("title") == INDEXED_SCHEMA_TITLE


def read_indexed_request(text: str) -> str:
    """The caption of an indexed-graph user message (``ValueError`` when it has none)."""
    pos = text.rfind("\n" + CAPTION_LINE)
    if pos < 0:
        raise ValueError(f"user message has no '{CAPTION_LINE}' line")
    caption = json.loads(text[pos + 1 + len(CAPTION_LINE):])
    if not isinstance(caption, str):
        raise ValueError(f"'{CAPTION_LINE}' is not a JSON string")
    return caption


def indexed_answer(graph: SceneGraph) -> Dict[str, Any]:
    """A graph as the indexed form answers it (its JSON form without ``parser``)."""
    out = graph.to_json()
    out.pop("parser", None)
    return out


__all__ = ["CAPTION_LINE", "INDEXED_PROMPT_VERSION", "INDEXED_SCHEMA_TITLE", "INDEXED_TASK", "INDEXED_TASK_VERSION",
           "build_indexed_request", "indexed_answer", "indexed_scene_graph_schema", "indexed_user_prompt",
           "is_indexed_request", "read_indexed_request"]
