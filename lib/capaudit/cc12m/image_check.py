"""Decode check of image bytes (PIL, full decode: a truncated JPEG fails) and file naming."""

from __future__ import annotations

import io
import warnings
from pathlib import PurePosixPath
from typing import Tuple

from .urls import file_stem_for

NAMINGS = ("image-id", "sha256", "shard-member")


class CorruptImage(ValueError):
    """Bytes PIL cannot decode completely."""


def decoded_size(data: bytes) -> Tuple[int, int]:
    """``(width, height)`` after decoding every pixel of ``data``; :class:`CorruptImage` otherwise."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                im.load()
                return int(im.width), int(im.height)
    except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBomb*, ...
        raise CorruptImage(f"{type(exc).__name__}: {exc}") from None


def image_file_name(naming: str, image_id: str, sha256: str, shard_name: str, member: str) -> str:
    """File name of one image: ``<image id><ext>`` (default), content-addressed ``<sha256><ext>``,
    or the reference's ``<shard stem>__<member stem><ext>`` (``shard-member``)."""
    member_path = PurePosixPath(member)
    suffix = member_path.suffix.lower()
    if naming == "image-id":
        return file_stem_for(image_id) + suffix
    if naming == "sha256":
        return sha256 + suffix
    if naming == "shard-member":
        return f"{PurePosixPath(shard_name).stem}__{member_path.stem}{suffix}"
    raise ValueError(f"unknown naming {naming!r} (expected one of {', '.join(NAMINGS)})")


__all__ = ["NAMINGS", "CorruptImage", "decoded_size", "image_file_name"]
