"""The caption surfaces of the detail stage: COCO-MINI's human captions and JSONL files (params
``detail.surfaces``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

from capaudit.errors import InputError

from .score import CaptionRecord, read_caption_records

DEFAULT_SURFACES = [{"name": "coco_human", "source": "coco_mini", "label": "COCO human"}]


def coco_mini_records() -> List[CaptionRecord]:
    """The five human captions of each COCO-MINI image (ids ``coco:<annotation id>``)."""
    from capaudit.data.coco import coco_mini

    out = []
    for img in coco_mini():
        for ci, ann in enumerate(sorted(img.captions, key=lambda a: a["id"])):
            out.append(CaptionRecord(f"coco:{ann['id']}", str(img.path) if img.path else img.file_name,
                                     str(ann["caption"]).strip(), len(out) + 1,
                                     {"image_id": img.id, "caption_index": ci}))
    return out


def expand_path(path: str, artifacts: Path) -> Path:
    """``{artifacts}`` → the run's artifacts folder, ``{data}`` → ``$CAPAUDIT_DATA_DIR``."""
    return Path(path.replace("{artifacts}", str(artifacts)).replace(
        "{data}", os.environ.get("CAPAUDIT_DATA_DIR", "../shared/data")))


def load_surfaces(section: Mapping[str, Any], artifacts: Path, where: str = "params") -> Tuple[
        Dict[str, List[CaptionRecord]], Dict[str, str], List[str]]:
    """``(records by surface, labels, skipped surfaces)`` for ``detail.surfaces``."""
    items = section.get("surfaces") or DEFAULT_SURFACES
    out: Dict[str, List[CaptionRecord]] = {}
    labels: Dict[str, str] = {}
    skipped: List[str] = []
    for i, item in enumerate(items, start=1):
        if isinstance(item, str):
            item = {"name": item, "source": "coco_mini"} if item == "coco_human" else {"name": item}
        if not isinstance(item, Mapping) or not item.get("name"):
            raise InputError(f"detail.surfaces item {i} must be a mapping with 'name'", path=where, field="surfaces")
        name = str(item["name"])
        labels[name] = str(item.get("label", name))
        if item.get("source") == "coco_mini":
            out[name] = coco_mini_records()
            continue
        if not item.get("path"):
            raise InputError(f"detail surface {name!r} needs 'source: coco_mini' or a 'path'", path=where,
                             field="surfaces")
        p = expand_path(str(item["path"]), artifacts)
        if not p.is_file():
            if item.get("on_missing", "error") == "skip":
                skipped.append(name)
                continue
            raise InputError(f"detail surface {name!r}: file not found", path=p)
        id_field = item.get("id_field", "id")
        recs = read_caption_records(p, str(item.get("caption_field", "caption")), str(item.get("image_field", "image")),
                                    id_field, skip_empty=bool(item.get("skip_empty", False)))
        if not id_field:
            recs = [CaptionRecord(f"{name}:{r.id[3:]}", r.image, r.caption, r.line, r.extra) for r in recs]
        out[name] = recs
    return out, labels, skipped


__all__ = ["DEFAULT_SURFACES", "coco_mini_records", "expand_path", "load_surfaces"]
