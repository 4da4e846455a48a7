"""The human-verification protocol (reference-spec §7): phases, fields, allowed values, study config.

Every item is judged in three phases, in this order, by each assigned participant:

* ``caption`` (image hidden): ``caption_licensed`` (does the caption window state the claim?),
  ``atomic_visual_claim``, ``category_check`` (+ ``corrected_category`` when ``incorrect``);
* ``image`` (caption hidden; only after the caption phase): ``image_support``;
* ``pair`` (caption and image together): the exploratory 5-point ``salient_coverage`` and
  ``control_usefulness`` (``image_unavailable`` when the image cannot be shown).

Phases run in batches of ``batch_size`` items per participant (:class:`StudyConfig`; 0 = one batch):
a batch's caption phases, then its image phases, then its pair steps, so blinding holds per item.

Optional in every phase: ``confidence`` (1–5), ``reason_tags`` (from :data:`REASON_TAGS`), ``note``
(free text screened for e-mail addresses, phone numbers, URLs and IP addresses) and ``elapsed_ms``.
Surface identity and judge answers are never part of what an annotator sees.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError

PROTOCOL = "human_cbu_v1"
PHASES: Tuple[str, ...] = ("caption", "image", "pair")
#: The eight claim types (reference-spec §4.1).
CATEGORIES: Tuple[str, ...] = (
    "object", "attribute", "relation", "style", "camera", "lighting", "count", "text_rendering",
)
JUDGE_ANSWERS: Tuple[str, ...] = ("yes", "no", "uncertain")
#: Sampling designs (``StudyConfig.sampling``): the reference's stratified sample (§7), or the same
#: strata each split into judge-disagreement/agreement sub-strata with the disagreements over-sampled
#: (:mod:`capaudit.human.sampling`).
SAMPLING_DESIGNS: Tuple[str, ...] = ("reference", "disagreement_first")

#: Required nominal fields per phase, with their allowed values in display order.
PHASE_FIELDS: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "caption": {
        "caption_licensed": ("yes", "no", "uncertain"),
        "atomic_visual_claim": ("yes", "not_visual", "not_atomic", "uncertain"),
        "category_check": ("correct", "incorrect", "uncertain", "not_applicable"),
    },
    "image": {
        "image_support": ("yes", "no", "uncertain", "not_visual", "image_unavailable", "prefer_not_to_answer"),
    },
    "pair": {
        "salient_coverage": ("1", "2", "3", "4", "5"),
        "control_usefulness": ("1", "2", "3", "4", "5"),
    },
}
#: Fields with a consensus and adjudication (nominal, required); the 5-point scales are exploratory.
ADJUDICABLE_FIELDS: Dict[str, str] = {
    "caption_licensed": "caption",
    "atomic_visual_claim": "caption",
    "category_check": "caption",
    "image_support": "image",
}
SCALE_FIELDS = ("salient_coverage", "control_usefulness")
REASON_TAGS: Tuple[str, ...] = (
    "occluded", "too_small", "ambiguous_claim", "low_resolution", "hard_to_count", "text_unreadable",
    "partly_true", "subjective", "other",
)
MAX_NOTE_CHARS = 500
#: Image-support labels a missing image leaves on offer.
UNAVAILABLE_IMAGE_CHOICES: Tuple[str, ...] = ("image_unavailable", "prefer_not_to_answer")

#: Coarse participant profile: the only fields stored, each from a fixed list.
PROFILE_FIELDS: Dict[str, Tuple[str, ...]] = {
    "age_band": ("18-24", "25-34", "35-44", "45-54", "55-64", "65+", "prefer_not_to_say"),
    "language_group": ("native_english", "fluent_english", "other", "prefer_not_to_say"),
    "vision": ("normal", "corrected", "colour_vision_deficiency", "prefer_not_to_say"),
    "experience": ("none", "some_annotation", "expert", "prefer_not_to_say"),
}

LABELS: Dict[str, str] = {
    "caption_licensed": "Does the caption text state this claim?",
    "atomic_visual_claim": "Is it one atomic, visual claim?",
    "category_check": "Is the claim type right?",
    "corrected_category": "Which claim type is right?",
    "image_support": "Does the image show this claim?",
    "salient_coverage": "How much of the image's salient content does the caption cover? (1 = little, 5 = all)",
    "control_usefulness": "How useful would this caption be as a text-to-image prompt? (1 = useless, 5 = very)",
}

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")
_URL = re.compile(r"(?i)\b(?:https?://|ftp://|www\.)\S+|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|edu|gov|io|ai|co|uk|de|fr|info|me|ly)\b(?:/\S*)?")
_IPV4 = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
_PHONE = re.compile(r"(?<![\w.])\+?\d(?:[\s().-]*\d){6,}(?![\w.])")


def screen_text(text: str, field_name: str = "note") -> str:
    """Reject free text that holds an e-mail address, phone number, URL or IP address (§7 privacy)."""
    if not isinstance(text, str):
        raise InputError(f"expected text, got {type(text).__name__}", field=field_name)
    text = text.strip()
    if len(text) > MAX_NOTE_CHARS:
        raise InputError(f"is longer than {MAX_NOTE_CHARS} characters ({len(text)})", field=field_name)
    for what, rx in (("an e-mail address", _EMAIL), ("a URL", _URL), ("an IP address", _IPV4), ("a phone number", _PHONE)):
        if rx.search(text):
            raise InputError(f"looks like it contains {what}; notes must not hold personal or contact data", field=field_name)
    return text


def field_choices(phase: str, name: str, image_available: bool = True) -> Tuple[str, ...]:
    """Allowed values of a required field (``image_support`` shrinks when the image is missing)."""
    if name == "corrected_category":
        return CATEGORIES
    if phase == "image" and name == "image_support" and not image_available:
        return UNAVAILABLE_IMAGE_CHOICES
    try:
        return PHASE_FIELDS[phase][name]
    except KeyError:
        raise InputError(f"phase {phase!r} has no field {name!r}", field=name) from None


def validate_judgment(phase: str, values: Mapping[str, Any], *, item_category: Optional[str] = None) -> Dict[str, Any]:
    """Check one phase judgment and return it normalized (the columns of an annotation row).

    Raises :class:`InputError` naming the field for a missing, unknown or disallowed value.
    """
    if phase not in PHASES:
        raise InputError(f"unknown phase {phase!r}; phases are {list(PHASES)}", field="phase")
    values = dict(values)
    out: Dict[str, Any] = {}
    unavailable = bool(values.pop("image_unavailable", False))
    if phase == "pair" and unavailable:
        out["image_unavailable"] = 1
        for name in SCALE_FIELDS:
            if values.get(name) is not None:
                raise InputError("no scale value when the image is unavailable", field=name)
            values.pop(name, None)
    else:
        out["image_unavailable"] = 0
        for name, allowed in PHASE_FIELDS[phase].items():
            v = values.pop(name, None)
            if v is None or v == "":
                raise InputError(f"required in the {phase} phase (one of {list(allowed)})", field=name)
            if name in SCALE_FIELDS:
                if isinstance(v, bool) or str(v) not in allowed:
                    raise InputError(f"must be an integer 1-5, got {v!r}", field=name)
                out[name] = int(v)
            else:
                if v not in allowed:
                    raise InputError(f"{v!r} is not one of {list(allowed)}", field=name)
                out[name] = v
    if phase == "image" and out.get("image_support") == "image_unavailable":
        out["image_unavailable"] = 1
    cc = values.pop("corrected_category", None)
    if phase == "caption":
        if out["category_check"] == "incorrect":
            if cc not in CATEGORIES:
                raise InputError(f"required when category_check is 'incorrect' (one of {list(CATEGORIES)})",
                                 field="corrected_category")
            if item_category is not None and cc == item_category:
                raise InputError(f"must differ from the item's category {item_category!r}", field="corrected_category")
            out["corrected_category"] = cc
        elif cc is not None:
            raise InputError("only allowed when category_check is 'incorrect'", field="corrected_category")
    elif cc is not None:
        raise InputError("only allowed in the caption phase", field="corrected_category")
    conf = values.pop("confidence", None)
    if conf is not None:
        if isinstance(conf, bool) or str(conf) not in ("1", "2", "3", "4", "5"):
            raise InputError(f"must be an integer 1-5, got {conf!r}", field="confidence")
        out["confidence"] = int(conf)
    tags = values.pop("reason_tags", None) or []
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise InputError("must be a list of tags", field="reason_tags")
    for t in tags:
        if t not in REASON_TAGS:
            raise InputError(f"{t!r} is not one of {list(REASON_TAGS)}", field="reason_tags")
    out["reason_tags"] = sorted(set(tags), key=REASON_TAGS.index)
    note = values.pop("note", None)
    out["note"] = (screen_text(note) or None) if note else None
    el = values.pop("elapsed_ms", None)
    if el is not None:
        if isinstance(el, bool) or not isinstance(el, (int, float)) or el < 0:
            raise InputError(f"must be a non-negative number of milliseconds, got {el!r}", field="elapsed_ms")
        out["elapsed_ms"] = int(el)
    for name in values:
        raise InputError(f"not a field of the {phase} phase", field=name)
    return out


def validate_profile(profile: Mapping[str, Any]) -> Dict[str, str]:
    """Keep only the coarse allow-listed profile fields (§7 privacy); anything else is an error."""
    out: Dict[str, str] = {}
    for k, v in profile.items():
        if k not in PROFILE_FIELDS:
            raise InputError(f"not an allowed profile field (allowed: {sorted(PROFILE_FIELDS)})", field=k)
        if v not in PROFILE_FIELDS[k]:
            raise InputError(f"{v!r} is not one of {list(PROFILE_FIELDS[k])}", field=k)
        out[k] = v
    return out


@dataclass(frozen=True)
class Readiness:
    """Thresholds a study must meet before its numbers are reported (§7)."""

    min_substantive: int = 120
    min_per_type: int = 5
    min_per_stratum: int = 2
    bootstrap_resamples: int = 10_000
    bootstrap_seed: int = 1477


@dataclass(frozen=True)
class StudyConfig:
    """A study's frozen configuration (reference-spec §7 ``configs/eval/human_cbu_cc12m.yaml``).

    ``surface_groups`` maps a group name to its surfaces (empty: every surface is its own group);
    ``judges`` names the judges whose answers an item must carry (empty: those the rows name).
    ``sampling``: ``reference`` (§7; default) or ``disagreement_first``: each stratum's pool splits
    into claims on which the study judges disagree or any answered "uncertain" and claims they agree
    on; ``disagreement_share`` (in (0, 1), default 0.5) of the stratum's ``claims_per_stratum`` are
    drawn from the disagreement sub-pool (each non-empty sub-pool gets at least one item, a short
    sub-pool's remainder goes to the other), and every item carries its sub-stratum's inclusion
    probability and weight (:mod:`capaudit.human.sampling`).
    """

    study_id: str
    protocol: str = PROTOCOL
    mode: str = "real"
    namespace: str = ""
    seed: int = 1477
    token_budget: int = 64
    claims_per_stratum: int = 30
    repeat_fraction: float = 0.05
    labels_per_item: int = 2
    participants: int = 20
    target_items: int = 50
    extension_batch: int = 5
    max_items: int = 70
    overlap_per_stratum: int = 5
    adjudication_required: bool = True
    require_all_strata: bool = True
    surface_groups: Dict[str, List[str]] = field(default_factory=dict)
    judges: List[str] = field(default_factory=list)
    image_root: str = ""
    session_ttl_hours: float = 12.0
    batch_size: int = 10
    sampling: str = "reference"
    disagreement_share: float = 0.5
    consent_version: str = "v1"
    readiness: Readiness = field(default_factory=Readiness)

    def __post_init__(self) -> None:
        where = f"study config ({self.study_id!r})"
        if isinstance(self.readiness, Mapping):
            object.__setattr__(self, "readiness", Readiness(**self.readiness))
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", self.study_id or ""):
            raise InputError(f"{where}: study_id must be 1-100 letters, digits, '_', '.', '-'", field="study_id")
        if self.mode not in ("real", "simulated"):
            raise InputError(f"{where}: mode must be 'real' or 'simulated'", field="mode")
        for name in ("claims_per_stratum", "labels_per_item", "target_items", "max_items", "participants"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{where}: must be >= 1", field=name)
        for name in ("overlap_per_stratum", "extension_batch", "batch_size"):
            if int(getattr(self, name)) < 0:
                raise InputError(f"{where}: must be >= 0", field=name)
        if self.max_items < self.target_items:
            raise InputError(f"{where}: max_items < target_items", field="max_items")
        if not 0.0 <= float(self.repeat_fraction) <= 1.0:
            raise InputError(f"{where}: must lie in [0, 1]", field="repeat_fraction")
        if not 0 < float(self.session_ttl_hours) <= 24:
            raise InputError(f"{where}: sessions last at most 24 h", field="session_ttl_hours")
        if self.sampling not in SAMPLING_DESIGNS:
            raise InputError(f"{where}: sampling must be one of {list(SAMPLING_DESIGNS)}, got {self.sampling!r}",
                             field="sampling")
        share = self.disagreement_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < float(share) < 1.0:
            raise InputError(f"{where}: disagreement_share must be a number strictly between 0 and 1, got {share!r}",
                             field="disagreement_share")
        if self.sampling == "disagreement_first" and int(self.claims_per_stratum) < 2:
            raise InputError(f"{where}: sampling 'disagreement_first' needs claims_per_stratum >= 2 (one item per "
                             "sub-stratum at least)", field="claims_per_stratum")
        seen: Dict[str, str] = {}
        for g, members in self.surface_groups.items():
            if not isinstance(members, (list, tuple)) or not all(isinstance(m, str) for m in members):
                raise InputError(f"{where}: group {g!r} must list surface names", field="surface_groups")
            for m in members:
                if m in seen:
                    raise InputError(f"{where}: surface {m!r} is in groups {seen[m]!r} and {g!r}", field="surface_groups")
                seen[m] = g

    @property
    def item_namespace(self) -> str:
        return self.namespace or self.study_id

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["readiness"] = dataclasses.asdict(self.readiness)
        return d

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any], source: str = "<config>") -> "StudyConfig":
        """Build from a params ``human`` section; unknown keys are errors (keys only the stage reads are skipped)."""
        known = {f.name for f in dataclasses.fields(cls)}
        stage_only = {"db", "judged_claims", "simulate", "slices", "out"}
        kwargs: Dict[str, Any] = {}
        for k, v in d.items():
            if k in stage_only:
                continue
            if k not in known:
                raise InputError(f"unknown study setting (known: {sorted(known | stage_only)})", path=source, field=k)
            if k == "readiness":
                rknown = {f.name for f in dataclasses.fields(Readiness)}
                for rk in (v or {}):
                    if rk not in rknown:
                        raise InputError(f"unknown readiness threshold (known: {sorted(rknown)})", path=source,
                                         field=f"readiness.{rk}")
                v = Readiness(**(v or {}))
            elif k == "surface_groups":
                v = {str(g): list(m) for g, m in (v or {}).items()}
            elif k == "judges":
                v = [str(j) for j in (v or [])]
            kwargs[k] = v
        if "study_id" not in kwargs:
            raise InputError("a study needs a study_id", path=source, field="study_id")
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise InputError(f"bad study config ({exc})", path=source) from None
        except InputError as exc:  # a value check: name the file too
            if exc.path is not None:
                raise
            raise InputError(exc.message, path=source, field=exc.field) from None

    def group_of(self, surface: str) -> Optional[str]:
        """The surface group of ``surface`` (itself when no groups are configured; ``None`` if ungrouped)."""
        if not self.surface_groups:
            return surface
        for g, members in self.surface_groups.items():
            if surface in members:
                return g
        return None


def option_label(value: str) -> str:
    return value.replace("_", " ")


__all__: Sequence[str] = (
    "ADJUDICABLE_FIELDS", "CATEGORIES", "JUDGE_ANSWERS", "LABELS", "PHASES", "PHASE_FIELDS", "PROFILE_FIELDS",
    "PROTOCOL", "REASON_TAGS", "Readiness", "SAMPLING_DESIGNS", "SCALE_FIELDS", "StudyConfig", "UNAVAILABLE_IMAGE_CHOICES",
    "field_choices", "option_label", "screen_text", "validate_judgment", "validate_profile",
)
