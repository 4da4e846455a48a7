"""COCO-style annotations as one index: images, instances, captions, categories.

Shared by every stage that grounds text in real annotations (offline judges, offline captioner,
detailness ICR, the alt-text image–text overlap block). :func:`coco_mini` loads the registry's
COCO-MINI (159 images, train2017 + val2017); :meth:`CocoIndex.from_files` any instances/captions
JSON in the COCO format. Images are found by id, file name, or sha256 of their bytes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from capaudit.errors import InputError

PathLike = Union[str, Path]
COCO_MINI_SPLITS = ("train2017", "val2017")


@dataclass
class CocoImage:
    id: int
    file_name: str
    width: int
    height: int
    path: Optional[Path] = None
    instances: List[Dict[str, Any]] = field(default_factory=list)
    captions: List[Dict[str, Any]] = field(default_factory=list)

    def category_counts(self, names: Mapping[int, str], include_crowd: bool = False) -> Dict[str, int]:
        """Instances per category name (crowd regions excluded unless asked)."""
        out: Dict[str, int] = defaultdict(int)
        for a in self.instances:
            if a.get("iscrowd") and not include_crowd:
                continue
            out[names[a["category_id"]]] += 1
        return dict(out)


class CocoIndex:
    """Images with their instances and captions, looked up by id, file name or content hash."""

    def __init__(self) -> None:
        self.images: Dict[int, CocoImage] = {}
        self.categories: Dict[int, Dict[str, Any]] = {}
        self._by_name: Dict[str, int] = {}
        self._by_sha: Optional[Dict[str, int]] = None
        self.sources: List[str] = []

    # -- loading ------------------------------------------------------------------------------
    @classmethod
    def from_files(cls, instances: Sequence[PathLike] = (), captions: Sequence[PathLike] = (),
                   image_dirs: Sequence[Optional[PathLike]] = ()) -> "CocoIndex":
        """Index COCO JSON files; ``image_dirs[i]`` (if given) holds the images of ``instances[i]``."""
        idx = cls()
        dirs = list(image_dirs) + [None] * (len(instances) - len(image_dirs))
        for path, d in zip(instances, dirs):
            idx._add(Path(path), kind="instances", image_dir=Path(d) if d else None)
        for path in captions:
            idx._add(Path(path), kind="captions", image_dir=None)
        return idx

    def _add(self, path: Path, kind: str, image_dir: Optional[Path]) -> None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("COCO annotation file not found", path=path) from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"not a COCO JSON file ({exc})", path=path) from None
        if not isinstance(data, dict) or not isinstance(data.get("images"), list):
            raise InputError("not a COCO JSON file (no 'images' list)", path=path, field="images")
        self.sources.append(str(path))
        for c in data.get("categories", []) or []:
            self.categories[int(c["id"])] = c
        for i, im in enumerate(data["images"]):
            try:
                iid = int(im["id"])
                img = self.images.get(iid)
                if img is None:
                    img = CocoImage(iid, str(im["file_name"]), int(im["width"]), int(im["height"]))
                    self.images[iid] = img
                    self._by_name[img.file_name] = iid
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"image entry {i} is malformed ({exc})", path=path, field="images") from None
            if image_dir is not None and img.path is None:
                img.path = image_dir / img.file_name
        for i, a in enumerate(data.get("annotations", []) or []):
            img = self.images.get(a.get("image_id"))
            if img is None:
                raise InputError(f"annotation {i} names unknown image_id {a.get('image_id')!r}",
                                 path=path, field="annotations")
            (img.instances if kind == "instances" else img.captions).append(a)
        self._by_sha = None

    # -- lookups ------------------------------------------------------------------------------
    @property
    def category_names(self) -> Dict[int, str]:
        return {cid: c["name"] for cid, c in self.categories.items()}

    def by_file_name(self, name: str) -> Optional[CocoImage]:
        iid = self._by_name.get(Path(name).name)
        return self.images.get(iid) if iid is not None else None

    def by_sha256(self, sha: str) -> Optional[CocoImage]:
        if self._by_sha is None:
            self._by_sha = {}
            for img in self.images.values():
                if img.path is not None and img.path.is_file():
                    self._by_sha[hashlib.sha256(img.path.read_bytes()).hexdigest()] = img.id
        iid = self._by_sha.get(sha)
        return self.images.get(iid) if iid is not None else None

    def lookup(self, *, image_bytes: Optional[bytes] = None, file_name: Optional[str] = None) -> Optional[CocoImage]:
        """An image by content (sha256 of its bytes) first, else by file name."""
        if image_bytes is not None:
            hit = self.by_sha256(hashlib.sha256(image_bytes).hexdigest())
            if hit is not None:
                return hit
        if file_name:
            return self.by_file_name(file_name)
        return None

    def __len__(self) -> int:
        return len(self.images)

    def __iter__(self) -> Iterable[CocoImage]:
        return iter(sorted(self.images.values(), key=lambda im: im.id))


@functools.lru_cache(maxsize=2)
def coco_mini(with_captions: bool = True) -> CocoIndex:
    """COCO-MINI from the data registry (verified by checksum): 159 images, instances, captions."""
    from capaudit.data.registry import fetch

    inst = [fetch("coco_mini", f"annotations/instances_{s}.json") for s in COCO_MINI_SPLITS]
    caps = [fetch("coco_mini", f"annotations/captions_{s}.json") for s in COCO_MINI_SPLITS] if with_captions else []
    dirs = [fetch("coco_mini", s) for s in COCO_MINI_SPLITS]
    return CocoIndex.from_files(inst, caps, dirs)


__all__ = ["CocoImage", "CocoIndex", "coco_mini"]
