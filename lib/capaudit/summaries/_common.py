"""Shared helpers for the summary schemas: typed field access with errors naming file and field."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

from .categories import ANSWERS, UNIT_CATEGORIES  # noqa: F401  (the summaries modules import them from here)

PathLike = Union[str, Path]


def where(source: Optional[PathLike], *parts: object) -> str:
    """A location string like ``file.json: surfaces.ours.captions``."""
    path = ".".join(str(p) for p in parts if p != "")
    src = str(source) if source is not None else "<summary>"
    return f"{src}: {path}" if path else src


def require_mapping(value: Any, loc: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{loc}: expected a JSON object, got {type(value).__name__}")
    return value


def get_field(d: Mapping[str, Any], key: str, loc: str) -> Any:
    if key not in d:
        raise ValueError(f"{loc}.{key}: required field is missing")
    return d[key]


def as_int(value: Any, loc: str, minimum: Optional[int] = 0) -> int:
    """An integer (bools rejected; integral floats rejected to keep files canonical)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{loc}: expected an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{loc}: must be >= {minimum}, got {value}")
    return value


def as_float(value: Any, loc: str) -> float:
    """A finite number, returned as ``float``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{loc}: expected a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{loc}: must be finite, got {value!r}")
    return value


def as_str(value: Any, loc: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{loc}: expected a string, got {value!r}")
    return value


def check_keys(d: Mapping[str, Any], allowed: Iterable[str], loc: str) -> None:
    extra = [k for k in d if k not in set(allowed)]
    if extra:
        raise ValueError(f"{loc}: unexpected field(s) {extra}")


def ratio(num: float, den: float) -> float:
    """``num / den``; 0.0 when ``den`` is 0."""
    return num / den if den else 0.0


def close(a: float, b: float, rel: float = 1e-9, abs_: float = 1e-12) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def check_ratio(value: float, num: float, den: float, loc: str, scale: float = 1.0) -> None:
    """Raise if ``value`` is not ``scale * num / den`` (0.0 when den = 0)."""
    expected = scale * ratio(num, den)
    if not close(value, expected):
        raise ValueError(f"{loc}: {value!r} != {scale:g}*{num}/{den} = {expected!r}")


def load_json(path: PathLike) -> Any:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: summary file not found") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc


def dump_json(obj: Any, *, indent: int = 2, ensure_ascii: bool = False, trailing_newline: bool = True) -> str:
    """The reference's JSON style (§10): ``json.dumps(indent=2, ensure_ascii=False)`` + newline."""
    text = json.dumps(obj, indent=indent, ensure_ascii=ensure_ascii)
    return text + "\n" if trailing_newline else text


def write_text(text: str, path: PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return path


def is_ascii_escaped(text: str) -> bool:
    """True if a JSON text was written with ``ensure_ascii=True`` (ASCII only, has ``\\u`` escapes)."""
    return text.isascii() and "\\u" in text


def ordered(keys: Sequence[str], preferred: Sequence[str]) -> tuple:
    """``preferred`` reordered to follow ``keys`` where they overlap (keeps a file's key order)."""
    seen = [k for k in keys if k in preferred]
    return tuple(seen + [k for k in preferred if k not in seen])
