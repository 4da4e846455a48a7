"""Judge prompts (reference-spec §5.1–5.2), versioned: bump :data:`PROMPT_VERSION` on any text change.

The intent follows the reference: a strict VQA judge answering each question from visible image
evidence only, compact JSON, exactly one answer per question id. The user message ends with the
schema, a ``caption_id=<id>`` line and a ``questions=<compact JSON list>`` line, so any
OpenAI-compatible judge (and our offline judges, :func:`parse_user_prompt`) can read them.

Requests for a judge that must leave the judged caption out of its evidence (the offline
reference-caption judge, which answers from human captions of the image) end with one more line,
``judged_caption=<JSON string>`` (:func:`parse_judged_caption`). It is never sent to other judges:
a VLM judge answers from the image alone.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.io.canonical_json import dumps_bytes

PROMPT_VERSION = 1

SYSTEM_PROMPT = (
    "You are a strict visual question answering judge for text-to-image training data. "
    "Answer only from visible evidence in the image. Return only compact valid JSON."
)

_RULES = (
    "Answer each question from the image alone. Ignore any caption text and any outside knowledge.",
    "Rules:",
    '- "yes": the claim is visibly supported by the image.',
    '- "no": the image contradicts the claim, or the image shows no visible support for it.',
    '- "uncertain": the claim is too fine-grained, occluded, unreadable or ambiguous to decide from the image.',
    "- Give exactly one answer per question_id; do not skip or repeat question ids.",
)
EVIDENCE_RULE = "- Keep evidence short (a few words naming what is visible)."
NO_EVIDENCE_RULE = "- For each question return only question_id, answer and confidence."


#: the user message is ``prompt_head(evidence) + <schema JSON> + CAPTION_LINE + <caption id> +
#: QUESTIONS_LINE + <questions JSON>`` (the request builder's byte-level fast path relies on it)
CAPTION_LINE = "\ncaption_id="
QUESTIONS_LINE = "\nquestions="
JUDGED_CAPTION_LINE = "\njudged_caption="


def prompt_head(evidence: bool = False) -> str:
    """The fixed start of the user message, up to and including the newline before the schema."""
    lines = list(_RULES)
    lines.append(EVIDENCE_RULE if evidence else NO_EVIDENCE_RULE)
    lines.append("Return only JSON matching this schema:")
    return "\n".join(lines) + "\n"


def user_prompt(caption_id: str, questions: Sequence[Mapping[str, Any]], schema: Mapping[str, Any],
                evidence: bool = False, judged_caption: Optional[str] = None) -> str:
    """The user message text (module docstring); ``questions`` = ``[{question_id, category, question}]``;
    ``judged_caption`` adds the ``judged_caption=`` line."""
    qs = [{"question_id": q["question_id"], "category": q["category"], "question": q["question"]} for q in questions]
    text = (prompt_head(evidence) + dumps_bytes(schema).decode("utf-8") + CAPTION_LINE + f"{caption_id}"
            + QUESTIONS_LINE + dumps_bytes(qs).decode("utf-8"))
    if judged_caption is not None:
        text += JUDGED_CAPTION_LINE + dumps_bytes(judged_caption).decode("utf-8")
    return text


_CAPTION_ID = re.compile(r"^caption_id=(.*)$", re.M)
_JUDGED = re.compile(r"^judged_caption=(\".*\")\s*$", re.M)
_QUESTIONS = re.compile(r"^questions=(\[.*\])\s*$", re.M)


def message_text(content: Any) -> str:
    """Text of a chat message content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return ""


def message_image_urls(content: Any) -> List[str]:
    """The ``image_url`` URLs of a chat message content list."""
    out: List[str] = []
    if isinstance(content, list):
        for p in content:
            if isinstance(p, Mapping) and p.get("type") == "image_url":
                iu = p.get("image_url")
                url = iu.get("url") if isinstance(iu, Mapping) else iu
                if isinstance(url, str):
                    out.append(url)
    return out


def parse_user_prompt(text: str) -> Tuple[Optional[str], List[Dict[str, Any]]]:
    """``(caption_id, questions)`` read back from a user message built by :func:`user_prompt`.

    Raises ``ValueError`` when the ``questions=`` line is missing or not a JSON list of objects.
    """
    m = _QUESTIONS.search(text)
    if not m:
        raise ValueError("user message has no 'questions=[...]' line")
    try:
        qs = json.loads(m.group(1))
    except json.JSONDecodeError as exc:
        raise ValueError(f"'questions=' line is not JSON ({exc})") from None
    if not isinstance(qs, list) or not all(isinstance(q, dict) and isinstance(q.get("question_id"), str) for q in qs):
        raise ValueError("'questions=' must be a list of objects with a string question_id")
    c = _CAPTION_ID.search(text)
    return (c.group(1).strip() if c else None), qs


def parse_judged_caption(text: str) -> Optional[str]:
    """The ``judged_caption=`` line's text (``None`` when the message has none)."""
    m = _JUDGED.search(text)
    if not m:
        return None
    try:
        value = json.loads(m.group(1))
    except json.JSONDecodeError as exc:
        raise ValueError(f"'judged_caption=' line is not a JSON string ({exc})") from None
    if not isinstance(value, str):
        raise ValueError("'judged_caption=' line is not a JSON string")
    return value


__all__ = ["PROMPT_VERSION", "SYSTEM_PROMPT", "user_prompt", "prompt_head", "CAPTION_LINE", "QUESTIONS_LINE",
           "JUDGED_CAPTION_LINE", "parse_user_prompt", "parse_judged_caption", "message_text", "message_image_urls"]
