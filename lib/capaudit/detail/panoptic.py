"""COCO panoptic grounding: things+stuff ICR (``--grounding coco-panoptic:PATH``).

COCO instance masks cover only the 80 thing classes (``coco-instance-masks``: *things-only ICR*);
the method grounds stuff too (sky, grass, wall). Where a user has COCO panoptic annotations
(panopticapi format), :class:`PanopticGrounding` grounds both:

* ``PATH`` = the panoptic JSON; its PNG folder is the folder beside it with the JSON's name minus
  ``.json`` (COCO's layout: ``panoptic_val2017.json`` ↔ ``panoptic_val2017/``), or explicit:
  ``coco-panoptic:JSON:PNGDIR``.
* JSON: ``images[]`` (``id``, ``file_name``, ``width``, ``height``), ``annotations[]`` (``image_id``,
  ``file_name`` of the PNG, ``segments_info[]`` with ``id``, ``category_id``, ``iscrowd``, …) and
  ``categories[]`` (``id``, ``name``, ``isthing``). A PNG pixel's segment id is
  ``R + 256·G + 256²·B``; 0 is void (unlabelled, never covered).
* A mentioned object maps through :func:`panoptic_lexicon` (the COCO-80 thing lexicon plus the
  reviewed stuff lexicon ``lexicons/coco_panoptic_stuff.yaml``) to a set of panoptic class names;
  it grounds every segment of those classes (crowd segments included, as for instance masks).
* Loading checks the whole file and fails with one line naming it: unreadable JSON, a segment whose
  ``category_id`` is not in ``categories``, an annotation for an image not in ``images``, a PNG that
  does not exist. Decoding an image's PNG checks its size against ``images[]`` and that every
  segment id in it is listed. An image listed in ``images[]`` without an annotation, or not listed,
  has **no grounding source** (ICR unavailable, counted in the manifest's ``icr_unavailable``;
  :attr:`PanopticGrounding.unannotated` counts the listed ones), never ICR 0.

COCO-Stuff's own annotation files are not read (``coco-stuff:`` is refused with a message):
panopticapi converts them to this format.
"""

from __future__ import annotations

import functools
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from capaudit.errors import InputError
from capaudit.lexicons import LEXICON_DIR, NounLexicon, coco_lexicon, load_noun_lexicon

PANOPTIC_GROUNDING_NAME = "coco-panoptic"
STUFF_LEXICON = LEXICON_DIR / "coco_panoptic_stuff.yaml"


# -- lexicon ---------------------------------------------------------------------------------------
def merge_stuff_lexicon(things: NounLexicon, stuff: NounLexicon, where: Union[str, Path] = "stuff lexicon"
                        ) -> NounLexicon:
    """One lexicon of thing and stuff entries; a stuff term or name that the thing lexicon already
    has is an error naming ``where`` (things keep their terms)."""
    for name in stuff.categories:
        if name in things.categories:
            raise InputError(f"stuff entry {name!r} is also a thing category", path=where, field="name")
    for term in stuff.term_to_category:
        if term in things.term_to_category:
            raise InputError(f"stuff term {term!r} is already a term of thing category "
                             f"{things.term_to_category[term]!r}", path=where, field="terms")
    for name, entry in stuff.categories.items():
        classes = entry.get("panoptic")
        if not isinstance(classes, list) or not classes or not all(isinstance(c, str) for c in classes):
            raise InputError(f"stuff entry {name!r} needs a non-empty 'panoptic' list of class names", path=where,
                             field="panoptic")
    return NounLexicon(f"{things.name}+{stuff.name}", stuff.version,
                       {**things.term_to_category, **stuff.term_to_category},
                       {**things.categories, **stuff.categories}, max(things.max_words, stuff.max_words))


@functools.lru_cache(maxsize=None)
def panoptic_lexicon() -> NounLexicon:
    """The reviewed noun → panoptic lexicon: COCO-80 things (``coco_categories.yaml``) + stuff."""
    return merge_stuff_lexicon(coco_lexicon(), load_noun_lexicon(STUFF_LEXICON), STUFF_LEXICON)


def panoptic_classes(lexicon: NounLexicon, category: str) -> Tuple[str, ...]:
    """The panoptic class names a lexicon category grounds (a thing category: itself)."""
    entry = lexicon.categories.get(category) or {}
    classes = entry.get("panoptic")
    return tuple(classes) if isinstance(classes, list) else (category,)


# -- annotations -----------------------------------------------------------------------------------
def split_spec(arg: str) -> Tuple[Path, Path]:
    """``JSON`` or ``JSON:PNGDIR`` → ``(json, png folder)`` (module docstring)."""
    js, colon, png = str(arg).partition(":")
    json_path = Path(js)
    if colon:
        return json_path, Path(png)
    name = json_path.name[:-len(".json")] if json_path.name.endswith(".json") else json_path.stem
    return json_path, json_path.with_name(name)


def check_spec(arg: str) -> Tuple[Path, Path]:
    """Check a ``coco-panoptic:`` argument without reading the JSON: both paths exist."""
    if not arg:
        raise InputError("coco-panoptic grounding needs a path: coco-panoptic:PANOPTIC.json[:PNGDIR]",
                         field="--grounding")
    json_path, png_dir = split_spec(arg)
    if not json_path.is_file():
        raise InputError("COCO panoptic JSON not found", path=json_path, field="--grounding")
    if not png_dir.is_dir():
        raise InputError("COCO panoptic PNG folder not found (expected beside the JSON, named like it without "
                         ".json, or given as coco-panoptic:JSON:PNGDIR)", path=png_dir, field="--grounding")
    return json_path, png_dir


def _int(value: Any, path: Path, what: str, fld: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
        raise InputError(f"{what}: {fld} must be an integer, got {value!r}", path=path, field=fld)
    return int(value)


class PanopticGroundedImage:
    """Segment-id map of one image and the class of each segment (lazy PNG decode)."""

    icr_kind = "things+stuff"

    def __init__(self, image: Mapping[str, Any], png: Path, segments: Mapping[int, str], lexicon: NounLexicon):
        self.image_id = image["id"]
        self.file_name = str(image.get("file_name", ""))
        self.width = int(image["width"])
        self.height = int(image["height"])
        self.png = png
        self.lexicon = lexicon
        self.segments = dict(segments)  # segment id -> panoptic class name
        self._classes: Optional[np.ndarray] = None  # HxW int16 index into self._names, -1 void
        self._names: List[str] = sorted(set(self.segments.values()))
        self._union_cache: "OrderedDict[FrozenSet[str], int]" = OrderedDict()

    def _class_map(self) -> np.ndarray:
        if self._classes is None:
            from PIL import Image

            try:
                with Image.open(self.png) as im:
                    rgb = np.asarray(im.convert("RGB"), dtype=np.uint32)
            except OSError as exc:
                raise InputError(f"cannot read panoptic PNG ({exc})", path=self.png) from None
            if rgb.shape[:2] != (self.height, self.width):
                raise InputError(f"panoptic PNG is {rgb.shape[1]}x{rgb.shape[0]}, the JSON says "
                                 f"{self.width}x{self.height}", path=self.png)
            ids = rgb[..., 0] + 256 * rgb[..., 1] + 65536 * rgb[..., 2]
            index = {n: i for i, n in enumerate(self._names)}
            out = np.full(ids.shape, -1, dtype=np.int16)
            for sid in np.unique(ids):
                if sid == 0:
                    continue
                if int(sid) not in self.segments:
                    raise InputError(f"segment id {int(sid)} is in the PNG but not in segments_info of image "
                                     f"{self.image_id}", path=self.png, field="segments_info")
                out[ids == sid] = index[self.segments[int(sid)]]
            self._classes = out
        return self._classes

    @property
    def categories(self) -> List[str]:
        """Panoptic classes with at least one segment listed for this image."""
        return list(self._names)

    def category_of(self, name: str) -> Optional[str]:
        return self.lexicon.category_of(name)

    def classes_of(self, names: Iterable[str]) -> FrozenSet[str]:
        """Panoptic classes grounded by caption object ``names``."""
        out = set()
        for n in names:
            cat = self.category_of(n)
            if cat is not None:
                out.update(panoptic_classes(self.lexicon, cat))
        return frozenset(c for c in out if c in self._names)

    def grounds(self, name: str) -> bool:
        return self.union_area([name]) > 0

    def union_area(self, names: Iterable[str]) -> int:
        cats = self.classes_of(names)
        if not cats:
            return 0
        hit = self._union_cache.get(cats)
        if hit is None:
            idx = [self._names.index(c) for c in sorted(cats)]
            hit = int(np.isin(self._class_map(), idx).sum())
            self._union_cache[cats] = hit
            if len(self._union_cache) > 256:
                self._union_cache.popitem(last=False)
        return hit

    def class_mask(self, panoptic_class: str) -> np.ndarray:
        """Dense HxW bool mask of one panoptic class (tests, figures)."""
        if panoptic_class not in self._names:
            return np.zeros((self.height, self.width), dtype=bool)
        return self._class_map() == self._names.index(panoptic_class)


class PanopticGrounding:
    """COCO panoptic masks matched to caption objects through :func:`panoptic_lexicon` (module
    docstring). ``cache_images``: decoded images kept."""

    name = PANOPTIC_GROUNDING_NAME
    icr_kind = "things+stuff"

    def __init__(self, json_path: Union[str, Path], png_dir: Optional[Union[str, Path]] = None,
                 lexicon: Optional[NounLexicon] = None, cache_images: int = 256):
        self.json_path = Path(json_path)
        self.png_dir = Path(png_dir) if png_dir is not None else split_spec(str(json_path))[1]
        self.lexicon = lexicon if lexicon is not None else panoptic_lexicon()
        self.cache_images = int(cache_images)
        self._cache: "OrderedDict[Any, PanopticGroundedImage]" = OrderedDict()
        self._load()
        self.label = (f"{PANOPTIC_GROUNDING_NAME} ({self.json_path.name} + {self.png_dir.name}/; "
                      f"{len(self.categories)} classes, {sum(self.isthing.values())} things; "
                      f"{len(self.annotations)} of {len(self.images)} images annotated; lexicon {self.lexicon.name} "
                      f"v{self.lexicon.version})")

    def _load(self) -> None:
        p = self.json_path
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read COCO panoptic JSON ({exc})", path=p) from None
        if not isinstance(data, dict):
            raise InputError("COCO panoptic JSON must be an object", path=p)
        for key in ("images", "annotations", "categories"):
            if not isinstance(data.get(key), list):
                raise InputError(f"COCO panoptic JSON needs a '{key}' list", path=p, field=key)
        self.categories: Dict[int, str] = {}
        self.isthing: Dict[str, bool] = {}
        for i, c in enumerate(data["categories"]):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str):
                raise InputError(f"categories[{i}] needs 'id' and 'name'", path=p, field="categories")
            self.categories[_int(c.get("id"), p, f"categories[{i}]", "id")] = c["name"]
            self.isthing[c["name"]] = bool(c.get("isthing", 0))
        self.images: Dict[int, Dict[str, Any]] = {}
        self._by_name: Dict[str, int] = {}
        for i, im in enumerate(data["images"]):
            if not isinstance(im, dict):
                raise InputError(f"images[{i}] must be an object", path=p, field="images")
            iid = _int(im.get("id"), p, f"images[{i}]", "id")
            for k in ("width", "height"):
                if _int(im.get(k), p, f"image {iid}", k) <= 0:
                    raise InputError(f"image {iid}: {k} must be positive", path=p, field=k)
            self.images[iid] = im
            self._by_name[str(im.get("file_name", "")).rsplit("/", 1)[-1]] = iid
        self.annotations: Dict[int, Tuple[Path, Dict[int, str]]] = {}
        for i, a in enumerate(data["annotations"]):
            if not isinstance(a, dict) or not isinstance(a.get("file_name"), str):
                raise InputError(f"annotations[{i}] needs 'image_id' and 'file_name'", path=p, field="annotations")
            iid = _int(a.get("image_id"), p, f"annotations[{i}]", "image_id")
            if iid not in self.images:
                raise InputError(f"annotations[{i}]: image_id {iid} is not in images", path=p, field="image_id")
            segs: Dict[int, str] = {}
            for s in a.get("segments_info") or []:
                sid = _int(s.get("id") if isinstance(s, dict) else None, p, f"image {iid} segment", "id")
                cid = _int(s.get("category_id"), p, f"image {iid} segment {sid}", "category_id")
                if cid not in self.categories:
                    raise InputError(f"image {iid} segment {sid}: category_id {cid} is not in categories", path=p,
                                     field="category_id")
                segs[sid] = self.categories[cid]
            png = self.png_dir / a["file_name"]
            if not png.is_file():
                raise InputError(f"panoptic PNG of image {iid} not found", path=png, field="file_name")
            self.annotations[iid] = (png, segs)
        self.unannotated = len(set(self.images) - set(self.annotations))

    def find(self, image: Any) -> Optional[int]:
        """The image id of an image reference (file name, path or integer id), or ``None``."""
        if image is None:
            return None
        if isinstance(image, int) and not isinstance(image, bool):
            return image if image in self.images else None
        s = str(image).strip().replace("\\", "/").rsplit("/", 1)[-1]
        return self._by_name.get(s) if s else None

    def ground(self, image: Any) -> Optional[PanopticGroundedImage]:
        iid = self.find(image)
        if iid is None or iid not in self.annotations:
            return None
        hit = self._cache.get(iid)
        if hit is None:
            png, segs = self.annotations[iid]
            hit = PanopticGroundedImage(self.images[iid], png, segs, self.lexicon)
            self._cache[iid] = hit
            if len(self._cache) > self.cache_images:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(iid)
        return hit


__all__ = ["PANOPTIC_GROUNDING_NAME", "STUFF_LEXICON", "merge_stuff_lexicon", "panoptic_lexicon", "panoptic_classes",
           "split_spec", "check_spec", "PanopticGroundedImage", "PanopticGrounding"]
