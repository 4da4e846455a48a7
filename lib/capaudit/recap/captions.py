"""Caption text clean-up (reference-spec §6 output record).

``caption`` = the model's text stripped, then trailing ``TEXT:`` blocks that say there is no
text (``TEXT: none``, ``TEXT: N/A``, ``TEXT: no text``, ``**TEXT:** (none visible)`` ...) removed,
repeatedly, and stripped again. A ``TEXT:`` block with real lines is kept: the policies ask for
it. An answer that is empty after this is a failure, never a caption.
"""

from __future__ import annotations

import re

_NONE_WORDS = (
    r"none(?:\s+(?:visible|legible|readable|present|detected|found))?"
    r"|n\s*/\s*a|na|nil|null|nothing|no|-+|—|–"
    r"|no\s+(?:visible\s+|legible\s+|readable\s+|clear\s+|large\s+|clearly\s+legible\s+)?text"
    r"(?:\s+(?:is\s+|was\s+)?(?:visible|present|detected|found|shown|in\s+(?:the\s+|this\s+)?(?:image|picture|photo)))*"
    r"|not\s+applicable|there\s+is\s+no\s+(?:visible\s+|legible\s+)?text"
)
_TRAILING_NONE_TEXT = re.compile(
    r"(?:^|\n|(?<=[.!?:;])[ \t])[-*_#>\s]*text[*_\s]*:[*_\s]*[\[(\"'“]?\s*(?:" + _NONE_WORDS + r")\s*[\])\"'”]?[.!]?[*_\s]*$",
    re.IGNORECASE,
)


def clean_caption(text: str) -> str:
    """Stripped text without trailing "no text" ``TEXT:`` blocks (module docstring)."""
    out = (text or "").strip()
    while True:
        m = _TRAILING_NONE_TEXT.search(out)
        if m is None:
            return out
        out = out[: m.start()].rstrip()


__all__ = ["clean_caption"]
