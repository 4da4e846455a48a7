"""Image URLs of judge requests: the local path of a ``file://`` URL, the bytes of a ``data:`` URL.

Shared by the request builder (:mod:`.requests`) and the offline judges (:mod:`capaudit.standins.judges`), which
read the images the builder referenced.
"""

from __future__ import annotations

import base64
from pathlib import Path
from urllib.parse import unquote, urlparse


def file_url_path(url: str) -> Path:
    """The local path of a ``file://`` URL."""
    return Path(unquote(urlparse(url).path))


def data_url_bytes(url: str) -> bytes:
    """Decoded bytes of a base64 ``data:`` URL (``ValueError`` otherwise)."""
    head, sep, body = url.partition(",")
    if not sep or not head.startswith("data:") or ";base64" not in head:
        raise ValueError("not a base64 data URL")
    return base64.b64decode(body, validate=False)


__all__ = ["file_url_path", "data_url_bytes"]
