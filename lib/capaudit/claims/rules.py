"""Task rule of the claim-extraction task, checked after the JSON schema (``capaudit.llm.validate``).

One rule: the answer's ``caption_id`` must equal the request's ``input.caption_id`` (after
stripping surrounding whitespace). A model that echoes another id has confused its input; the
client re-asks and, failing that, records the row as ``ok: false`` (``error_kind: rule``). This is
stricter than the reference (§4.3 ``ok`` = parsed + schema-valid) and is a documented deviation.
"""

from __future__ import annotations

from typing import Any, List, Mapping

from capaudit.llm.validate import register_task_rules

from .requests import TASK


def caption_id_matches(parsed: Any, request: Mapping[str, Any]) -> List[str]:
    """``[]`` when ``parsed.caption_id`` equals the request's caption id, else one message."""
    want = (request.get("input") or {}).get("caption_id")
    got = parsed.get("caption_id") if isinstance(parsed, Mapping) else None
    if want is None or not isinstance(got, str) or got.strip() == str(want).strip():
        return []
    return [f"caption_id: answer has {got!r}, request has {want!r}"]


register_task_rules(TASK, caption_id_matches)

__all__ = ["caption_id_matches"]
