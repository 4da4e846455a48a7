"""The judge task's identity and answer schema (reference-spec §5.2).

Shared by the request builder (:mod:`.requests`), the answer rule (:mod:`.rules`) and the answer
readers (:mod:`.answers`); it imports none of them, so they form no import circle.
"""

from __future__ import annotations

from typing import Any, Dict, Sequence

TASK = "cbu_vqa"
TASK_VERSION = 1
#: the three answers a judge may give, in the schema's order
ANSWERS = ("yes", "no", "uncertain")
#: the longest ``evidence`` string the schema allows (when evidence is asked for)
EVIDENCE_MAX_LENGTH = 160


def vqa_schema(question_ids: Sequence[str], evidence: bool = False) -> Dict[str, Any]:
    """Per-request guided JSON schema (§5.2)."""
    props: Dict[str, Any] = {
        "question_id": {"type": "string", "enum": list(question_ids)},
        "answer": {"type": "string", "enum": list(ANSWERS)},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    }
    required = ["question_id", "answer", "confidence"]
    if evidence:
        props["evidence"] = {"type": "string", "maxLength": EVIDENCE_MAX_LENGTH}
        required.append("evidence")
    n = len(question_ids)
    return {
        "type": "object",
        "properties": {
            "caption_id": {"type": "string"},
            "question_results": {
                "type": "array",
                "minItems": n,
                "maxItems": n,
                "items": {"type": "object", "properties": props, "required": required, "additionalProperties": False},
            },
        },
        "required": ["caption_id", "question_results"],
        "additionalProperties": False,
    }


__all__ = ["TASK", "TASK_VERSION", "ANSWERS", "EVIDENCE_MAX_LENGTH", "vqa_schema"]
