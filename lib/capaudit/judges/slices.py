"""Surfaces of a judged slice: caption rows with an image, from COCO-MINI, SugarCrepe or any JSONL.

Params (``judges.slices[].surfaces[]``), one mapping per surface::

    {name, label?, role?: ours|ref|control|probe, source, ...}

Sources:

* ``coco_mini_captions`` — ``caption_rank: k``: per COCO-MINI image (by id) its k-th human caption
  by annotation id (rank 0 = first annotator, rank 1 = a second one). Caption id
  ``<surface>:coco-ann-<annotation id>``.
* ``sugarcrepe`` — ``side: positive|negative``, ``types?: [...]`` (default all seven): every
  SugarCrepe pair whose val2017 image is in COCO-MINI; the positive is a COCO caption of that image.
  Caption id ``<surface>:<type>:<index>:coco-ann-<id of the positive's annotation>`` (the marker
  keeps the reference-caption judge away from the caption and from its source); rows carry
  ``pair_id`` = ``<type>:<index>`` and ``perturbation``.
* ``jsonl`` — ``path`` (relative to the working directory), ``caption_field`` (default
  ``caption``), ``image_field`` (default ``image_path``), ``id_field`` (default: none →
  ``<surface>:<image_id_field value>``, else ``<surface>:<row>``), ``image_id_field`` (default
  ``image_id``). This reads the recaptioning runner's output (``image_id, image_path, caption,
  model, policy``); ``policy`` and ``model`` are kept on the rows, and ``policy:``/``corpus:`` in
  the surface params put the surface into the policy-control table.

Any source takes ``limit: N`` (keep the first N rows; small test runs).

Every row: ``{caption_id, surface, caption, image_id, image_path, source_row, policy?, model?,
pair_id?, perturbation?}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.errors import InputError

SOURCES = ("coco_mini_captions", "sugarcrepe", "jsonl")
SUGARCREPE_TYPES = ("add_att", "add_obj", "replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
ROLES = ("ours", "ref", "control", "probe")


@dataclass(frozen=True)
class SurfaceSpec:
    """One surface of a judged slice (module docstring)."""

    name: str
    source: str
    label: str = ""
    role: str = "ours"
    policy: Optional[str] = None
    corpus: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_params(cls, d: Any, where: str) -> "SurfaceSpec":
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str) or not d["name"]:
            raise InputError(f"{where}: a surface needs a 'name'", field="name")
        src = d.get("source")
        if src not in SOURCES:
            raise InputError(f"{where}: source must be one of {', '.join(SOURCES)}, got {src!r}", field="source")
        role = d.get("role", "ours")
        if role not in ROLES:
            raise InputError(f"{where}: role must be one of {', '.join(ROLES)}, got {role!r}", field="role")
        known = {"name", "source", "label", "role", "policy", "corpus"}
        return cls(name=d["name"], source=src, label=str(d.get("label", d["name"])), role=role,
                   policy=d.get("policy"), corpus=d.get("corpus"),
                   params={k: v for k, v in d.items() if k not in known})


def coco_caption_rows(name: str, rank: int) -> List[Dict[str, Any]]:
    """``coco_mini_captions`` rows (module docstring)."""
    from capaudit.data.coco import coco_mini

    if rank < 0:
        raise InputError(f"surface {name!r}: caption_rank must be >= 0", field="caption_rank")
    out = []
    for im in coco_mini():
        caps = sorted(im.captions, key=lambda c: int(c["id"]))
        if rank >= len(caps):
            continue
        c = caps[rank]
        out.append({"caption_id": f"{name}:coco-ann-{c['id']}", "surface": name, "caption": str(c["caption"]).strip(),
                    "image_id": im.id, "image_path": str(im.path) if im.path else None})
    return out


def _norm(s: str) -> str:
    return " ".join(s.lower().replace(".", " ").split())


def sugarcrepe_rows(name: str, side: str, types: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """``sugarcrepe`` rows (module docstring)."""
    from capaudit.data.coco import coco_mini
    from capaudit.data.registry import fetch

    if side not in ("positive", "negative"):
        raise InputError(f"surface {name!r}: side must be positive or negative, got {side!r}", field="side")
    types = list(types or SUGARCREPE_TYPES)
    bad = [t for t in types if t not in SUGARCREPE_TYPES]
    if bad:
        raise InputError(f"surface {name!r}: unknown SugarCrepe type(s) {bad}", field="types")
    idx = coco_mini()
    out = []
    for t in types:
        path = fetch("sugarcrepe", f"{t}.json")
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        for key in sorted(data, key=lambda k: int(k) if str(k).isdigit() else str(k)):
            r = data[key]
            im = idx.by_file_name(str(r.get("filename", "")))
            if im is None:
                continue
            pos = str(r.get("caption", "")).strip()
            ann = next((c["id"] for c in im.captions if _norm(str(c["caption"])) == _norm(pos)), None)
            marker = f":coco-ann-{ann}" if ann is not None else ""
            text = pos if side == "positive" else str(r.get("negative_caption", "")).strip()
            out.append({"caption_id": f"{name}:{t}:{key}{marker}", "surface": name, "caption": text,
                        "image_id": im.id, "image_path": str(im.path) if im.path else None,
                        "pair_id": f"{t}:{key}", "perturbation": t})
    return out


def jsonl_rows(name: str, params: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """``jsonl`` rows (module docstring)."""
    from ._stream import json_lines

    if not params.get("path"):
        raise InputError(f"surface {name!r}: source jsonl needs 'path'", field="path")
    path = Path(str(params["path"]))
    if not path.is_file():
        raise InputError("surface file not found", path=path)
    cf = str(params.get("caption_field", "caption"))
    imf = str(params.get("image_field", "image_path"))
    idf = params.get("id_field")
    iidf = str(params.get("image_id_field", "image_id"))
    out = []
    for lineno, row in json_lines(path):
        cap = row.get(cf) if isinstance(row, dict) else None
        if not isinstance(cap, str) or not cap.strip():
            continue
        if idf:
            if row.get(idf) in (None, ""):
                raise InputError("id field is missing or empty", path=path, line=lineno, field=str(idf))
            cid = f"{name}:{row[idf]}"
        elif row.get(iidf) not in (None, ""):
            cid = f"{name}:{row[iidf]}"
        else:
            cid = f"{name}:{lineno - 1}"
        img = row.get(imf)
        if isinstance(img, str) and img and not img.startswith(("http://", "https://", "data:", "file://")):
            p = Path(img)
            if not p.is_absolute():
                p = (path.parent / p) if (path.parent / p).exists() else p
            img = str(p.resolve())
        item = {"caption_id": cid, "surface": name, "caption": cap.strip(), "image_id": row.get(iidf),
                "image_path": img if isinstance(img, str) and img else None, "source_row": lineno - 1}
        for k in ("policy", "model"):
            if row.get(k) is not None:
                item[k] = row[k]
        out.append(item)
    return out


def surface_rows(spec: SurfaceSpec) -> List[Dict[str, Any]]:
    """Caption rows of one surface; caption ids must be unique within the surface."""
    if spec.source == "coco_mini_captions":
        rows = coco_caption_rows(spec.name, int(spec.params.get("caption_rank", 0)))
    elif spec.source == "sugarcrepe":
        rows = sugarcrepe_rows(spec.name, str(spec.params.get("side", "")), spec.params.get("types"))
    else:
        rows = jsonl_rows(spec.name, spec.params)
    if spec.params.get("limit") is not None:
        rows = rows[: int(spec.params["limit"])]
    seen: Dict[str, int] = {}
    for i, r in enumerate(rows):
        r.setdefault("source_row", i)
        if r["caption_id"] in seen:
            raise InputError(f"surface {spec.name!r}: caption id {r['caption_id']!r} occurs twice "
                             f"(rows {seen[r['caption_id']]} and {i})", field="id_field")
        seen[r["caption_id"]] = i
    return rows


__all__ = ["SOURCES", "SUGARCREPE_TYPES", "SurfaceSpec", "surface_rows", "coco_caption_rows", "sugarcrepe_rows",
           "jsonl_rows"]
