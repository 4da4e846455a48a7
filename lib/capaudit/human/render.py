"""What the annotation notebook puts on screen, as pure functions (no widgets): the claim, the
caption window with the claim's span marked, and the image bytes.

:mod:`.widgets` renders every screen through these, and :mod:`.validate` checks a study before
launch through the same functions, so what is validated is what annotators see.
"""

from __future__ import annotations

import html
import io
from html.parser import HTMLParser
from typing import List, Optional, Tuple

MAX_IMAGE_SIDE = 1024


def claim_html(claim: str) -> str:
    """The claim as the annotator's claim box shows it (text escaped)."""
    return f'<div class="capaudit-claimbox">Claim: <b class="capaudit-claimtext">{html.escape(claim)}</b></div>'


def highlight_caption(window: str, offsets: Optional[Tuple[int, int]]) -> str:
    """The caption window as HTML with the claim's span wrapped in ``<mark>`` (text escaped)."""
    if not offsets or not 0 <= offsets[0] < offsets[1] <= len(window):
        return html.escape(window)
    s, e = offsets
    return (html.escape(window[:s]) + '<mark class="capaudit-claim">' + html.escape(window[s:e]) + "</mark>"
            + html.escape(window[e:]))


class _Text(HTMLParser):
    def __init__(self, tag: Optional[str], cls: Optional[str]):
        super().__init__(convert_charrefs=True)
        self.tag, self.cls = tag, cls
        self.depth = 0
        self.parts: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        if self.depth:
            self.depth += 1
        elif tag == self.tag and (self.cls is None or self.cls in (dict(attrs).get("class") or "").split()):
            self.depth = 1

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.tag is None or self.depth:
            self.parts.append(data)


def html_text(fragment: str, tag: Optional[str] = None, cls: Optional[str] = None) -> str:
    """The text a browser shows of ``fragment`` (entities decoded), or only of its ``<tag class=cls>``."""
    p = _Text(tag, cls)
    p.feed(fragment)
    p.close()
    return "".join(p.parts)


def shown_claim_text(fragment: str) -> str:
    """The claim text of a :func:`claim_html` fragment."""
    return html_text(fragment, "b", "capaudit-claimtext")


def load_image(path: Optional[str], max_side: int = MAX_IMAGE_SIDE) -> Optional[bytes]:
    """JPEG bytes of the image scaled to at most ``max_side`` pixels; ``None`` if missing or unreadable."""
    if not path:
        return None
    try:
        from PIL import Image

        with Image.open(path) as im:
            im = im.convert("RGB")
            im.thumbnail((max_side, max_side))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=85)
            return buf.getvalue()
    except Exception:  # missing, unreadable, not an image: offer image_unavailable instead
        return None



__all__ = ["MAX_IMAGE_SIDE", "claim_html", "highlight_caption", "html_text", "load_image", "shown_claim_text"]
