"""Two offline judges served by ``capaudit serve`` — heuristics grounded in real annotations, not VLMs.

No vision-language weights install on the project's machines (offline-backends.md §1), so the
demo's judges answer from evidence that exists offline. Both read the request exactly as a VLM
would (OpenAI chat API, ``image_url`` content part as a ``file://`` or base64 ``data:`` URL, the
questions in the user message) and answer ``{caption_id, question_results: [{question_id, answer,
confidence(, evidence)}]}``. Their names say "offline" and travel into every artifact they feed.

The image is found in a COCO-format index (default: COCO-MINI, :func:`capaudit.data.coco.coco_mini`)
by the sha256 of its bytes, else by file name (``file://`` URLs), else — for re-encoded ``data:``
URLs — by the nearest 16×16 grayscale thumbnail among the images of the same width and height
(mean absolute difference below :data:`THUMB_MAX_DIFF`). An image not in the index is a
``ValueError`` (the server answers HTTP 400, the client records a failed row naming it).

``capaudit-offline-annotation-judge`` (:class:`AnnotationJudge`) answers from the COCO instance
annotations; nouns map to categories through the reviewed lexicon (:func:`capaudit.lexicons.coco_lexicon`):

* **object**: the unit's noun maps to a category present in the image (crowd regions count) →
  yes; to a COCO category absent from the image → no; to none → uncertain.
* **count**: a number (digits, number words, ``pair``/``couple``/``dozen``) and a noun that maps
  to a category; equal to the number of non-crowd instances → yes, different → no; a crowd region
  of that category, a vague quantity ("several") or an unmapped noun → uncertain.
* **relation**: both ends must map to categories; an end absent from the image → no; geometric
  relations from the instance boxes (:func:`box_relation`: left/right of, above/below/under,
  on/on top of, next to/beside/near): some instance pair satisfies it → yes, every pair
  contradicts it → no, else uncertain; non-geometric relations (holding, riding, with …) → uncertain.
* **attribute**: the unit (``stuffed bear`` → teddy bear), else its target noun, maps to an
  absent category → no; otherwise uncertain (colour, material, pose are not annotated).
* **style**: black-and-white / monochrome / grayscale claims → yes when the pixels are grey
  (99th percentile of the per-pixel channel spread ≤ 10 on a 64×64 copy), else no; other styles
  uncertain. **camera**, **lighting** → uncertain.
* **text_rendering** (Tesseract OCR, offline-backends §3.4: grayscale and inverted, ``--psm 11``,
  words with confidence ≥ 70): the claimed text is the quoted part of the unit, else its words
  minus generic ones (text, sign, reads …). No specific text claimed → yes if OCR reads any word,
  else uncertain. Every claimed word read (exact, or edit distance ≤ 1 for words of ≥ 4 letters)
  → yes; some read → uncertain; none read while OCR reads at least three other words (and a
  claimed word has ≥ 4 letters) → no; otherwise uncertain. OCR misses small, stylised and
  perspective text (on a COCO street scene it reads "GRILL" but not the large "Potsdamer Straße"
  sign), so silence or a single stray word is never evidence of absence. Without Tesseract every
  text-rendering answer is ``uncertain`` with the reason ``OCR unavailable (tesseract not
  installed: ...)``; the backend is registered with ``degrades=("tesseract",)``, so ``capaudit
  serve`` warns and marks every completion ``capaudit_degraded`` (counted by ``judges summarize``).

Resources at request time (``register_backend(..., requires=, degrades=)``): the annotation judge
needs no WordNet (its noun lexicon is a shipped data file) and answers with less without
Tesseract; the reference-caption judge requires WordNet (lemmas, synsets, hypernyms).

``capaudit-offline-refcaption-judge`` (:class:`RefCaptionJudge`) answers from the *other* human
captions of the same image — never the caption being judged: its requests carry the judged
caption's text (``judged_caption=`` line, :func:`capaudit.judges.prompts.parse_judged_caption`) and
every reference caption equal to it after :func:`normalized_caption` is left out, whatever the
caption id; caption ids carrying ``coco-ann-<id>`` also name the COCO caption annotation(s) they
come from (a SugarCrepe negative: an edited copy of one), and those are left out too. A request
with neither is refused (``ValueError``: the server answers HTTP 400, the row is a counted failure).
Words are matched by WordNet lemma (``morphy``), shared synset, or a reference noun whose
hypernyms include the claimed noun (a caption's "puppy" supports a claimed "dog", not the reverse):

* **object**: the noun is mentioned → yes; it maps to a COCO category that no reference caption
  mentions while they mention another category of the same supercategory → no; else uncertain.
* **attribute**: one reference caption has the noun and every modifier word → yes; the claimed
  modifier is a colour and a caption gives the noun another colour → no; the noun is an object
  "no" → no; else uncertain.
* **count**: a caption states the same number for the noun → yes; captions state only other
  numbers → no; else uncertain.
* **relation**: a caption has subject, relation words and object in order, at most six words
  apart with no other COCO object and no conjunction between them → yes; the same with the
  opposite spatial relation (left/right, above/below, on/under, in front of/behind) → no; else
  uncertain.
* **style / camera / lighting / text_rendering**: every content word (or the claimed text) in one
  caption → yes; else uncertain.

Confidence is fixed per answer (yes 0.9, no 0.8, uncertain 0.5); ``evidence`` (when the schema asks
for it) names the rule that fired.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from capaudit.io.canonical_json import dumps_bytes

from capaudit.judges.image_urls import data_url_bytes, file_url_path
from capaudit.judges.prompts import message_image_urls, message_text, parse_judged_caption, parse_user_prompt
from capaudit.judges.questions import parse_question_text

from .cards import card

ANNOTATION_JUDGE = "capaudit-offline-annotation-judge"
REFCAPTION_JUDGE = "capaudit-offline-refcaption-judge"
#: Their model cards (``cards.yaml``), which the server declares.
CARDS = {ANNOTATION_JUDGE: card(ANNOTATION_JUDGE), REFCAPTION_JUDGE: card(REFCAPTION_JUDGE)}
#: Rule-set versions, hashed into request ids as the model revision (changed rules → new answers).
JUDGE_VERSIONS = {n: c.version for n, c in CARDS.items()}
#: Judges whose requests carry the judged caption's text (to leave it out of their evidence).
CAPTION_AWARE_JUDGES = frozenset(n for n, c in CARDS.items() if "judged_caption" in c.needs)
JUDGE_LABELS = {n: c.label for n, c in CARDS.items()}
JUDGE_SHORT = {n: c.short for n, c in CARDS.items()}
CONFIDENCE = {"yes": 0.9, "no": 0.8, "uncertain": 0.5}
THUMB_MAX_DIFF = 12.0
OCR_MIN_CONF = 70.0
#: A text claim is "no" only when OCR reads at least this many words and none of the claimed ones.
OCR_NO_MIN_WORDS = 3
GRAY_SPREAD = 10
#: Reference-caption relations: subject and object at most this many words apart.
RELATION_WINDOW = 6
CONJUNCTIONS = frozenset({"and", "while", "but", "or", "as", "who", "which", "that"})
_ANN_MARK = re.compile(r"coco-ann-(\d+)")
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
ARTICLES = frozenset({"a", "an", "the"})
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19, "twenty": 20, "single": 1, "pair": 2, "couple": 2, "both": 2, "dozen": 12,
    "lone": 1, "twin": 2,
}
VAGUE_QUANTITIES = frozenset("several many some few multiple numerous lots lot various group bunch plenty".split())
GRAYSCALE_STYLES = ("black and white", "black-and-white", "monochrome", "monochromatic", "grayscale", "greyscale",
                    "b&w", "b and w")
GENERIC_TEXT_WORDS = frozenset(
    "text texts word words writing written letter letters lettering reads read reading says say saying sign signs "
    "label labels labeled labelled logo logos title titled caption number numbers on of the a an with that which "
    "is are in and it its printed print displays display shows show visible rendered".split())
COLOR_WORDS = frozenset(
    "red orange yellow green blue purple violet pink brown black white gray grey silver gold golden beige tan "
    "maroon navy teal turquoise cyan magenta lavender olive cream ivory crimson".split())
#: Relation phrases (article-free tokens) → geometric kind; longest phrases first.
GEOMETRIC_RELATIONS: Tuple[Tuple[Tuple[str, ...], str], ...] = tuple(sorted((
    (("to", "left", "of"), "left"), (("on", "left", "of"), "left"), (("on", "left", "side", "of"), "left"),
    (("left", "of"), "left"), (("to", "right", "of"), "right"), (("on", "right", "of"), "right"),
    (("on", "right", "side", "of"), "right"), (("right", "of"), "right"),
    (("above",), "above"), (("over",), "above"), (("below",), "below"), (("under",), "below"),
    (("underneath",), "below"), (("beneath",), "below"),
    (("on", "top", "of"), "on"), (("atop",), "on"), (("on",), "on"), (("onto",), "on"), (("upon",), "on"),
    (("sitting", "on"), "on"), (("standing", "on"), "on"), (("lying", "on"), "on"), (("laying", "on"), "on"),
    (("resting", "on"), "on"), (("next", "to"), "near"), (("beside",), "near"), (("besides",), "near"),
    (("by",), "near"), (("near",), "near"), (("alongside",), "near"), (("close", "to"), "near"),
    (("adjacent", "to"), "near"), (("nearby",), "near"),
), key=lambda x: -len(x[0])))
#: Opposite spatial relation words for the reference-caption judge.
OPPOSITES: Dict[str, Tuple[str, ...]] = {
    "left": ("right",), "right": ("left",), "front": ("behind",), "behind": ("front",),
    "above": ("below", "under", "beneath", "underneath"), "over": ("below", "under", "beneath", "underneath"),
    "on": ("under", "beneath", "underneath", "below"), "atop": ("under", "beneath", "underneath", "below"),
    "top": ("under", "beneath", "underneath", "below", "bottom"),
    "below": ("above", "over", "on", "atop"), "under": ("above", "over", "on", "atop"),
    "beneath": ("above", "over", "on", "atop"), "underneath": ("above", "over", "on", "atop"),
}


# --- shared helpers -------------------------------------------------------------------------
def words(text: str) -> List[str]:
    """Lower-case word tokens (hyphen/apostrophe joined)."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> List[str]:
    return [w for w in words(text) if w not in ARTICLES]


def excluded_annotations(caption_id: Optional[str]) -> Set[int]:
    """COCO caption annotation ids named by ``coco-ann-<id>`` markers in a caption id."""
    return {int(x) for x in _ANN_MARK.findall(caption_id or "")}


def normalized_caption(text: str) -> str:
    """A caption for equality tests: lower-case word tokens joined by one space (case, punctuation
    and spacing do not count)."""
    return " ".join(words(text))


def parse_count(unit: str) -> Tuple[Optional[int], bool, List[str]]:
    """``(number or None, vague, remaining words)`` of a count unit (``"two dogs"`` → 2)."""
    n: Optional[int] = None
    vague = False
    rest: List[str] = []
    for w in content_words(unit):
        if n is None and w.isdigit():
            n = int(w)
        elif n is None and w in NUMBER_WORDS:
            n = NUMBER_WORDS[w]
        elif w in VAGUE_QUANTITIES:
            vague = True
        elif w != "of":
            rest.append(w)
    return n, vague, rest


def split_relation(unit: str) -> Tuple[List[str], Optional[Tuple[str, ...]], Optional[str], List[str]]:
    """``(subject words, relation phrase, geometric kind, object words)`` of a relation unit; the
    phrase is the leftmost geometric relation (longest first); ``(words, None, None, [])`` if none."""
    toks = content_words(unit)
    for i in range(len(toks)):
        for phrase, kind in GEOMETRIC_RELATIONS:
            if tuple(toks[i:i + len(phrase)]) == phrase and i > 0 and i + len(phrase) < len(toks):
                return toks[:i], phrase, kind, toks[i + len(phrase):]
    return toks, None, None, []


def box_relation(kind: str, a: Sequence[float], b: Sequence[float], width: float, height: float) -> Optional[bool]:
    """Does COCO box ``a`` (x, y, w, h) stand in relation ``kind`` to box ``b``? ``True`` = holds,
    ``False`` = contradicted, ``None`` = undecided. Margins: 2 % of the image side for left/right/
    above/below; ``on``: horizontal overlap ≥ 30 % of the narrower box, ``a`` centred higher and
    its bottom edge within ``b``'s vertical extent (± 5 % of the height) — contradicted when the
    boxes are 5 % of the width apart or ``a`` lies below ``b``; ``near``: box gap ≤ 10 % of the image
    diagonal holds, > 30 % contradicts."""
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    acx, acy, bcx, bcy = ax + aw / 2, ay + ah / 2, bx + bw / 2, by + bh / 2
    mx, my = 0.02 * width, 0.02 * height

    def sign(d: float, m: float) -> Optional[bool]:
        return True if d > m else False if d < -m else None

    if kind == "left":
        return sign(bcx - acx, mx)
    if kind == "right":
        return sign(acx - bcx, mx)
    if kind == "above":
        return sign(bcy - acy, my)
    if kind == "below":
        return sign(acy - bcy, my)
    gap_x = max(0.0, max(ax, bx) - min(ax + aw, bx + bw))
    gap_y = max(0.0, max(ay, by) - min(ay + ah, by + bh))
    if kind == "on":
        overlap = max(0.0, min(ax + aw, bx + bw) - max(ax, bx))
        a_bottom = ay + ah
        if (overlap >= 0.3 * min(aw, bw) and acy < bcy and by - 0.05 * height <= a_bottom <= by + bh + 0.05 * height):
            return True
        if gap_x > 0.05 * width or ay >= by + bh:
            return False
        return None
    if kind == "near":
        gap = (gap_x ** 2 + gap_y ** 2) ** 0.5
        diag = (width ** 2 + height ** 2) ** 0.5
        return True if gap <= 0.1 * diag else False if gap > 0.3 * diag else None
    raise ValueError(f"unknown relation kind {kind!r}")


def levenshtein_at_most_one(a: str, b: str) -> bool:
    """Edit distance between ``a`` and ``b`` is at most 1."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i + 1:] == b[i + 1:] if len(a) == len(b) else a[i:] == b[i + 1:]


def claimed_text_tokens(unit: str) -> List[str]:
    """The text a text-rendering unit claims: the quoted part, else the non-generic words."""
    quoted = re.findall(r"[\"“”'‘’]([^\"“”'‘’]+)[\"“”'‘’]", unit)
    source = " ".join(quoted) if quoted else unit
    toks = [re.sub(r"[^a-z0-9]", "", w) for w in source.lower().split()]
    if quoted:
        return [t for t in toks if len(t) >= 2]
    return [t for t in toks if len(t) >= 2 and t not in GENERIC_TEXT_WORDS]


def text_rendering_answer(claimed: Sequence[str], read: Sequence[str]) -> Tuple[str, str]:
    """The OCR rule of the annotation judge (module docstring) → ``(answer, evidence)``."""
    read = [r for r in read if len(r) >= 2]
    if not claimed:
        return ("yes", "OCR reads text") if read else ("uncertain", "no specific text claimed; OCR reads none")

    def hit(t: str) -> bool:
        return any(r == t or (len(t) >= 4 and levenshtein_at_most_one(r, t)) for r in read)

    found = [t for t in claimed if hit(t)]
    if len(found) == len(claimed):
        return "yes", f"OCR reads {' '.join(found)}"[:160]
    if found:
        return "uncertain", "OCR reads part of the claimed text"
    if len(read) >= OCR_NO_MIN_WORDS and any(len(t) >= 4 for t in claimed):
        return "no", f"OCR reads other text ({' '.join(read[:5])})"[:160]
    return "uncertain", "OCR reads too little text to decide" if read else "OCR reads no text"


# --- images ---------------------------------------------------------------------------------
def image_bytes_from_url(url: str) -> Tuple[bytes, Optional[str]]:
    """``(bytes, file name or None)`` of a ``data:`` or ``file://`` URL (``ValueError`` otherwise)."""
    if url.startswith("data:"):
        return data_url_bytes(url), None
    if url.startswith("file://"):
        p = file_url_path(url)
        try:
            return p.read_bytes(), p.name
        except OSError as exc:
            raise ValueError(f"image {p} is not readable ({exc})") from None
    raise ValueError(f"offline judges read only file:// and data: image URLs, got {url[:60]!r}")


def _thumb(data: bytes) -> Tuple[Tuple[int, int], Any]:
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        size = im.size
        g = im.convert("L").resize((16, 16), Image.BILINEAR)
        return size, np.asarray(g, dtype=np.float32)


class ImageIndex:
    """COCO index plus the lookups of the module docstring (thread-safe, lazily loaded)."""

    def __init__(self, index: Any = None):
        self._index = index
        self._thumbs: Optional[Dict[Tuple[int, int], List[Tuple[int, Any]]]] = None
        self._lock = threading.Lock()

    @property
    def index(self) -> Any:
        if self._index is None:
            with self._lock:
                if self._index is None:
                    from capaudit.data.coco import coco_mini

                    self._index = coco_mini()
        return self._index

    def find(self, data: bytes, file_name: Optional[str]) -> Any:
        idx = self.index
        img = idx.lookup(image_bytes=data, file_name=file_name)
        if img is not None:
            return img
        try:
            size, th = _thumb(data)
        except Exception as exc:
            raise ValueError(f"image is not decodable ({type(exc).__name__}: {exc})") from None
        with self._lock:
            if self._thumbs is None:
                thumbs: Dict[Tuple[int, int], List[Tuple[int, Any]]] = {}
                for im in idx:
                    if im.path is not None and Path(im.path).is_file():
                        s, t = _thumb(Path(im.path).read_bytes())
                        thumbs.setdefault(s, []).append((im.id, t))
                self._thumbs = thumbs
        best = None
        for iid, t in self._thumbs.get(size, []):
            d = float(abs(t - th).mean())
            if best is None or d < best[0]:
                best = (d, iid)
        if best is not None and best[0] <= THUMB_MAX_DIFF:
            return idx.images[best[1]]
        raise ValueError(f"image ({size[0]}x{size[1]}, sha256 {hashlib.sha256(data).hexdigest()[:12]}…"
                         f"{', ' + file_name if file_name else ''}) is not in the judge's COCO index "
                         f"({len(idx)} images)")


def is_grayscale(data: bytes) -> bool:
    """True when the image's colour channels agree (module docstring, style rule)."""
    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        arr = np.asarray(im.convert("RGB").resize((64, 64)), dtype=np.int16)
    spread = arr.max(axis=2) - arr.min(axis=2)
    return float(np.percentile(spread, 99)) <= GRAY_SPREAD


def ocr_missing() -> Optional[str]:
    """Why OCR cannot run here (Tesseract or its English data, or pytesseract, missing), else ``None``;
    checked once per process."""
    return _ocr_missing()


@functools.lru_cache(maxsize=1)
def _ocr_missing() -> Optional[str]:
    import importlib.util

    from capaudit.resources import status

    ok, detail = status("tesseract")
    if not ok:
        return detail
    if importlib.util.find_spec("pytesseract") is None:
        return "python module pytesseract not installed"
    return None


def ocr_words(data: bytes) -> List[str]:
    """Words Tesseract reads with confidence ≥ :data:`OCR_MIN_CONF` (grayscale and inverted, ``--psm 11``)."""
    import pytesseract
    from PIL import Image, ImageOps

    out: List[str] = []
    with Image.open(io.BytesIO(data)) as im:
        gray = im.convert("L")
        for variant in (gray, ImageOps.invert(gray)):
            d = pytesseract.image_to_data(variant, config="--psm 11", output_type=pytesseract.Output.DICT)
            for text, conf in zip(d.get("text", []), d.get("conf", [])):
                try:
                    c = float(conf)
                except (TypeError, ValueError):
                    continue
                t = re.sub(r"[^a-z0-9]", "", str(text).lower())
                if c >= OCR_MIN_CONF and len(t) >= 2 and t not in out:
                    out.append(t)
    return out


# --- request handling -----------------------------------------------------------------------
class OfflineJudge:
    """Base: parse the chat request, find the image, answer every question with :meth:`answer`."""

    name = "capaudit-offline-judge"

    def __init__(self, images: Optional[ImageIndex] = None, cache_size: int = 256):
        self.images = images or ImageIndex()
        self._cache: "OrderedDict[str, Any]" = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def cached(self, key: str, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = fn()
        with self._lock:
            self._cache[key] = value
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return value

    def answer(self, category: str, unit: str, target: str, image: Any, data: bytes, caption_id: Optional[str],
               judged_caption: Optional[str] = None) -> Tuple[str, str]:
        raise NotImplementedError

    def check_request(self, caption_id: Optional[str], judged_caption: Optional[str]) -> None:
        """Refuse (``ValueError``) a request this judge cannot answer honestly; default: accept."""

    def judge(self, messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> Dict[str, Any]:
        user = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") == "user"), None)
        if user is None:
            raise ValueError("no user message")
        content = user.get("content")
        urls = message_image_urls(content)
        if not urls:
            raise ValueError("the user message has no image_url part")
        text = message_text(content)
        caption_id, questions = parse_user_prompt(text)
        if caption_id is None and questions:  # the reference's wording names no caption id: read it
            caption_id = str(questions[0]["question_id"]).rpartition(":u")[0] or None  # from "<id>:u<n>"
        judged = parse_judged_caption(text)
        self.check_request(caption_id, judged)
        data, file_name = image_bytes_from_url(urls[0])
        image = self.images.find(data, file_name)
        want_evidence = _schema_wants_evidence(payload)
        results = []
        for q in questions:
            cat = str(q.get("category", ""))
            unit, target = parse_question_text(cat, str(q.get("question", "")))
            ans, why = self.answer(cat, unit, target, image, data, caption_id, judged)
            item: Dict[str, Any] = {"question_id": q["question_id"], "answer": ans, "confidence": CONFIDENCE[ans]}
            if want_evidence:
                item["evidence"] = why[:160]
            results.append(item)
        return {"caption_id": caption_id or "", "question_results": results}

    def __call__(self, messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
        return dumps_bytes(self.judge(messages, payload)).decode("utf-8")


def _schema_wants_evidence(payload: Mapping[str, Any]) -> bool:
    from capaudit.llm.dialects import requested_schema

    schema = requested_schema(payload)
    try:
        return "evidence" in schema["properties"]["question_results"]["items"]["required"]
    except (KeyError, TypeError):
        return False


def _lexicon() -> Any:
    from capaudit.lexicons import coco_lexicon

    return coco_lexicon()


class AnnotationJudge(OfflineJudge):
    """``capaudit-offline-annotation-judge`` (module docstring)."""

    name = ANNOTATION_JUDGE

    def _presence(self, image: Any) -> Tuple[Dict[str, int], Set[str], Dict[str, List[Any]]]:
        names = self.images.index.category_names
        counts: Dict[str, int] = {}
        crowd: Set[str] = set()
        boxes: Dict[str, List[Any]] = {}
        for a in image.instances:
            c = names[a["category_id"]]
            if a.get("iscrowd"):
                crowd.add(c)
            else:
                counts[c] = counts.get(c, 0) + 1
                boxes.setdefault(c, []).append(a["bbox"])
        return counts, crowd, boxes

    def answer(self, category: str, unit: str, target: str, image: Any, data: bytes, caption_id: Optional[str],
               judged_caption: Optional[str] = None) -> Tuple[str, str]:
        lex = _lexicon()
        counts, crowd, boxes = self._presence(image)
        present = set(counts) | crowd

        def noun(phrase: str) -> Optional[str]:
            return lex.category_of(phrase) if phrase.strip() else None

        if category == "object":
            c = noun(unit)
            if c is None:
                return "uncertain", "noun maps to no COCO category"
            return ("yes", f"{c} annotated") if c in present else ("no", f"no {c} annotated")
        if category == "count":
            n, vague, rest = parse_count(unit)
            c = noun(" ".join(rest)) or noun(target)
            if c is None:
                return "uncertain", "noun maps to no COCO category"
            if c not in present:
                return "no", f"no {c} annotated"
            if n is None or vague:
                return "uncertain", "vague or missing number"
            if c in crowd:
                return "uncertain", f"{c} crowd region: count not exact"
            k = counts.get(c, 0)
            return ("yes", f"{k} {c} annotated") if k == n else ("no", f"{k} {c} annotated, claim {n}")
        if category == "relation":
            subj, phrase, kind, obj = split_relation(unit)
            if phrase is None:
                toks = content_words(unit)
                ends = [noun(toks[0]) if toks else None, noun(toks[-1]) if toks else None]
                ends = [e for e in ends if e is not None]
                absent = [e for e in ends if e not in present]
                if absent:
                    return "no", f"no {absent[0]} annotated"
                return "uncertain", "relation not decidable from boxes"
            cs, co = noun(" ".join(subj)), noun(" ".join(obj))
            for c in (cs, co):
                if c is not None and c not in present:
                    return "no", f"no {c} annotated"
            if cs is None or co is None:
                return "uncertain", "an end maps to no COCO category"
            pairs = [(a, b) for a in boxes.get(cs, []) for b in boxes.get(co, []) if a is not b]
            if not pairs:
                return "uncertain", "no instance pair (crowd only)"
            verdicts = [box_relation(kind, a, b, image.width, image.height) for a, b in pairs]  # type: ignore[arg-type]
            if any(v is True for v in verdicts):
                return "yes", f"{cs} {kind} {co} in boxes"
            if all(v is False for v in verdicts):
                return "no", f"no {cs} {kind} {co} in boxes"
            return "uncertain", "boxes do not decide"
        if category == "attribute":
            c = noun(unit) or noun(target)
            if c is not None and c not in present:
                return "no", f"no {c} annotated"
            return "uncertain", "attribute not annotated"
        if category == "style":
            low = unit.lower()
            if any(s in low for s in GRAYSCALE_STYLES):
                gray = self.cached("gray:" + hashlib.sha256(data).hexdigest(), lambda: is_grayscale(data))
                return ("yes", "grayscale pixels") if gray else ("no", "colour pixels")
            return "uncertain", "style not annotated"
        if category == "text_rendering":
            missing = ocr_missing()
            if missing:
                return "uncertain", f"OCR unavailable (tesseract not installed: {missing})"
            try:
                read = self.cached("ocr:" + hashlib.sha256(data).hexdigest(), lambda: ocr_words(data))
            except Exception as exc:  # tesseract present but failing on this image: say so
                return "uncertain", f"OCR failed on this image ({type(exc).__name__}: {exc})"[:160]
            return text_rendering_answer(claimed_text_tokens(unit), read)
        return "uncertain", f"{category} not annotated"


@functools.lru_cache(maxsize=None)
def _wn() -> Any:
    from capaudit.nlp.wordnet import wordnet

    return wordnet()


@functools.lru_cache(maxsize=65536)
def lemma(word: str) -> str:
    """WordNet noun lemma (``morphy``) of a word, else the word."""
    if not word.isalpha():
        return word
    return _wn().morphy(word, "n") or word


@functools.lru_cache(maxsize=65536)
def _senses(word: str) -> Tuple[Any, ...]:
    return tuple(_wn().synsets(word, "n")[:3])


@functools.lru_cache(maxsize=65536)
def _ancestors(word: str) -> frozenset:
    out = set()
    for s in _senses(word)[:2]:
        out |= set(s.closure(lambda x: x.hypernyms(), depth=8))
    return frozenset(out)


@functools.lru_cache(maxsize=65536)
def forms(word: str) -> frozenset:
    """The word and its WordNet noun, verb and adjective base forms ("standing" ~ "stands")."""
    out = {word}
    if word.isalpha():
        wn = _wn()
        for pos in ("n", "v", "a"):
            m = wn.morphy(word, pos)
            if m:
                out.add(m)
    return frozenset(out)


def same_word(a: str, b: str) -> bool:
    """Two words share a base form (:func:`forms`)."""
    return a == b or bool(forms(a) & forms(b))


@functools.lru_cache(maxsize=262144)
def refers_to(ref_word: str, claim_word: str) -> bool:
    """A reference word supports a claimed noun: same lemma, a shared synset, or the claimed noun
    among the reference noun's hypernyms (reference more specific)."""
    a, b = lemma(ref_word), lemma(claim_word)
    if a == b:
        return True
    sa, sb = _senses(a), _senses(b)
    if not sa or not sb:
        return False
    if set(sa) & set(sb):
        return True
    return bool(_ancestors(a) & set(sb))


class RefCaptionJudge(OfflineJudge):
    """``capaudit-offline-refcaption-judge`` (module docstring)."""

    name = REFCAPTION_JUDGE

    def check_request(self, caption_id: Optional[str], judged_caption: Optional[str]) -> None:
        if judged_caption is None and not excluded_annotations(caption_id):
            raise ValueError(f"{self.name}: the request carries no judged_caption= line and its caption id "
                             f"{caption_id!r} names no coco-ann-<id>, so the judged caption could not be left out "
                             "of the evidence; rebuild the requests with 'capaudit judges build'")

    def references(self, image: Any, caption_id: Optional[str], judged_caption: Optional[str] = None) -> List[List[str]]:
        """Content words of the image's human captions, without the judged one (by annotation id
        named in the caption id, and by normalised text equal to ``judged_caption``)."""
        skip = excluded_annotations(caption_id)
        same = normalized_caption(judged_caption) if judged_caption is not None else None
        out = []
        for c in image.captions:
            text = str(c.get("caption", ""))
            if int(c.get("id", -1)) in skip or (same is not None and normalized_caption(text) == same):
                continue
            out.append(content_words(text))
        return out

    @staticmethod
    def _find(ref: Sequence[str], word: str) -> List[int]:
        return [i for i, w in enumerate(ref) if refers_to(w, word)]

    def _object(self, head: str, refs: List[List[str]]) -> Tuple[str, str]:
        if any(self._find(r, head) for r in refs):
            return "yes", f"'{head}' in another caption"
        lex = _lexicon()
        c = lex.category_of(head)
        if c is not None:
            mentioned = {cat for r in refs for term, cat in lex.mentions(" ".join(r)) if term not in COLOR_WORDS}
            if c not in mentioned and any(lex.supercategory(m) == lex.supercategory(c) for m in mentioned):
                return "no", f"other captions name other {lex.supercategory(c)} objects, not {c}"
        return "uncertain", f"'{head}' not in other captions"

    def answer(self, category: str, unit: str, target: str, image: Any, data: bytes, caption_id: Optional[str],
               judged_caption: Optional[str] = None) -> Tuple[str, str]:
        refs = self.references(image, caption_id, judged_caption)
        if not refs:
            return "uncertain", "no other caption"
        toks = content_words(unit)
        if not toks:
            return "uncertain", "empty claim"
        if category == "object":
            return self._object(toks[-1], refs)
        if category == "attribute":
            head = content_words(target)[-1] if content_words(target) else toks[-1]
            mods = [w for w in toks if w != head and not refers_to(w, head)] if head in toks else toks[:-1]
            for r in refs:
                pos = self._find(r, head)
                if pos and all(any(same_word(w, m) for w in r) for m in mods):
                    return "yes", f"'{' '.join(toks)}' in another caption"[:160]
            colors = [m for m in mods if m in COLOR_WORDS]
            if colors:
                for r in refs:
                    for p in self._find(r, head):
                        before = r[max(0, p - 3):p]
                        other = [w for w in before if w in COLOR_WORDS and w not in colors]
                        if other and not any(w in colors for w in before):
                            return "no", f"another caption says {other[0]} {head}"
            ans, why = self._object(head, refs)
            return ("no", why) if ans == "no" else ("uncertain", "attribute not in other captions")
        if category == "count":
            n, vague, rest = parse_count(unit)
            head = rest[-1] if rest else (content_words(target)[-1] if content_words(target) else None)
            if n is None or vague or head is None:
                return "uncertain", "vague or missing number"
            stated: Set[int] = set()
            for r in refs:
                for p in self._find(r, head):
                    for w in r[max(0, p - 3):p]:
                        if w.isdigit():
                            stated.add(int(w))
                        elif w in NUMBER_WORDS:
                            stated.add(NUMBER_WORDS[w])
            if n in stated:
                return "yes", f"another caption says {n} {head}"
            if stated:
                return "no", f"other captions say {sorted(stated)} {head}"
            return "uncertain", "no number for it in other captions"
        if category == "relation":
            if len(toks) < 3:
                return "uncertain", "relation without two ends"
            subj, obj, rel = toks[0], toks[-1], [w for w in toks[1:-1] if w not in ("of", "to")]
            lex = _lexicon()
            for r in refs:
                for i in self._find(r, subj):
                    for j in self._find(r, obj):
                        if j <= i or j - i > RELATION_WINDOW:
                            continue
                        between = r[i + 1:j]
                        if any(w in CONJUNCTIONS or lex.category_of(w) is not None for w in between):
                            continue  # another object or a new clause in between: not this relation
                        if all(any(same_word(w, x) for w in between) for x in rel):
                            return "yes", "relation in another caption"
                        opp = {o for x in rel for o in OPPOSITES.get(x, ())} - set(rel)
                        if opp and any(o in between for o in opp):
                            return "no", "another caption states the opposite relation"
            return "uncertain", "relation not in other captions"
        if category == "text_rendering":
            claimed = claimed_text_tokens(unit)
            if claimed and any(all(t in r for t in claimed) for r in refs):
                return "yes", "text quoted in another caption"
            return "uncertain", "text not in other captions"
        if any(all(any(same_word(w, c) for w in r) for c in toks) for r in refs):
            return "yes", f"'{' '.join(toks)}' in another caption"[:160]
        return "uncertain", f"{category} not in other captions"


DEFAULT_ANNOTATION_JUDGE = AnnotationJudge()
DEFAULT_REFCAPTION_JUDGE = RefCaptionJudge(images=DEFAULT_ANNOTATION_JUDGE.images)
OFFLINE_JUDGES = (ANNOTATION_JUDGE, REFCAPTION_JUDGE)


def judge_label(name: str) -> str:
    """Printed judge name: offline judges say so."""
    return JUDGE_LABELS.get(name, name)


def _register() -> None:
    from capaudit.llm.backends import register_backend

    register_backend(ANNOTATION_JUDGE, DEFAULT_ANNOTATION_JUDGE, degrades=("tesseract",), card=CARDS[ANNOTATION_JUDGE])
    register_backend(REFCAPTION_JUDGE, DEFAULT_REFCAPTION_JUDGE, requires=("wordnet",), card=CARDS[REFCAPTION_JUDGE])


_register()

__all__ = [
    "ANNOTATION_JUDGE", "REFCAPTION_JUDGE", "CARDS", "OFFLINE_JUDGES", "JUDGE_VERSIONS", "JUDGE_LABELS", "JUDGE_SHORT",
    "CONFIDENCE", "CAPTION_AWARE_JUDGES", "normalized_caption", "ocr_missing", "AnnotationJudge", "RefCaptionJudge", "ImageIndex", "OfflineJudge", "box_relation",
    "split_relation", "parse_count", "claimed_text_tokens", "text_rendering_answer", "excluded_annotations",
    "ocr_words", "is_grayscale", "refers_to", "lemma", "forms", "same_word", "judge_label", "image_bytes_from_url",
]
