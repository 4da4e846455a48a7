"""The caption surfaces of the detail stage: COCO-MINI's human captions and JSONL files (params
``detail.surfaces``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from capaudit.errors import InputError

from .params import DEFAULT_SURFACES, SurfaceSpec  # noqa: F401  (DEFAULT_SURFACES: public re-export)
from .score import CaptionRecord, read_caption_records


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


def load_surfaces(surfaces: Sequence[SurfaceSpec], artifacts: Path) -> Tuple[
        Dict[str, List[CaptionRecord]], Dict[str, str], List[str]]:
    """``(records by surface, labels, skipped surfaces)`` of ``detail.surfaces`` (:class:`SurfaceSpec`,
    checked when the params were read)."""
    out: Dict[str, List[CaptionRecord]] = {}
    labels: Dict[str, str] = {}
    skipped: List[str] = []
    for item in surfaces:
        name = item.name
        labels[name] = item.label
        if item.source == "coco_mini":
            out[name] = coco_mini_records()
            continue
        p = expand_path(str(item.path), artifacts)
        if not p.is_file():
            if item.on_missing == "skip":
                skipped.append(name)
                continue
            raise InputError(f"detail surface {name!r}: file not found", path=p)
        recs = read_caption_records(p, item.caption_field, item.image_field, item.id_field,
                                    skip_empty=item.skip_empty)
        if not item.id_field:
            recs = [CaptionRecord(f"{name}:{r.id[3:]}", r.image, r.caption, r.line, r.extra) for r in recs]
        out[name] = recs
    return out, labels, skipped


__all__ = ["DEFAULT_SURFACES", "coco_mini_records", "expand_path", "load_surfaces"]
