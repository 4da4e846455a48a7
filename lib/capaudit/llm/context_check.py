"""Refuse, before sending, a request too long for the model's context (its image tokens included).

A server that declares the model's context (vLLM's ``/v1/models`` entry: ``max_model_len``, kept in
the recorded model card) and offers ``POST /tokenize`` (vLLM) counts a chat request's prompt exactly:
the chat template applied and every image expanded to its image tokens by the model's own processor.
A request whose prompt plus ``max_tokens`` exceeds the context is not sent; its row says why, in one
line. A server without ``/tokenize`` (or a tokenize call that fails) leaves the request to the server.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from capaudit.io.canonical_json import dumps_bytes, loads

CONTEXT_KIND = "context"


def tokenize_url(endpoint: str) -> str:
    """``<base>/tokenize`` for a chat-completions endpoint URL (vLLM serves it beside ``/v1``)."""
    base = endpoint.rstrip("/")
    for tail in ("/chat/completions", "/v1"):
        if base.endswith(tail):
            base = base[: -len(tail)]
    return base + "/tokenize"


def context_limit(cards: Sequence[Mapping[str, Any]]) -> Optional[int]:
    """The smallest ``max_model_len`` the endpoints' cards declare (``None`` when none does)."""
    limits = [c.get("max_model_len") for c in cards]
    ints = [int(x) for x in limits if isinstance(x, int) and not isinstance(x, bool) and x > 0]
    return min(ints) if ints else None


def tokenize_body(request: Mapping[str, Any], model: str) -> bytes:
    """The ``/tokenize`` body of a request row: its messages, the template kwargs it sends."""
    body: Dict[str, Any] = {"model": model, "messages": request["messages"], "add_generation_prompt": True}
    kwargs = (request.get("decoding") or {}).get("chat_template_kwargs")
    if isinstance(kwargs, Mapping):
        body["chat_template_kwargs"] = dict(kwargs)
    return dumps_bytes(body)


def max_new_tokens(request: Mapping[str, Any]) -> int:
    """The completion budget a request asks for (0 when it sets none)."""
    dec = request.get("decoding") or {}
    for key in ("max_tokens", "max_completion_tokens"):
        v = dec.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return 0


def refusal(status: int, raw: bytes, request: Mapping[str, Any], limit: int) -> Optional[str]:
    """The one-line reason a request is refused, from its ``/tokenize`` answer; ``None`` when it fits
    or when the answer is not a count (the request then goes to the server as it is)."""
    if status != 200:
        return None
    try:
        count = loads(raw)["count"]
    except Exception:
        return None
    if not isinstance(count, int):
        return None
    new = max_new_tokens(request)
    if count + new <= limit:
        return None
    return (f"prompt is {count} tokens (chat template and image tokens included) + max_tokens {new} = "
            f"{count + new} > the model's context of {limit} tokens; not sent")


__all__ = ["CONTEXT_KIND", "context_limit", "max_new_tokens", "refusal", "tokenize_body", "tokenize_url"]
