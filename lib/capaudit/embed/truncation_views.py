"""What the 07_encoder_truncation notebook shows beside the encoder-truncation tables."""

from __future__ import annotations

from typing import Any, Mapping, Optional


def clip_backend_label(results: Mapping[str, Mapping[str, Any]]) -> Optional[str]:
    """Footer naming the CLIP BPE tokenizer and its caption normalisation (``clean``), taken from the
    first surface's first encoder that has one; None when no surface or no CLIP-family encoder ran."""
    first = next(iter(results.values()), None)
    if first is None:
        return None
    details = first.get("encoder_details", {}).values()
    clip = next((d for d in details if d.get("clean")), None)
    return f"CLIP BPE: instant-clip-tokenizer, clean={clip['clean']}" if clip else None
