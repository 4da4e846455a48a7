"""``capaudit-offline-coco-captioner``: an offline captioner composed from COCO annotations.

Not a vision model: it recognises the image of a request among the COCO-MINI images
(:func:`capaudit.data.coco.coco_mini`) and writes a caption from that image's **instance
annotations** only — categories, counts (crowd regions excluded from counts) and a coarse layout
from the boxes — so the demo has a recaptioned surface made by the real runner from real images.
Its name (with ``offline``) is the ``model`` of every response and export row.

Finding the image (first hit wins):

1. ``data:`` URL: sha256 of the decoded bytes (an original file sent as is), else a visual match:
   the 16×16 greyscale thumbnail (box filter) of the sent image against those of the COCO-MINI
   originals, accepted when the mean absolute difference is ≤ :data:`MATCH_MAX_DIFF` (of 255),
   the aspect ratios agree within 2 % and no other image is within :data:`MATCH_MARGIN` of the
   best (data mode re-encodes the JPEG, so its bytes never equal the file's);
2. ``file://`` URL: the file name (``coco_mini().by_file_name``).

An image that is not in COCO-MINI, or has no instance annotation, is an honest failure (HTTP
400 from ``capaudit serve``, recorded as a failed image), never an invented caption.

Composition, by the policy's ``offline.style`` (the request's policy is recognised from its
system text and instruction, :func:`capaudit.recap.policies.identify_policy`; unknown prompts
use ``detailed`` when there is a system message, else ``plain``):

* ``detailed`` (photorealistic, anime-booru; subject → layout → framing, §6 order): categories
  ranked by total box area; the largest is the subject ("Two TVs are spread across the middle of
  the frame, the largest covering about 5% of it."); the next five follow with counts and
  positions ("Around them are five chairs in the center, ..."); the rest are listed ("Smaller
  objects include ..."); crowd regions are mentioned without a count ("A dense crowd of people
  also appears at the bottom."); last the orientation of the frame.
* ``plain`` (the naive controls): one sentence listing every category with its count in COCO
  category order, no layout ("This image shows two TVs, five chairs, ...").

Positions: a box centre in the left/middle/right third and top/middle/bottom third gives
``on the left``, ``at the top right``, ``in the center``...; a category whose boxes reach both the
left and the right third is ``spread across`` the frame (``across the top/middle/bottom`` when all
share a row); otherwise the area-weighted mean centre decides.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import threading
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import unquote, urlsplit

from .cards import card

OFFLINE_NAME = "capaudit-offline-coco-captioner"
#: its model card (``cards.yaml``), which the server declares
CARD = card(OFFLINE_NAME)
OFFLINE_LABEL = CARD.label
OFFLINE_VERSION = CARD.version
MATCH_MAX_DIFF = 6.0
MATCH_MARGIN = 4.0
THUMB = 16

_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
                 11: "eleven", 12: "twelve"}
_FORMS: Dict[str, Tuple[str, str]] = {
    "person": ("person", "people"), "tv": ("TV", "TVs"), "skis": ("pair of skis", "pairs of skis"),
    "scissors": ("pair of scissors", "pairs of scissors"), "mouse": ("mouse", "mice"), "sheep": ("sheep", "sheep"),
    "knife": ("knife", "knives"), "skateboard": ("skateboard", "skateboards"),
}
_DETAILED_WITH_POSITION = 5


class UnknownImage(ValueError):
    """The request's image is not one the offline captioner can describe (a 400, not a caption)."""


# -- words ----------------------------------------------------------------------------------------
def noun_forms(category: str) -> Tuple[str, str]:
    """(singular, plural) of a COCO category name."""
    if category in _FORMS:
        return _FORMS[category]
    head, _, last = category.rpartition(" ")
    if last.endswith(("s", "x", "z", "ch", "sh")):
        plural = last + "es"
    elif last.endswith("y") and last[-2:-1] not in ("a", "e", "i", "o", "u"):
        plural = last[:-1] + "ies"
    else:
        plural = last + "s"
    return category, (f"{head} {plural}" if head else plural)


def article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def count_phrase(category: str, n: int) -> str:
    """``a cat``, ``two people``, ``14 cars``."""
    one, many = noun_forms(category)
    if n == 1:
        return f"{article(one)} {one}"
    return f"{_NUMBER_WORDS.get(n, str(n))} {many}"


def join_list(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


# -- layout ---------------------------------------------------------------------------------------
def cell(cx: float, cy: float) -> Tuple[str, str]:
    """(row, column) third of a normalised point: top/middle/bottom, left/center/right."""
    col = "left" if cx < 1 / 3 else ("right" if cx > 2 / 3 else "center")
    row = "top" if cy < 1 / 3 else ("bottom" if cy > 2 / 3 else "middle")
    return row, col


def cell_phrase(row: str, col: str) -> str:
    if row == "middle":
        return "in the center" if col == "center" else f"on the {col}"
    if col == "center":
        return f"at the {row}"
    return f"at the {row} {col}"


def position(boxes: Sequence[Sequence[float]], width: int, height: int) -> str:
    """Coarse position of a category's boxes ([x, y, w, h]) in the frame (module docstring)."""
    cells = [cell((x + w / 2) / width, (y + h / 2) / height) for x, y, w, h in boxes]
    cols = {c for _, c in cells}
    rows = {r for r, _ in cells}
    if "left" in cols and "right" in cols:
        return f"spread across the {next(iter(rows))} of the frame" if len(rows) == 1 else "spread across the frame"
    total = sum(max(w * h, 1e-9) for _, _, w, h in boxes)
    cx = sum((x + w / 2) * max(w * h, 1e-9) for x, _, w, h in boxes) / total / width
    cy = sum((y + h / 2) * max(w * h, 1e-9) for _, y, w, h in boxes) / total / height
    return cell_phrase(*cell(cx, cy))


# -- composition ----------------------------------------------------------------------------------
def _groups(image: Any, names: Mapping[int, str]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Per-category groups of non-crowd instances, and of crowd regions (both with boxes)."""
    by: Dict[str, Dict[str, Any]] = {}
    crowd: Dict[str, Dict[str, Any]] = {}
    for a in image.instances:
        name = names[a["category_id"]]
        target = crowd if a.get("iscrowd") else by
        g = target.setdefault(name, {"category": name, "category_id": a["category_id"], "boxes": [], "area": 0.0})
        x, y, w, h = (float(v) for v in a["bbox"])
        g["boxes"].append((x, y, w, h))
        g["area"] += w * h
    return list(by.values()), list(crowd.values())


def compose(image: Any, names: Mapping[int, str], style: str = "detailed") -> str:
    """The caption of one COCO image from its instances (module docstring)."""
    groups, crowds = _groups(image, names)
    if not groups and not crowds:
        raise UnknownImage(f"COCO image {image.file_name} has no instance annotation; "
                           f"{OFFLINE_NAME} does not invent captions")
    W, H = image.width, image.height
    if style == "plain":
        items = [count_phrase(g["category"], len(g["boxes"])) for g in sorted(groups, key=lambda g: g["category_id"])]
        items += [f"a crowd of {noun_forms(g['category'])[1]}" for g in sorted(crowds, key=lambda g: g["category_id"])
                  if g["category"] not in {x["category"] for x in groups}]
        return f"This image shows {join_list(items)}."
    ranked = sorted(groups, key=lambda g: (-g["area"], g["category_id"]))
    sentences: List[str] = []
    if ranked:
        subj = ranked[0]
        n = len(subj["boxes"])
        largest = max(w * h for _, _, w, h in subj["boxes"]) / float(W * H)
        pct = max(1, int(round(largest * 100)))
        head = count_phrase(subj["category"], n)
        verb = "is" if n == 1 else "are"
        where = position(subj["boxes"], W, H)
        cover = f", covering about {pct}% of the frame" if n == 1 else f", the largest covering about {pct}% of the frame"
        sentences.append(f"{head[0].upper()}{head[1:]} {verb} {where}{cover}.")
        near = [f"{count_phrase(g['category'], len(g['boxes']))} {position(g['boxes'], W, H)}"
                for g in ranked[1:1 + _DETAILED_WITH_POSITION]]
        if near:
            sentences.append(f"Around {'it' if n == 1 else 'them'} {'is' if len(near) == 1 and near[0].startswith(('a ', 'an ')) else 'are'} {join_list(near)}.")
        rest = [count_phrase(g["category"], len(g["boxes"])) for g in ranked[1 + _DETAILED_WITH_POSITION:]]
        if rest:
            sentences.append(f"Smaller objects include {join_list(rest)}.")
    for g in sorted(crowds, key=lambda g: (-g["area"], g["category_id"])):
        what = "crowd of people" if g["category"] == "person" else f"dense group of {noun_forms(g['category'])[1]}"
        also = " also" if ranked else ""
        sentences.append(f"A {what}{also} appears {position(g['boxes'], W, H)}.")
    orient = "landscape" if W > H else ("portrait" if H > W else "square")
    sentences.append(f"The frame is in {orient} orientation.")
    return " ".join(sentences)


# -- finding the image ----------------------------------------------------------------------------
def image_url_of(messages: Sequence[Mapping[str, Any]]) -> Optional[str]:
    """The first ``image_url`` of the request's user messages."""
    for m in messages:
        c = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(c, list):
            for part in c:
                if isinstance(part, Mapping) and part.get("type") == "image_url":
                    iu = part.get("image_url")
                    url = iu.get("url") if isinstance(iu, Mapping) else iu
                    if isinstance(url, str):
                        return url
    return None


def decode_data_url(url: str) -> bytes:
    head, sep, b64 = url.partition(",")
    if not sep or ";base64" not in head:
        raise UnknownImage("data URL is not base64-encoded")
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UnknownImage(f"data URL is not valid base64 ({exc})") from None


class CocoCaptioner:
    """The backend: ``fn(messages, payload) -> caption`` over a :class:`~capaudit.data.coco.CocoIndex`."""

    def __init__(self, index: Any = None, policies: Optional[Mapping[str, Any]] = None):
        self._index = index
        self._policies = policies
        self._thumbs: Optional[Tuple[Any, List[int], List[float]]] = None
        self._lock = threading.Lock()

    @property
    def index(self) -> Any:
        if self._index is None:
            from capaudit.data.coco import coco_mini

            self._index = coco_mini()
        return self._index

    def policies(self) -> Mapping[str, Any]:
        if self._policies is None:
            from capaudit.recap.policies import load_policies

            try:
                self._policies = load_policies()
            except (OSError, ValueError):
                self._policies = {}
        return self._policies

    # -- visual match ------------------------------------------------------------------------------
    @staticmethod
    def thumbnail(im: Any) -> Any:
        import numpy as np
        from PIL import Image

        return np.asarray(im.convert("L").resize((THUMB, THUMB), Image.Resampling.BOX), dtype="float32")

    def _thumb_table(self) -> Tuple[Any, List[int], List[float]]:
        with self._lock:
            if self._thumbs is None:
                import numpy as np
                from PIL import Image, ImageOps

                ids, ratios, arrs = [], [], []
                for img in self.index:
                    if img.path is None or not Path(img.path).is_file():
                        continue
                    with Image.open(img.path) as im:
                        im.load()
                        im = ImageOps.exif_transpose(im)
                        arrs.append(self.thumbnail(im))
                        ratios.append(im.width / im.height)
                    ids.append(img.id)
                self._thumbs = (np.stack(arrs) if arrs else np.zeros((0, THUMB, THUMB), "float32"), ids, ratios)
            return self._thumbs

    def match(self, data: bytes) -> Optional[Any]:
        """The COCO-MINI image that ``data`` shows (sha256, then visual match), or ``None``."""
        hit = self.index.lookup(image_bytes=data)
        if hit is not None:
            return hit
        import numpy as np
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(io.BytesIO(data)) as im:
                im.load()
                thumb = self.thumbnail(im)
                ratio = im.width / im.height
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise UnknownImage(f"cannot decode the image ({exc})") from None
        table, ids, ratios = self._thumb_table()
        if not ids:
            return None
        diffs = np.abs(table - thumb).mean(axis=(1, 2))
        ok = np.array([abs(r - ratio) <= 0.02 * r for r in ratios])
        diffs = np.where(ok, diffs, np.inf)
        order = np.argsort(diffs)
        best = float(diffs[order[0]])
        second = float(diffs[order[1]]) if len(order) > 1 else float("inf")
        if best <= MATCH_MAX_DIFF and second - best >= MATCH_MARGIN:
            return self.index.images[ids[int(order[0])]]
        return None

    def find(self, url: str) -> Any:
        if url.startswith("data:"):
            data = decode_data_url(url)
            img = self.match(data)
            if img is None:
                raise UnknownImage(f"image (sha256 {hashlib.sha256(data).hexdigest()[:16]}…) is not a COCO-MINI image; "
                                   f"{OFFLINE_NAME} only describes annotated COCO-MINI images")
            return img
        if url.startswith("file://"):
            name = Path(unquote(urlsplit(url).path)).name
            img = self.index.by_file_name(name)
            if img is None:
                raise UnknownImage(f"file {name} is not a COCO-MINI image; {OFFLINE_NAME} only describes "
                                   f"annotated COCO-MINI images")
            return img
        raise UnknownImage(f"{OFFLINE_NAME} reads data: and file:// image URLs only, got {url[:40]!r}")

    def style_of(self, messages: Sequence[Mapping[str, Any]]) -> str:
        from capaudit.recap.policies import identify_policy

        pol = identify_policy(messages, self.policies())
        if pol is not None:
            return pol.offline_style
        return "detailed" if any(m.get("role") == "system" for m in messages) else "plain"

    def __call__(self, messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
        url = image_url_of(messages)
        if url is None:
            raise UnknownImage(f"{OFFLINE_NAME} needs an image_url in the user message")
        img = self.find(url)
        return compose(img, self.index.category_names, self.style_of(messages))


DEFAULT_CAPTIONER = CocoCaptioner()


def _register() -> None:
    from capaudit.llm.backends import register_backend

    register_backend(OFFLINE_NAME, DEFAULT_CAPTIONER, card=CARD)


_register()

__all__ = ["CARD", "OFFLINE_NAME", "OFFLINE_LABEL", "OFFLINE_VERSION", "UnknownImage", "CocoCaptioner", "DEFAULT_CAPTIONER",
           "compose", "position", "cell", "cell_phrase", "count_phrase", "noun_forms", "image_url_of"]
