"""The ``surfaces:`` and ``slices:`` params sections (and ``capaudit slice`` options) as frozen values."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from ..config import ParamsSection, PathLike, RunConfig

SLICE_KEYS = ("name", "local", "reference", "surfaces", "n", "seed", "overwrite")


@dataclass(frozen=True)
class SliceParams:
    """One fair slice: its surfaces (local first), ``n`` keys (``None``: every matched key), seed."""

    name: str
    surfaces: Tuple[str, ...]
    n: Optional[int] = None
    seed: int = 0
    overwrite: bool = False

    @classmethod
    def from_item(cls, item: Any, index: int, path: Optional[PathLike] = None) -> "SliceParams":
        """Item ``index`` (1-based) of the ``slices:`` list; an unknown key or bad value names it."""
        if not isinstance(item, Mapping) or not item.get("name"):
            raise ValueError(f"{path}: slices item {index} must be a mapping with a 'name'")
        s = ParamsSection.of(item, f"slices[{item['name']}]", path).only(SLICE_KEYS)
        names = tuple(item.get("surfaces") or [item.get("local"), item.get("reference")])
        if any(n is None for n in names) or len(names) < 2:
            raise ValueError(f"{path}: slice '{item['name']}' needs 'local' and 'reference' (or 'surfaces')")
        return cls(str(item["name"]), names, s.integer("n", cls.n), s.integer("seed", cls.seed, None),
                   s.boolean("overwrite", cls.overwrite))

    @classmethod
    def from_args(cls, args: argparse.Namespace, names: Tuple[str, ...], n: Optional[int]) -> "SliceParams":
        """From the ``capaudit slice`` options; ``names`` the surfaces given, ``n`` the parsed ``--n``."""
        return cls(args.name or "_vs_".join(names), names, n, args.seed, args.overwrite)


def read_surface_specs(cfg: RunConfig) -> Dict[str, Dict[str, Any]]:
    """The ``surfaces:`` list of a params file, keyed by name (names must be unique)."""
    raw = cfg.raw.get("surfaces")
    if raw is None:
        raise KeyError(f"{cfg.path}: params section 'surfaces' is missing")
    if not isinstance(raw, list):
        raise ValueError(f"{cfg.path}: 'surfaces' must be a list of surface specs")
    specs: Dict[str, Dict[str, Any]] = {}
    for i, spec in enumerate(raw, start=1):
        if not isinstance(spec, Mapping) or not spec.get("name"):
            raise ValueError(f"{cfg.path}: surfaces item {i} must be a mapping with a 'name'")
        if spec["name"] in specs:
            raise ValueError(f"{cfg.path}: surface name '{spec['name']}' is declared twice")
        specs[str(spec["name"])] = dict(spec)
    return specs


@dataclass(frozen=True)
class SurfacesParams:
    """A run's surface specs by name (see :mod:`capaudit.surfaces.surface`) and its fair slices."""

    specs: Mapping[str, Dict[str, Any]]
    slices: Tuple[SliceParams, ...] = ()
    path: Optional[Path] = None

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "SurfacesParams":
        """The ``surfaces:`` list (names unique) and the ``slices:`` list (surfaces declared)."""
        specs = read_surface_specs(cfg)
        items = cfg.raw.get("slices") or []
        if not isinstance(items, list):
            raise ValueError(f"{cfg.path}: 'slices' must be a list")
        slices = tuple(SliceParams.from_item(item, i, cfg.path) for i, item in enumerate(items, start=1))
        for sl in slices:
            for n in sl.surfaces:
                if n not in specs:
                    raise KeyError(f"{cfg.path}: slice '{sl.name}' uses surface '{n}', not declared under 'surfaces'")
        return cls(specs, slices, cfg.path)


__all__ = ["SLICE_KEYS", "SliceParams", "SurfacesParams", "read_surface_specs"]
