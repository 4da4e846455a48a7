"""Copy a study's images into its own folder (``capaudit human materialize``), so that launch does
not depend on where the images were found at sampling.

Each distinct image (``image_key``) is decoded with Pillow, turned upright (EXIF orientation), scaled
to at most ``max_side`` pixels (never enlarged) and written as JPEG (quality 95) to
``<study folder>/images/<sha256>.jpg``, named by the SHA-256 of the written bytes; the ``assets``
table records the file, its SHA-256, size and pixels, and the source path and its SHA-256. An image
whose key is ``sha256:<hex>`` must still be those bytes (else it is reported changed and not copied).

Resumable: an image already recorded whose file is intact is kept; a recorded file that is gone or
changed is written again. Every image is committed on its own, so an interrupted run loses nothing.
Once the study carries its launch seal the assets are frozen.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from capaudit.errors import EmptyInputError, InputError
from capaudit.io.atomic import write_bytes_atomic
from capaudit.io.manifest import sha256_of

from .render import MAX_IMAGE_SIDE
from .store import utcnow
from .study import Study

IMAGES_DIR = "images"
JPEG_QUALITY = 95


@dataclass
class MaterializeReport:
    """What :func:`materialize` did: counts per outcome and the first examples of each problem."""

    images: int = 0
    written: int = 0
    kept: int = 0
    rewritten: int = 0
    missing: List[Tuple[str, str]] = field(default_factory=list)      # (item_id, source path)
    unreadable: List[Tuple[str, str]] = field(default_factory=list)   # (item_id, reason)
    changed: List[Tuple[str, str]] = field(default_factory=list)      # (item_id, source path)
    folder: Optional[Path] = None

    @property
    def problems(self) -> int:
        return len(self.missing) + len(self.unreadable) + len(self.changed)

    def summary(self) -> str:
        s = (f"{self.images} images: {self.written} written, {self.rewritten} rewritten, {self.kept} already "
             f"materialised -> {self.folder}")
        for name, rows in (("source missing", self.missing), ("unreadable", self.unreadable),
                           ("changed since sampling", self.changed)):
            if rows:
                s += f"; {len(rows)} {name} (first: item {rows[0][0]}: {rows[0][1]})"
        return s


def encode_image(path: Path, max_side: int = MAX_IMAGE_SIDE) -> Tuple[bytes, int, int]:
    """JPEG bytes (upright, RGB, at most ``max_side`` pixels a side) and their width and height."""
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        im.load()
        im = ImageOps.exif_transpose(im).convert("RGB")
        im.thumbnail((max_side, max_side))
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=JPEG_QUALITY)
        return buf.getvalue(), im.width, im.height


def asset_intact(folder: Path, row: Mapping[str, object]) -> bool:
    """Whether a recorded asset's file exists with its recorded SHA-256."""
    f = folder / str(row["file"])
    return f.is_file() and sha256_of(f) == row["sha256"]


def _sources(study: Study) -> Dict[str, Tuple[str, Optional[str]]]:
    """image_key -> (first item id, first source path) over the study's items (sample order)."""
    out: Dict[str, Tuple[str, Optional[str]]] = {}
    for it in study.items():
        key = it["image_key"]
        if key not in out or (out[key][1] is None and it["image_path"]):
            out[key] = (it["item_id"], it["image_path"])
    return out


def materialize(study: Study, max_side: int = MAX_IMAGE_SIDE) -> MaterializeReport:
    """Materialise the study's images into its folder (module docstring)."""
    if max_side < 1:
        raise InputError("must be >= 1", field="max_side")
    if study.rehearsal_of is not None:
        raise InputError("a rehearsal copy shows the study's own images; materialise the study instead",
                         path=study.path)
    sources = _sources(study)
    if not sources:
        raise EmptyInputError("the study has no items yet: run `capaudit human sample` first", path=study.path)
    if study.launch_seal() is not None:
        raise InputError(f"study {study.study_id!r} is sealed for launch: its images are frozen", path=study.path)
    assets = study.assets()
    folder = study.folder
    todo = {k: v for k, v in sources.items() if not (k in assets and asset_intact(folder, assets[k]))}
    if todo and not any(p and Path(p).is_file() for _, p in todo.values()):
        first_item, first_path = next(iter(todo.values()))
        raise InputError(f"none of the {len(todo)} images still to materialise is found (first: item {first_item})",
                         path=first_path or "<no image path>")
    rep = MaterializeReport(images=len(sources), kept=len(sources) - len(todo), folder=folder)
    for key, (item_id, src) in todo.items():
        if not src or not Path(src).is_file():
            rep.missing.append((item_id, src or "<no image path>"))
            continue
        raw_sha = sha256_of(src)
        if key.startswith("sha256:") and key[len("sha256:"):] != raw_sha:
            rep.changed.append((item_id, src))
            continue
        try:
            data, w, h = encode_image(Path(src), max_side)
        except Exception as exc:  # not an image, truncated, unsupported: reported, the others go on
            rep.unreadable.append((item_id, f"{src}: {type(exc).__name__}: {exc}"))
            continue
        sha = hashlib.sha256(data).hexdigest()
        rel = f"{IMAGES_DIR}/{sha}.jpg"
        target = folder / rel
        if not (target.is_file() and sha256_of(target) == sha):
            write_bytes_atomic(target, data)
        row = (key, rel, sha, str(src), raw_sha, w, h, len(data), utcnow())
        study.store.write(lambda c, row=row: c.execute(
            "INSERT OR REPLACE INTO assets (image_key, file, sha256, source_path, source_sha256, width, height, bytes, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row))
        if key in assets:
            rep.rewritten += 1
        else:
            rep.written += 1
    return rep


__all__ = ["IMAGES_DIR", "JPEG_QUALITY", "MaterializeReport", "asset_intact", "encode_image", "materialize"]
