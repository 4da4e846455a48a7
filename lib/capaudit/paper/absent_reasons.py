"""Why a run leaves manuscript elements out: a reviewed YAML file named by ``paper.absent_reasons``.

``elements`` maps a manuscript element's file (``text_stats.tex``, ``budget_curves.pdf``) to one line
saying why the run does not produce it; ``unrendered_inputs`` maps an input file the run is given but
no element renders (relative to the inputs' folder, e.g. ``results/``) to one line saying why. The
HTML report prints both ("Not produced by this run").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Union

import yaml

from capaudit.errors import InputError

PathLike = Union[str, Path]


@dataclass(frozen=True)
class AbsentReasons:
    elements: Dict[str, str] = field(default_factory=dict)
    unrendered_inputs: Dict[str, str] = field(default_factory=dict)


def _lines(path: Path, data: Any, key: str) -> Dict[str, str]:
    block = data.get(key) or {}
    if not isinstance(block, dict):
        raise InputError("expected a mapping of file names to one-line reasons", path=path, field=key)
    out: Dict[str, str] = {}
    for name, reason in block.items():
        if not isinstance(reason, str) or not reason.strip() or "\n" in reason.strip():
            raise InputError("a reason is one non-empty line of text", path=path, field=f"{key}.{name}")
        out[str(name)] = reason.strip()
    return out


def read_absent_reasons(path: PathLike) -> AbsentReasons:
    """The reasons file; a malformed one is refused naming the file and the entry."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise InputError("absent-reasons file not found (paper.absent_reasons)", path=p) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML ({exc})", path=p) from None
    if not isinstance(data, dict):
        raise InputError("expected a mapping with 'elements' and 'unrendered_inputs'", path=p)
    unknown = sorted(set(data) - {"elements", "unrendered_inputs"})
    if unknown:
        raise InputError(f"unknown key(s) {unknown}", path=p)
    return AbsentReasons(_lines(p, data, "elements"), _lines(p, data, "unrendered_inputs"))


def reasons_for_params(params: Optional[PathLike]) -> AbsentReasons:
    """The reasons file a params file names (``paper.absent_reasons``, relative to the repository root
    or the working directory); none named: no reasons."""
    if params is None or not Path(params).is_file():
        return AbsentReasons()
    raw = yaml.safe_load(Path(params).read_text(encoding="utf-8")) or {}
    name = ((raw.get("paper") or {}) if isinstance(raw, dict) else {}).get("absent_reasons")
    if not name:
        return AbsentReasons()
    p = Path(name)
    if not p.is_absolute() and not p.exists():
        p = Path(params).resolve().parent.parent / p
    return read_absent_reasons(p)


__all__ = ["AbsentReasons", "read_absent_reasons", "reasons_for_params"]
