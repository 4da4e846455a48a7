"""Join-key and URL normalisation of the reference's CC12M bridge scripts, reproduced exactly.

URL (``normalize_url``): a string only; surrounding whitespace stripped; empty → no URL. When the
URL has both a scheme and a host, the scheme and the host (``netloc``, port and user info included)
are lower-cased and the fragment dropped; path and query stay byte for byte (so ``http`` and
``https``, a trailing slash, path case and query strings still tell URLs apart). A text without
scheme or host is kept as it is (stripped). ``urlunsplit`` also drops an empty ``?`` or ``#``.

Key (``normalize_key``): the value as text, stripped; ``zfill9`` (the reference's CC12M rule) pads
it on the left with zeros to 9 characters — also a non-numeric key, as the reference does.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Optional
from urllib.parse import urlsplit, urlunsplit

KEY_MODES = ("zfill9", "zfill12", "str")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def normalize_url(value: Any) -> Optional[str]:
    """The reference's normalised URL of ``value``, or ``None`` for a non-string or blank value."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    parts = urlsplit(text)
    if not parts.scheme or not parts.netloc:
        return text
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, ""))


def key_text(value: Any) -> Optional[str]:
    """A key value as stripped text; ``None`` when absent or blank. Only text and integers are
    keys (a float id means a lossy reader turned an integer column into floats: refused upstream)."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    return text or None


def normalize_key(value: Any, mode: str = "zfill9") -> Optional[str]:
    """The normalised join key (``zfill9``, ``zfill12`` or ``str``); ``None`` for a blank key."""
    text = key_text(value)
    if text is None:
        return None
    if mode == "zfill9":
        return text.zfill(9)
    if mode == "zfill12":
        return text.zfill(12)
    if mode == "str":
        return text
    raise ValueError(f"unknown key normalisation {mode!r} (expected one of {', '.join(KEY_MODES)})")


def url_image_id(url: str) -> str:
    """Image id of an image known only by its normalised URL: ``u`` + 16 hex digits of its sha1."""
    return "u" + hashlib.sha1(url.encode("utf-8")).hexdigest()[:16]


def file_stem_for(image_id: str) -> str:
    """A file name stem for ``image_id``: the id itself when it is a safe name, else a sanitised
    form with a short hash of the id (two ids never share a stem)."""
    if _SAFE_NAME.match(image_id) and image_id not in (".", ".."):
        return image_id
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", image_id)[:96].strip(".") or "id"
    return f"{clean}-{hashlib.sha1(image_id.encode('utf-8')).hexdigest()[:10]}"


__all__ = ["KEY_MODES", "normalize_url", "key_text", "normalize_key", "url_image_id", "file_stem_for"]
