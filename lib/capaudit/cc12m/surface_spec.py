"""One caption surface of the bridge: ``NAME=PATH,join=key|url,key=FIELD,url=FIELD,caption=F1|F2``.

``join`` says how the surface meets the anchor surface: ``key`` (its normalised key equals the
anchor's) or ``url`` (its normalised URL equals the anchor's normalised URL, as PixelProse meets
the LLaVA-NeXT URL in the reference). ``caption`` lists caption fields in order of preference
(the first non-blank text wins, stripped). ``key``/``url`` name the fields read; a field given
but not used for the join is carried into the joined table as provenance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Tuple

from capaudit.errors import InputError

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_OPTIONS = ("join", "key", "url", "caption", "format")


@dataclass(frozen=True)
class SurfaceSpec:
    name: str
    path: str
    join: str  # "key" or "url"
    caption_fields: Tuple[str, ...]
    key_field: Optional[str] = None
    url_field: Optional[str] = None
    format: Optional[str] = None  # jsonl, parquet, csv, tsv (default: from the suffix)

    @property
    def join_field(self) -> str:
        return self.key_field if self.join == "key" else self.url_field  # type: ignore[return-value]


def parse_surface_spec(text: str) -> SurfaceSpec:
    """Parse one ``--surface`` value; errors say what is wrong with it in one line."""
    where = f"--surface {text!r}"
    if "=" not in text:
        raise InputError(f"{where}: expected NAME=PATH,join=key|url,caption=FIELD[|FIELD],key=FIELD,url=FIELD")
    name, rest = text.split("=", 1)
    if not _NAME.match(name):
        raise InputError(f"{where}: surface name {name!r} must be a letter then letters, digits or '_'")
    parts = rest.split(",")
    path, opts = parts[0], {}
    if not path:
        raise InputError(f"{where}: empty PATH")
    for part in parts[1:]:
        k, sep, v = part.partition("=")
        if not sep or k not in _OPTIONS or not v:
            raise InputError(f"{where}: bad option {part!r} (options: {', '.join(o + '=...' for o in _OPTIONS)})")
        if k in opts:
            raise InputError(f"{where}: option {k!r} given twice")
        opts[k] = v
    join = opts.get("join")
    if join not in ("key", "url"):
        raise InputError(f"{where}: join=key or join=url is required")
    if "caption" not in opts:
        raise InputError(f"{where}: caption=FIELD is required")
    captions = tuple(f for f in opts["caption"].split("|") if f)
    if not captions:
        raise InputError(f"{where}: caption=FIELD is empty")
    spec = SurfaceSpec(name=name, path=path, join=join, caption_fields=captions, key_field=opts.get("key"),
                       url_field=opts.get("url"), format=opts.get("format"))
    if spec.join_field is None:
        raise InputError(f"{where}: join={join} needs {join}=FIELD")
    if spec.format is not None and spec.format not in ("jsonl", "parquet", "csv", "tsv"):
        raise InputError(f"{where}: format must be jsonl, parquet, csv or tsv, got {spec.format!r}")
    return spec


__all__ = ["SurfaceSpec", "parse_surface_spec"]
