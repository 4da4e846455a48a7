"""The ``cc12m:`` params section (see :mod:`capaudit.cc12m.stage`) as one frozen value, the only defaults."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from capaudit.config import ParamsSection, PathLike

from .surface_spec import SurfaceSpec

SECTION = "cc12m"


@dataclass(frozen=True)
class HubFiles:
    """Where a local input comes from when it is not there yet: a Hugging Face dataset repository."""

    repo: str
    revision: Optional[str] = None
    allow: Tuple[str, ...] = ()


@dataclass(frozen=True)
class CC12MParams:
    """The ``cc12m:`` section (:mod:`capaudit.cc12m.stage` docstring), the only defaults."""

    surfaces: Tuple[SurfaceSpec, ...]
    shards: str
    anchor: Optional[str] = None
    key_normalization: str = "zfill9"
    seed: int = 0
    max_rows: Optional[int] = 5000
    skip_incomplete: bool = True
    match: str = "url"
    naming: str = "image-id"
    allow_missing: bool = True
    surface_hubs: Tuple[Tuple[str, HubFiles], ...] = ()
    shards_hub: Optional[HubFiles] = None

    KEYS = ("surfaces", "shards", "anchor", "key_normalization", "seed", "max_rows", "skip_incomplete", "match",
            "naming", "allow_missing", "shards_hub")

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "CC12MParams":
        """From the params section; an unknown key or a bad value is one line naming the file, section and key."""
        from .image_check import NAMINGS
        from .shard_index import MATCH_MODES
        from .urls import KEY_MODES

        s = ParamsSection.of(section, SECTION, path).only(cls.KEYS)
        specs, hubs = _surfaces(s)
        choice = {}
        for key, allowed in (("match", MATCH_MODES), ("naming", NAMINGS), ("key_normalization", KEY_MODES)):
            value = s.raw(key, getattr(cls, key))
            if value not in allowed:
                raise s.error(key, f"one of {', '.join(allowed)}, got {value!r}")
            choice[key] = str(value)
        flags = {}
        for key in ("skip_incomplete", "allow_missing"):
            if not isinstance(s.raw(key, True), bool):
                raise s.error(key, f"true or false, got {s.raw(key)!r}")
            flags[key] = s.raw(key, getattr(cls, key))
        for key, minimum, what in (("max_rows", 1, "a positive whole number or null (no cut)"),
                                   ("seed", 0, "a non-negative whole number")):
            v = s.raw(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < minimum):
                raise s.error(key, f"{what}, got {v!r}")
        if not s.raw("shards"):
            raise s.error("shards", "the WebDataset .tar shards holding the images")
        return cls(surfaces=specs, shards=str(s.raw("shards")), anchor=s.raw("anchor"),
                   seed=s.raw("seed", cls.seed), max_rows=s.raw("max_rows", cls.max_rows), surface_hubs=hubs,
                   shards_hub=_hub(s, "shards_hub", s.raw("shards_hub")), **choice, **flags)

    @classmethod
    def bridge_from_args(cls, args: argparse.Namespace, surfaces: Sequence[SurfaceSpec]) -> "CC12MParams":
        """The bridge part from the ``capaudit cc12m bridge`` options (no shards: the bridge reads none)."""
        return cls(surfaces=tuple(surfaces), shards="", anchor=args.anchor, key_normalization=args.key_normalization,
                   seed=args.seed, max_rows=args.max_rows, skip_incomplete=args.skip_incomplete)


def _hub(s: ParamsSection, key: str, value: Any) -> Optional[HubFiles]:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value.get("repo"):
        raise s.error(key, "expected a mapping with 'repo' (and optionally 'revision', 'allow')")
    allow = value.get("allow") or ()
    return HubFiles(str(value["repo"]), str(value["revision"]) if value.get("revision") else None,
                    tuple(str(a) for a in ([allow] if isinstance(allow, str) else allow)))


def _surfaces(s: ParamsSection) -> Tuple[Tuple[SurfaceSpec, ...], Tuple[Tuple[str, HubFiles], ...]]:
    items = s.raw("surfaces")
    if not isinstance(items, list) or len(items) < 2:
        raise s.error("surfaces", "at least two surfaces are needed")
    specs: List[SurfaceSpec] = []
    hubs: List[Tuple[str, HubFiles]] = []
    for i, item in enumerate(items):
        loc = f"surfaces[{i}]"
        if not isinstance(item, Mapping) or not item.get("name") or not item.get("path"):
            raise s.error(loc, "needs 'name' and 'path'")
        if item.get("join") not in ("key", "url"):
            raise s.error(f"{loc}.join", f"key or url, got {item.get('join')!r}")
        caption = item.get("caption")
        fields = tuple(str(c) for c in ([caption] if isinstance(caption, str) else caption or ()))
        if not fields:
            raise s.error(f"{loc}.caption", "the caption field (or a list of fields, first non-blank wins)")
        spec = SurfaceSpec(name=str(item["name"]), path=str(item["path"]), join=str(item["join"]),
                           caption_fields=fields, key_field=item.get("key"), url_field=item.get("url"),
                           format=item.get("format"))
        if spec.join_field is None:
            raise s.error(loc, f"join: {spec.join} needs '{spec.join}' (its field)")
        specs.append(spec)
        hub = _hub(s, f"{loc}.hub", item.get("hub"))
        if hub:
            hubs.append((spec.name, hub))
    return tuple(specs), tuple(hubs)


def parse_params(section: Mapping[str, Any], where: Optional[PathLike] = None) -> CC12MParams:
    """:meth:`CC12MParams.from_section` (``where``: the params file)."""
    return CC12MParams.from_section(section, where)


__all__ = ["CC12MParams", "HubFiles", "SECTION", "parse_params"]
