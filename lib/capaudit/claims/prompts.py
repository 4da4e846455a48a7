"""Versioned prompt text of the claim-extraction task (reference-spec §4.2, "intent").

The wording is our own; it follows the intent the spec describes (atomic, caption-claimed,
controllable visual units; one fact per record; short canonical units; shortest supporting span;
target = the element modified, ``scene`` when global; relations name both participants; counts
attach a number to a target; visible rendered text only; nothing negative, meta or duplicated).
Bump :data:`PROMPT_VERSION` whenever any character of these strings changes: the request id
hashes the prompt version, so a changed prompt can never reuse an old answer.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from capaudit.io.canonical_json import canonical

PROMPT_VERSION = "capaudit-claims-v1"
#: the prompt version of a schema with parent links (one more rule: :data:`PARENTS_RULE`)
PARENTS_PROMPT_VERSION = PROMPT_VERSION + "+parents"

#: The eight claim types in the summarizer's order (§4.1).
CATEGORY_HELP = (
    ("object", "a concrete thing, person, animal, place or scene element that is present"),
    ("attribute", "a visual property of one element: colour, material, texture, shape, size, pose, state, clothing"),
    ("relation", "how two elements are arranged or interact: spatial position, contact, action on another element"),
    ("style", "the medium or artistic style of the whole image: photo, oil painting, anime, 3D render, sketch"),
    ("camera", "viewpoint, framing, shot type, lens or focus: close-up, aerial view, wide angle, shallow depth of field"),
    ("lighting", "light source, direction, quality or time-of-day light: soft light, backlit, golden hour, neon glow"),
    ("count", "an explicit number of instances of one element: two dogs, a pair of shoes, three windows"),
    ("text_rendering", "legible text, letters, numbers or logos that the caption says are visibly written in the image"),
)

SYSTEM_PROMPT = (
    "You turn image captions into lists of atomic, controllable visual facts for evaluating "
    "text-to-image training data. Report only what the caption itself states; never add facts from "
    "world knowledge, guesses about the image, or anything the caption does not say. "
    "Reply with compact, valid JSON and nothing else."
)

_RULES = (
    "Write one record per visual fact that a text-to-image model could be asked to control.",
    "Record each fact once, under the one category that fits it best.",
    "unit: a short canonical phrase for the fact (a few words, never a whole clause).",
    "span: the shortest piece of the caption, copied exactly, that states the fact.",
    "target: the element the fact is about, e.g. the object an attribute describes; use \"scene\" for "
    "facts about the whole image (style, camera, lighting of the whole scene).",
    "relation: the unit must contain the relation and both elements it links "
    "(\"cup on table\", not \"on\" and not a bare verb).",
    "count: the unit must pair a number with what is counted (\"two dogs\"); an article such as "
    "\"a\" or \"the\" is not a count.",
    "text_rendering: only text the caption says is visibly written, printed or displayed; skip "
    "captions that say there is no text.",
    "Leave out negated or absent things, image metadata, remarks about the caption or captioner, and "
    "paraphrases of a fact already listed.",
    "Keep rendered-text units short; do not copy long passages, legal text or tables.",
    "If the caption states no visual fact, return an empty list [].",
)

PARENTS_RULE = (
    "parents: for an attribute, count or relation record, the 0-based positions in this list of the "
    "object records it is about (an attribute or count: its object; a relation: both elements); "
    "[] for the other records."
)

USER_HEADER = (
    "List the controllable visual content units that this caption claims, as atomic records. "
    "Categories:"
)
SCHEMA_LINE = "Answer only with JSON that matches this schema:"


def wants_parent_links(schema: Any) -> bool:
    """Whether a claims schema's unit records have the optional ``parents`` field."""
    try:
        return "parents" in schema["properties"]["claimed_units"]["items"]["properties"]
    except (KeyError, TypeError):
        return False


def prompt_version(schema: Mapping[str, Any]) -> str:
    """:data:`PROMPT_VERSION`, or :data:`PARENTS_PROMPT_VERSION` for a schema with parent links."""
    return PARENTS_PROMPT_VERSION if wants_parent_links(schema) else PROMPT_VERSION


def user_prompt(caption_id: str, prompt_caption: str, schema: Mapping[str, Any]) -> str:
    """The user message for one caption (window already clipped and newline-free); a schema with
    parent links adds :data:`PARENTS_RULE`."""
    lines = [USER_HEADER]
    lines += [f"- {name}: {desc}" for name, desc in CATEGORY_HELP]
    lines.append("Rules:")
    rules = _RULES + ((PARENTS_RULE,) if wants_parent_links(schema) else ())
    lines += [f"{i}. {r}" for i, r in enumerate(rules, start=1)]
    lines.append(SCHEMA_LINE)
    lines.append(canonical(schema))
    lines.append(f"caption_id={caption_id}")
    lines.append(f"caption={prompt_caption}")
    return "\n".join(lines)


def parse_user_prompt(text: str) -> tuple[str, str]:
    """``(caption_id, caption)`` read back from a user message built by :func:`user_prompt`.

    The caption is the remainder after the last ``caption=`` line start; raises ``ValueError``
    when either line is missing.
    """
    cid_pos = text.rfind("\ncaption_id=")
    cap_pos = text.rfind("\ncaption=")
    if cid_pos < 0 or cap_pos < 0 or cap_pos < cid_pos:
        raise ValueError("user message has no 'caption_id=' and 'caption=' lines")
    caption_id = text[cid_pos + len("\ncaption_id="):cap_pos]
    caption = text[cap_pos + len("\ncaption="):]
    return caption_id, caption



def user_message_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Text of the last user message of a chat request (a list content's parts' ``text`` joined);
    ``ValueError`` when there is none (the offline ``capaudit serve`` backends)."""
    user = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    content = user.get("content") if user else None
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    if not isinstance(content, str):
        raise ValueError("no user message text")
    return content

__all__ = ["PROMPT_VERSION", "PARENTS_PROMPT_VERSION", "PARENTS_RULE", "wants_parent_links", "prompt_version", "SYSTEM_PROMPT", "CATEGORY_HELP", "user_prompt", "parse_user_prompt",
           "user_message_text"]
