"""Canonical JSON of a finalized summary: sorted keys, exact floats, numpy values as Python.

Two runs are "the same numbers" when :func:`summary_json` of their summaries is byte-identical;
floats are written with ``repr`` (shortest round-trip form), so this compares to the last bit.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


def to_jsonable(obj: Any) -> Any:
    """Dicts (keys as strings), lists, tuples, numpy scalars/arrays → plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else str(f)
    return obj


def summary_json(obj: Any, indent: int | None = 2) -> str:
    """Sorted-key JSON text (UTF-8, non-ASCII kept) of ``obj`` with a trailing newline."""
    return json.dumps(to_jsonable(obj), sort_keys=True, ensure_ascii=False, indent=indent) + "\n"


__all__ = ["summary_json", "to_jsonable"]
