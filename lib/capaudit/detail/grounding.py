"""Grounding backends for the image coverage rate (issue 13, ICR, Eq. 2).

Which masks a backend has decides which ICR it measures (``icr_kind``, named in every output by
:data:`ICR_KINDS`): COCO instance masks cover only the 80 thing classes (**things-only ICR**; the
union of all masks averages about a third of a COCO-MINI image, so it is not on the scale of the
method's ICR, which grounds things and stuff with a segmentation model); COCO panoptic masks cover
things and stuff (**things+stuff ICR**, :mod:`capaudit.detail.panoptic`); the segmentation-model
slot measures whatever its model segments.

A backend maps an image reference (the value of the image field: a path or a file name) to a
:class:`GroundedImage`, or to ``None`` when it has **no grounding source** for that image (ICR is
then *unavailable*, never 0). A grounded image answers, for a set of caption object names, the
area of the union of their masks (each pixel counted once) and whether one name grounds at all.

* :class:`CocoGrounding` — ``coco-instance-masks``: COCO instance annotations (polygons,
  uncompressed RLE of crowd regions, compressed RLE) rasterised with ``pycocotools``. A caption
  object maps to a COCO category through the reviewed noun → category lexicon
  (:func:`capaudit.lexicons.coco_lexicon`, ``category_of``); a mentioned object that maps to a
  category grounds **every** instance mask of that category in the image, crowd regions
  included. Images are matched by file name (the base name of the image field; an integer image
  field also matches the COCO image id). An image listed in the annotation file with no
  instances is grounded (its masks are empty: ICR 0). An instance whose segmentation holds no
  polygon of at least three points falls back to its box.
* :class:`~capaudit.detail.panoptic.PanopticGrounding` — ``coco-panoptic``: COCO panoptic
  annotations (JSON + PNG folder), things and stuff.
* :class:`SegmentationGrounding` — the slot for a grounding/segmentation model (the method's
  setting), supplied by the user as ``seg:package.module:function``; no model ships here. The
  function is called as ``segment(image_path: str, phrases: list[str])`` with the caption's object
  names and must return ``{phrase: mask}`` where ``mask`` is an ``HxW`` boolean (or 0/1) array at
  the image's resolution (all masks of one image the same size), or ``None`` / a missing key when
  the phrase grounds nothing. The phrase itself is the category (no lexicon): the model decides
  what "sky" or "wall" covers. Overlapping masks count once. An image file that does not exist
  has no grounding source.
* :class:`ChainGrounding` — the first backend that has a source for the image.

:func:`parse_grounding_specs` reads the CLI form (``coco:INSTANCES.json`` repeatable,
``coco_mini``, ``coco-panoptic:PANOPTIC.json[:PNGDIR]``, ``seg:package.module:function``);
``coco-stuff:`` is refused (not supported: convert COCO-Stuff to panoptic with panopticapi).
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Protocol, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import InputError

COCO_GROUNDING_NAME = "coco-instance-masks"
SEGMENTATION_GROUNDING_NAME = "segmentation-model"
#: ``icr_kind`` → the ICR's printed name (table headers, notes, summaries, the paper)
ICR_KINDS = {
    "things-only": "things-only ICR",
    "things+stuff": "things+stuff ICR",
    "segmentation-model": "segmentation-model ICR",
}
#: ``icr_kind`` → what it grounds (table notes)
ICR_KIND_NOTES = {
    "things-only": "COCO instance masks: the 80 thing classes only; stuff such as sky, grass or walls is never "
                   "covered, so it is not on the scale of the method's things-and-stuff ICR",
    "things+stuff": "COCO panoptic masks: the 80 thing and 53 stuff classes",
    "segmentation-model": "masks of each mentioned phrase from a user-supplied segmentation model",
}


def icr_name(kinds: Iterable[Optional[str]]) -> str:
    """The printed ICR name of the kinds behind a set of scores (``mixed ICR (...)`` for several)."""
    ks = sorted({k for k in kinds if k})
    if not ks:
        return "ICR (unavailable: no grounding)"
    if len(ks) == 1:
        return ICR_KINDS.get(ks[0], f"{ks[0]} ICR")
    return "mixed ICR (" + ", ".join(ICR_KINDS.get(k, k) for k in ks) + ")"


class GroundedImage(Protocol):
    """What ICR and the annotation-precision scorer need from one image."""

    width: int
    height: int
    icr_kind: str

    def union_area(self, names: Iterable[str]) -> int:
        """Pixels in the union of the masks grounded by ``names`` (each pixel once)."""

    def grounds(self, name: str) -> bool:
        """Whether ``name`` grounds at least one non-empty mask."""

    def category_of(self, name: str) -> Optional[str]:
        """The grounding vocabulary entry of ``name`` (``None`` if outside it)."""


class GroundingBackend(Protocol):
    """``name`` travels into outputs; ``ground(image)`` is ``None`` when there is no source."""

    name: str
    label: str
    icr_kind: str

    def ground(self, image: Any) -> Optional[GroundedImage]:
        ...


# -- COCO -----------------------------------------------------------------------------------------
def _mask_api() -> Any:
    from pycocotools import mask as mask_api

    return mask_api


def instance_rle(ann: Mapping[str, Any], height: int, width: int) -> Dict[str, Any]:
    """One COCO instance as a compressed RLE (polygons merged; crowd RLE converted; box fallback)."""
    m = _mask_api()
    seg = ann.get("segmentation")
    if isinstance(seg, list):
        polys = [p for p in seg if isinstance(p, (list, tuple)) and len(p) >= 6]
        if polys:
            rles = m.frPyObjects(polys, height, width)
            return m.merge(rles) if len(rles) > 1 else rles[0]
    elif isinstance(seg, Mapping) and "counts" in seg:
        if isinstance(seg["counts"], list):  # uncompressed RLE (crowd regions)
            return m.frPyObjects(dict(seg), height, width)
        counts = seg["counts"]
        return {"size": list(seg.get("size", [height, width])),
                "counts": counts.encode("ascii") if isinstance(counts, str) else counts}
    bbox = ann.get("bbox")
    if isinstance(bbox, (list, tuple)) and len(bbox) == 4:
        return m.frPyObjects(np.asarray([bbox], dtype=np.float64), height, width)[0]
    return m.encode(np.zeros((height, width), dtype=np.uint8, order="F"))


class CocoGroundedImage:
    """Per-category merged RLEs of one COCO image (see module docstring)."""

    icr_kind = "things-only"

    def __init__(self, image: Any, category_names: Mapping[int, str], lexicon: Any):
        self.image_id = image.id
        self.file_name = image.file_name
        self.width = int(image.width)
        self.height = int(image.height)
        self.lexicon = lexicon
        m = _mask_api()
        per_cat: Dict[str, List[Dict[str, Any]]] = {}
        self.instances: Dict[str, int] = {}
        self.crowd: Dict[str, int] = {}
        for a in image.instances:
            cat = category_names.get(int(a["category_id"]))
            if cat is None:
                continue
            per_cat.setdefault(cat, []).append(instance_rle(a, self.height, self.width))
            self.instances[cat] = self.instances.get(cat, 0) + 1
            if a.get("iscrowd"):
                self.crowd[cat] = self.crowd.get(cat, 0) + 1
        self._rle = {c: (m.merge(r) if len(r) > 1 else r[0]) for c, r in per_cat.items()}
        self._area = {c: int(m.area(r)) for c, r in self._rle.items()}
        self._union_cache: "OrderedDict[FrozenSet[str], int]" = OrderedDict()

    @property
    def categories(self) -> List[str]:
        """Categories with at least one instance (crowd regions included)."""
        return sorted(self._rle)

    def category_of(self, name: str) -> Optional[str]:
        return self.lexicon.category_of(name)

    def grounds(self, name: str) -> bool:
        cat = self.category_of(name)
        return cat is not None and self._area.get(cat, 0) > 0

    def category_area(self, category: str) -> int:
        return self._area.get(category, 0)

    def union_area(self, names: Iterable[str]) -> int:
        cats = frozenset(c for c in (self.category_of(n) for n in names) if c in self._rle)
        return self.union_area_of_categories(cats)

    def union_area_of_categories(self, cats: FrozenSet[str]) -> int:
        if not cats:
            return 0
        if len(cats) == 1:
            return self._area[next(iter(cats))]
        hit = self._union_cache.get(cats)
        if hit is None:
            m = _mask_api()
            hit = int(m.area(m.merge([self._rle[c] for c in sorted(cats)])))
            self._union_cache[cats] = hit
            if len(self._union_cache) > 256:
                self._union_cache.popitem(last=False)
        return hit

    def category_mask(self, category: str) -> np.ndarray:
        """Dense HxW bool mask of one category (tests, figures)."""
        if category not in self._rle:
            return np.zeros((self.height, self.width), dtype=bool)
        import warnings

        with warnings.catch_warnings():  # pycocotools' decode warns under numpy 2 (harmless)
            warnings.simplefilter("ignore", DeprecationWarning)
            return _mask_api().decode(self._rle[category]).astype(bool)


class CocoGrounding:
    """COCO instance masks matched to caption objects through the lexicon (module docstring).

    ``index``: a :class:`~capaudit.data.coco.CocoIndex`; ``lexicon``: a noun → category lexicon
    (default :func:`capaudit.lexicons.coco_lexicon`); ``cache_images``: grounded images kept."""

    name = COCO_GROUNDING_NAME
    icr_kind = "things-only"

    def __init__(self, index: Any, lexicon: Any = None, sources: Optional[Sequence[str]] = None,
                 cache_images: int = 4096):
        if lexicon is None:
            from capaudit.lexicons import coco_lexicon

            lexicon = coco_lexicon()
        self.index = index
        self.lexicon = lexicon
        self.sources = [str(s) for s in (sources if sources is not None else getattr(index, "sources", []))]
        self._names = index.category_names
        self._cache: "OrderedDict[int, CocoGroundedImage]" = OrderedDict()
        self.cache_images = int(cache_images)
        files = ", ".join(Path(s).name for s in self.sources) or "in-memory index"
        self.label = (f"{COCO_GROUNDING_NAME} ({files}; pycocotools; lexicon "
                      f"{getattr(lexicon, 'name', '?')} v{getattr(lexicon, 'version', '?')})")

    @classmethod
    def from_files(cls, instances: Sequence[Union[str, Path]], lexicon: Any = None) -> "CocoGrounding":
        from capaudit.data.coco import CocoIndex

        return cls(CocoIndex.from_files(list(instances)), lexicon, [str(p) for p in instances])

    @classmethod
    def coco_mini(cls, lexicon: Any = None) -> "CocoGrounding":
        """COCO-MINI (159 images) from the data registry."""
        from capaudit.data.coco import coco_mini

        return cls(coco_mini(), lexicon, ["coco_mini/instances_train2017.json", "coco_mini/instances_val2017.json"])

    def find(self, image: Any) -> Any:
        """The :class:`~capaudit.data.coco.CocoImage` for an image reference, or ``None``."""
        if image is None:
            return None
        if isinstance(image, int) and not isinstance(image, bool):
            return self.index.images.get(image)
        s = str(image).strip()
        if not s:
            return None
        return self.index.by_file_name(s.replace("\\", "/").rsplit("/", 1)[-1])

    def ground(self, image: Any) -> Optional[CocoGroundedImage]:
        img = self.find(image)
        if img is None:
            return None
        hit = self._cache.get(img.id)
        if hit is None:
            hit = CocoGroundedImage(img, self._names, self.lexicon)
            self._cache[img.id] = hit
            if len(self._cache) > self.cache_images:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(img.id)
        return hit


# -- segmentation-model slot ------------------------------------------------------------------------
SegmentFn = Callable[[str, Sequence[str]], Mapping[str, Optional[np.ndarray]]]


class SegmentedImage:
    """Masks of caption phrases from a segmentation model, asked lazily and cached per phrase."""

    icr_kind = "segmentation-model"

    def __init__(self, path: Path, segment: SegmentFn):
        self.path = path
        self._segment = segment
        self._masks: Dict[str, Optional[np.ndarray]] = {}
        self._size: Optional[tuple] = None

    def _ask(self, names: Sequence[str]) -> None:
        todo = [n for n in dict.fromkeys(names) if n not in self._masks]
        if not todo:
            return
        got = self._segment(str(self.path), todo)
        for n in todo:
            m = got.get(n) if got else None
            if m is not None:
                m = np.asarray(m).astype(bool)
                if m.ndim != 2:
                    raise ValueError(f"segmentation model returned a mask of shape {m.shape} for {n!r}; expected HxW")
                if self._size is None:
                    self._size = (m.shape[1], m.shape[0])
                elif (m.shape[1], m.shape[0]) != self._size:
                    raise ValueError(f"segmentation model returned masks of different sizes for {self.path}")
            self._masks[n] = m

    def _dims(self) -> tuple:
        if self._size is None:
            from PIL import Image

            with Image.open(self.path) as im:
                self._size = im.size
        return self._size

    @property
    def width(self) -> int:
        return int(self._dims()[0])

    @property
    def height(self) -> int:
        return int(self._dims()[1])

    def category_of(self, name: str) -> Optional[str]:
        return name

    def grounds(self, name: str) -> bool:
        self._ask([name])
        m = self._masks.get(name)
        return m is not None and bool(m.any())

    def union_area(self, names: Iterable[str]) -> int:
        names = list(names)
        self._ask(names)
        masks = [self._masks[n] for n in dict.fromkeys(names) if self._masks.get(n) is not None]
        if not masks:
            return 0
        acc = np.zeros_like(masks[0], dtype=bool)
        for m in masks:
            acc |= m
        return int(acc.sum())


class SegmentationGrounding:
    """The segmentation-model slot (module docstring). ``image_root`` resolves relative paths."""

    icr_kind = "segmentation-model"

    def __init__(self, segment: SegmentFn, name: str = SEGMENTATION_GROUNDING_NAME,
                 image_root: Optional[Union[str, Path]] = None):
        if not callable(segment):
            raise ValueError("SegmentationGrounding: segment must be callable(image_path, phrases) -> {phrase: mask}")
        self.segment = segment
        self.name = name
        self.label = f"{name} (user-supplied segmentation model)"
        self.image_root = Path(image_root) if image_root else None

    def ground(self, image: Any) -> Optional[SegmentedImage]:
        if image is None or not str(image).strip():
            return None
        p = Path(str(image))
        if not p.is_absolute() and self.image_root is not None:
            p = self.image_root / p
        return SegmentedImage(p, self.segment) if p.is_file() else None


class ChainGrounding:
    """The first backend with a source for the image."""

    def __init__(self, backends: Sequence[GroundingBackend]):
        if not backends:
            raise ValueError("ChainGrounding: no backends")
        self.backends = list(backends)
        self.name = "+".join(b.name for b in self.backends)
        self.label = " + ".join(b.label for b in self.backends)
        kinds = {b.icr_kind for b in self.backends}
        self.icr_kind = kinds.pop() if len(kinds) == 1 else "mixed"

    def ground(self, image: Any) -> Optional[GroundedImage]:
        for b in self.backends:
            g = b.ground(image)
            if g is not None:
                return g
        return None


def load_segmenter(target: str) -> SegmentFn:
    """``package.module:function`` → the function (the segmentation-model slot)."""
    mod, colon, attr = target.partition(":")
    if not colon or not mod or not attr:
        raise InputError(f"expected seg:package.module:function, got seg:{target}", field="--grounding")
    try:
        fn = getattr(importlib.import_module(mod), attr)
    except (ImportError, AttributeError) as exc:
        raise InputError(f"cannot load segmenter {target!r} ({exc})", field="--grounding") from None
    return fn


def grounding_spec(spec: str) -> Tuple[str, str]:
    """``(kind, arg)`` of one ``--grounding`` spec, checked without loading anything: ``coco:PATH``
    (the file exists), ``coco_mini``, ``coco-panoptic:JSON[:PNGDIR]`` (both exist),
    ``seg:package.module:function`` or ``none``; ``coco-stuff:`` is refused."""
    kind, _, arg = str(spec).partition(":")
    if kind == "coco-panoptic":
        from .panoptic import check_spec

        check_spec(arg)
    elif kind == "coco-stuff":
        raise InputError("coco-stuff grounding is not supported; convert COCO-Stuff to COCO panoptic (panopticapi) "
                         "and use coco-panoptic:PANOPTIC.json[:PNGDIR]", field="--grounding")
    elif kind == "coco":
        if not arg:
            raise InputError("coco grounding needs a path: coco:INSTANCES.json", field="--grounding")
        if not Path(arg).is_file():
            raise InputError("COCO instances file not found", path=arg, field="--grounding")
    elif not (kind == "seg" or (kind in ("coco_mini", "none") and not arg)):
        raise InputError(f"unknown grounding {spec!r}; expected coco:PATH, coco_mini, coco-panoptic:PATH, "
                         "seg:module:function or none", field="--grounding")
    return kind, arg


def parse_grounding_specs(specs: Sequence[str], lexicon: Any = None) -> Optional[GroundingBackend]:
    """Backends from CLI specs: ``coco:PATH`` (all such files are merged into one index),
    ``coco_mini`` (the registry's COCO-MINI), ``coco-panoptic:JSON[:PNGDIR]``,
    ``seg:package.module:function``; ``none`` or no spec → ``None`` (every ICR unavailable). Several
    backends are chained: the first with a source for an image grounds it."""
    coco_files: List[str] = []
    backends: List[GroundingBackend] = []
    for spec in specs:
        kind, arg = grounding_spec(spec)
        if kind == "coco":
            coco_files.append(arg)
        elif kind == "coco_mini":
            backends.append(CocoGrounding.coco_mini(lexicon))
        elif kind == "coco-panoptic":
            from .panoptic import PanopticGrounding, split_spec

            backends.append(PanopticGrounding(*split_spec(arg)))
        elif kind == "seg":
            backends.append(SegmentationGrounding(load_segmenter(arg)))
    if coco_files:
        backends.insert(0, CocoGrounding.from_files(coco_files, lexicon))
    if not backends:
        return None
    return backends[0] if len(backends) == 1 else ChainGrounding(backends)


__all__ = [
    "COCO_GROUNDING_NAME", "SEGMENTATION_GROUNDING_NAME", "ICR_KINDS", "ICR_KIND_NOTES", "icr_name", "GroundedImage", "GroundingBackend", "instance_rle",
    "CocoGroundedImage", "CocoGrounding", "SegmentedImage", "SegmentationGrounding", "ChainGrounding",
    "grounding_spec", "load_segmenter", "parse_grounding_specs",
]
