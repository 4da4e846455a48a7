"""Numbers-map fragments: each stage writes the numbers it wants quoted, the paper merges them.

A fragment is ``<artifacts>/numbers/<stage>.json`` = ``{"numbers": {Name: {"value", "format",
"description"}}, "stage", "backend"}``. ``Name`` is letters only (it becomes the TeX macro
``\\ca<Name>``); ``format`` says how the paper prints the value (:data:`FORMATS`: ``int``, ``num:D``,
``pct:D`` (a rate as a percentage), ``signed:D``, ``text``, ``list``); stages write no LaTeX. The
paper's numbers map reads every fragment, so a stage adds quoted numbers without touching the paper
layer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic

PathLike = Union[str, Path]
_NAME = re.compile(r"^[A-Za-z]+$")
#: how a fragment's value is printed (the paper layer formats it)
FORMATS = re.compile(r"^(int|text|list|(num|pct|signed):[0-9])$")


_DIGIT_WORDS = {"0": "Zero", "1": "One", "2": "Two", "3": "Three", "4": "Four", "5": "Five", "6": "Six",
                "7": "Seven", "8": "Eight", "9": "Nine"}


def macro_word(*parts: object) -> str:
    """Letters-only CamelCase for number names, digits spelled out: ``("iiw400_human",)`` →
    ``IiwFourZeroZeroHuman``, ``"Naive (greedy)"`` → ``NaiveGreedy``."""
    out = []
    for part in re.split(r"[^A-Za-z0-9]+", "_".join(str(p) for p in parts)):
        if part:
            s = "".join(_DIGIT_WORDS.get(ch, ch) for ch in part)
            out.append(s[:1].upper() + s[1:])
    return "".join(out)


def fragment_path(artifacts_dir: PathLike, stage: str) -> Path:
    return Path(artifacts_dir) / "numbers" / f"{stage}.json"


def write_numbers_fragment(artifacts_dir: PathLike, stage: str, numbers: Mapping[str, Mapping[str, Any]],
                           backend: Optional[str] = None) -> Path:
    """Write ``numbers`` (Name → {value, format, description}) as the stage's fragment."""
    for name, n in numbers.items():
        if not _NAME.match(name):
            raise InputError("number names are letters only (they become TeX macros)", field=name)
        if "format" not in n or "value" not in n:
            raise InputError("each number needs 'value' and 'format'", field=name)
        if "text" in n:
            raise InputError("a stage writes no printed form ('text'): give 'format', the paper prints it", field=name)
        if not FORMATS.match(str(n["format"])):
            raise InputError(f"format {n['format']!r} is not int, text, list, num:D, pct:D or signed:D", field=name)
    payload = {"stage": stage, "backend": backend, "numbers": {k: dict(v) for k, v in sorted(numbers.items())}}
    return write_json_atomic(fragment_path(artifacts_dir, stage), payload)


def read_numbers_fragments(artifacts_dir: PathLike) -> Dict[str, Dict[str, Any]]:
    """All fragments merged: Name → {value, format, description, stage}; a name twice is an error."""
    out: Dict[str, Dict[str, Any]] = {}
    for p in sorted((Path(artifacts_dir) / "numbers").glob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"unreadable numbers fragment ({exc})", path=p) from None
        for name, n in (data.get("numbers") or {}).items():
            if name in out:
                raise InputError(f"number {name!r} is also defined by stage {out[name]['stage']!r}", path=p)
            out[name] = {**n, "stage": data.get("stage", p.stem)}
    return out


__all__ = ["FORMATS", "fragment_path", "macro_word", "write_numbers_fragment", "read_numbers_fragments"]
