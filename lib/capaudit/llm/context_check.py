"""Refuse, before sending, a request too long for the model's context (its image tokens included).

A server that declares the model's context (vLLM's ``/v1/models`` entry: ``max_model_len``, kept in
the recorded model card) and offers ``POST /tokenize`` (vLLM) counts a chat request's prompt exactly:
the chat template applied and every image expanded to its image tokens by the model's own processor.
A request whose prompt plus ``max_tokens`` exceeds the context is not sent; its row says why, in one
line. Where no count can be had (no ``/tokenize``, an error status, no answer within
:data:`TOKENIZE_TIMEOUT_S`), the check is off for the rest of the run, which says so in its stats
(``context_check_off``), and the requests go to the server as they are.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from capaudit.io.canonical_json import dumps_bytes, loads

CONTEXT_KIND = "context"
#: the most a ``/tokenize`` call may take (it is a template and a tokenizer, no generation)
TOKENIZE_TIMEOUT_S = 10.0
#: decoding keys that change what the chat template renders, sent to ``/tokenize`` as the request sends them
TEMPLATE_KEYS = ("chat_template", "chat_template_kwargs", "mm_processor_kwargs", "add_generation_prompt",
                 "continue_final_message")


class ContextUncounted(ValueError):
    """The ``/tokenize`` answer is not a count (the check cannot be made)."""


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
    dec = request.get("decoding") or {}
    for key in TEMPLATE_KEYS:
        if dec.get(key) is not None:
            body[key] = dec[key]
    if body.get("continue_final_message"):
        body["add_generation_prompt"] = False  # vLLM refuses both at once; the request sends the same
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
    """The one-line reason a request is refused, from its ``/tokenize`` answer; ``None`` when it fits.
    Raises :class:`ContextUncounted` when the answer is not a count."""
    if status != 200:
        raise ContextUncounted(f"/tokenize answered HTTP {status}: {raw[:200].decode('utf-8', 'replace')}")
    try:
        count = loads(raw)["count"]
    except Exception:
        count = None
    if not isinstance(count, int) or isinstance(count, bool):
        raise ContextUncounted(f"/tokenize answer has no integer 'count': {raw[:200].decode('utf-8', 'replace')}")
    new = max_new_tokens(request)
    if count + new <= limit:
        return None
    return (f"prompt is {count} tokens (chat template and image tokens included) + max_tokens {new} = "
            f"{count + new} > the model's context of {limit} tokens; not sent")


__all__ = ["CONTEXT_KIND", "TEMPLATE_KEYS", "TOKENIZE_TIMEOUT_S", "ContextUncounted", "context_limit", "max_new_tokens", "refusal", "tokenize_body", "tokenize_url"]
