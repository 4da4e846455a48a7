"""Chat-completion payloads for the structured-output dialects of OpenAI-compatible servers.

* ``vllm`` (default): ``structured_outputs: {"json": schema}`` (vLLM >= 0.10; spec §4.3
  ``--structured-json``).
* ``openai``: ``response_format: {"type": "json_schema", "json_schema": {"name", "schema",
  "strict": true}}``.
* ``llamacpp``: ``response_format: {"type": "json_object", "schema": schema}`` (llama-cpp-python
  rejects the OpenAI form with HTTP 422, offline-backends §2.3).

Every key of the request's ``decoding`` object (``temperature``, ``max_tokens``, ``top_p``,
``chat_template_kwargs`` ...) is sent as is, for every dialect: the decoding is part of the
request id, so nothing is silently dropped.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Mapping

DIALECTS = ("vllm", "openai", "llamacpp")
RESERVED_DECODING_KEYS = frozenset(
    {"model", "messages", "structured_outputs", "response_format", "guided_json", "stream", "n"}
)
_NAME_BAD = re.compile(r"[^A-Za-z0-9_-]+")


def schema_name(request: Mapping[str, Any]) -> str:
    """OpenAI ``json_schema.name``: the task name reduced to ``[A-Za-z0-9_-]{1,64}``."""
    name = _NAME_BAD.sub("_", str(request.get("task") or "response")).strip("_") or "response"
    return name[:64]


def build_payload(request: Mapping[str, Any], model: str, dialect: str = "vllm") -> Dict[str, Any]:
    """The JSON body of ``POST /v1/chat/completions`` for one request row."""
    decoding = request.get("decoding") or {}
    bad = RESERVED_DECODING_KEYS.intersection(decoding)
    if bad:
        raise ValueError(f"request {request.get('request_id')}: field 'decoding' may not set {sorted(bad)}")
    payload: Dict[str, Any] = {"model": model, "messages": request["messages"]}
    payload.update(decoding)
    schema = request["schema"]
    if dialect == "vllm":
        payload["structured_outputs"] = {"json": schema}
    elif dialect == "openai":
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": schema_name(request), "schema": schema, "strict": True},
        }
    elif dialect == "llamacpp":
        payload["response_format"] = {"type": "json_object", "schema": schema}
    else:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    return payload


def requested_schema(payload: Mapping[str, Any]) -> Any:
    """The JSON schema a payload asks for, in any of the three dialects (``None`` if none)."""
    so = payload.get("structured_outputs")
    if isinstance(so, Mapping) and "json" in so:
        return so["json"]
    if "guided_json" in payload:
        return payload["guided_json"]
    rf = payload.get("response_format")
    if isinstance(rf, Mapping):
        if rf.get("type") == "json_schema" and isinstance(rf.get("json_schema"), Mapping):
            return rf["json_schema"].get("schema")
        if "schema" in rf:
            return rf["schema"]
    return None


__all__ = ["DIALECTS", "build_payload", "schema_name", "requested_schema"]
