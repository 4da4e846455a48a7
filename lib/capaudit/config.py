"""Params files → typed run configuration; run directories.

A params file is YAML with a top-level ``run`` name (defaults to the file stem), a
``notebooks`` list (the stages and paper elements this run executes, in order) and one
section per stage (``surfaces``, ``text_stats``, ``prompt_support``, ``paper``, ...).
Stages read their own section with :meth:`RunConfig.section`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import yaml

PathLike = Union[str, Path]


@dataclass(frozen=True)
class RunConfig:
    """A loaded params file."""

    path: Path
    run: str
    notebooks: List[str]
    raw: Dict[str, Any] = field(repr=False)
    out_root: Path = Path("outputs")

    @property
    def out_dir(self) -> Path:
        return self.out_root / self.run

    def section(self, name: str, required: bool = True) -> Dict[str, Any]:
        value = self.raw.get(name)
        if value is None:
            if required:
                raise KeyError(f"{self.path}: params section '{name}' is missing")
            return {}
        if not isinstance(value, dict):
            raise ValueError(f"{self.path}: params section '{name}' must be a mapping")
        return value

    def dirs(self) -> Dict[str, Path]:
        """Create and return the run's output folders."""
        out = {k: self.out_dir / k for k in ("artifacts", "tables", "figures", "notebooks")}
        for p in out.values():
            p.mkdir(parents=True, exist_ok=True)
        return out


def load_config(path: PathLike, out_root: Optional[PathLike] = None) -> RunConfig:
    """Read a params file; ``run`` defaults to the file's stem (``params/demo.yaml`` → demo)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: a params file must be a mapping")
    notebooks = raw.get("notebooks", [])
    if not isinstance(notebooks, list) or not all(isinstance(n, str) for n in notebooks):
        raise ValueError(f"{path}: 'notebooks' must be a list of notebook names")
    return RunConfig(
        path=path,
        run=str(raw.get("run", path.stem)),
        notebooks=notebooks,
        raw=raw,
        out_root=Path(out_root) if out_root else Path(raw.get("out_root", "outputs")),
    )
