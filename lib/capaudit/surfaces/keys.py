"""Join-key normalisation for fair slices (reference-spec §11.1 ``key_normalization``)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional
from urllib.parse import urlsplit, urlunsplit


def _as_text(value: Any) -> str:
    # Parquet/pandas turn integer ids into floats when a column has nulls: 123.0 → "123".
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def key_str(value: Any) -> str:
    """``str``: the value as text, surrounding whitespace stripped."""
    return _as_text(value)


def key_zfill9(value: Any) -> str:
    """``zfill9``: text left-padded with zeros to 9 characters (CC12M numeric ids)."""
    return _as_text(value).zfill(9)


def key_zfill12(value: Any) -> str:
    """``zfill12``: text left-padded with zeros to 12 characters (COCO image ids)."""
    return _as_text(value).zfill(12)


def key_url(value: Any) -> str:
    """``url``: strip, lower-case scheme and host, drop the fragment; path and query unchanged."""
    text = _as_text(value)
    parts = urlsplit(text)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, parts.query, ""))


KEY_NORMALIZERS: Dict[str, Callable[[Any], str]] = {
    "str": key_str,
    "zfill9": key_zfill9,
    "zfill12": key_zfill12,
    "url": key_url,
}


def normalize_key(value: Any, mode: str = "str") -> Optional[str]:
    """Normalise one join key with ``mode`` (§11.1); ``None`` and empty keys give ``None``."""
    try:
        fn = KEY_NORMALIZERS[mode]
    except KeyError:
        raise ValueError(f"unknown key_normalization '{mode}' (expected one of {sorted(KEY_NORMALIZERS)})") from None
    if value is None:
        return None
    out = fn(value)
    return out if _as_text(value) else None
