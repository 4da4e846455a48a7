"""Per-judge VQA summary schema (reference-spec §5.3): one judge's answers over one response file.

File layout (``vqa_summary_<judge>.json``)::

    {"input"?, "include"?, "latest_by_request": bool, "responses", "ok", "bad",
     "surfaces": {"<surface>": {"responses", "ok", "bad"?, "questions", "yes", "no", "uncertain",
                                 "yes_rate", "no_rate", "uncertain_rate",
                                 "support_rate", "risk_rate", "uncertainty_rate"}},
     "categories": {"<type>": {"questions", "yes", "no", "uncertain", <six rates>}},
     "examples": {"bad_response"|"no"|"uncertain": [ {surface, caption_id, category, question,
                                                      answer, confidence, evidence}, ... ]}}

``support_rate`` = yes/questions, ``risk_rate`` = no/questions. The answer-count keys keep the
order they had in the file (the reference wrote a ``Counter`` in first-seen order), so a
read → write round trip is byte-identical; released copies were re-dumped with
``ensure_ascii=True`` (§10), so :func:`format_vqa_summary` takes ``ensure_ascii``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._common import (
    ANSWERS,
    UNIT_CATEGORIES,
    PathLike,
    as_float,
    as_int,
    check_keys,
    check_ratio,
    dump_json,
    get_field,
    load_json,
    ratio,
    require_mapping,
    write_text,
)

RATE_FIELDS: Tuple[str, ...] = (
    "yes_rate",
    "no_rate",
    "uncertain_rate",
    "support_rate",
    "risk_rate",
    "uncertainty_rate",
)
_RATE_NUM = {
    "yes_rate": "yes",
    "no_rate": "no",
    "uncertain_rate": "uncertain",
    "support_rate": "yes",
    "risk_rate": "no",
    "uncertainty_rate": "uncertain",
}
EXAMPLE_KINDS: Tuple[str, ...] = ("bad_response", "no", "uncertain")
MAX_EXAMPLES = 20


@dataclass(frozen=True)
class AnswerCounts:
    """Question and answer counts with their rates (§5.3).

    ``answer_keys`` is the order (and presence) of the answer keys in the file; rates are always
    recomputed from the counts and checked against a file's stored rates on read.
    """

    questions: int
    yes: int
    no: int
    uncertain: int
    answer_keys: Tuple[str, ...] = field(default=ANSWERS, compare=False)

    def __post_init__(self) -> None:
        for k in ("questions",) + ANSWERS:
            as_int(getattr(self, k), k)
        if self.yes + self.no + self.uncertain != self.questions:
            raise ValueError(
                f"questions {self.questions} != yes {self.yes} + no {self.no} + uncertain {self.uncertain}"
            )
        if sorted(self.answer_keys) != sorted(set(self.answer_keys)) or not set(self.answer_keys) <= set(ANSWERS):
            raise ValueError(f"answer_keys {self.answer_keys!r} must be distinct members of {ANSWERS}")
        for a in ANSWERS:
            if a not in self.answer_keys and getattr(self, a):
                raise ValueError(f"answer {a!r} has a non-zero count but is not in answer_keys")

    @property
    def support_rate(self) -> float:
        return ratio(self.yes, self.questions)

    @property
    def risk_rate(self) -> float:
        return ratio(self.no, self.questions)

    @property
    def uncertainty_rate(self) -> float:
        return ratio(self.uncertain, self.questions)

    def rates(self) -> Dict[str, float]:
        return {name: ratio(getattr(self, _RATE_NUM[name]), self.questions) for name in RATE_FIELDS}

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"questions": self.questions}
        out.update({a: getattr(self, a) for a in self.answer_keys})
        out.update(self.rates())
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], loc: str) -> "AnswerCounts":
        questions = as_int(get_field(d, "questions", loc), f"{loc}.questions")
        keys = tuple(k for k in d if k in ANSWERS)
        counts = {a: (as_int(d[a], f"{loc}.{a}") if a in d else 0) for a in ANSWERS}
        if sum(counts.values()) != questions:
            raise ValueError(
                f"{loc}.questions: {questions} != yes {counts['yes']} + no {counts['no']} + "
                f"uncertain {counts['uncertain']}"
            )
        out = cls(questions=questions, answer_keys=keys, **counts)
        for name in RATE_FIELDS:
            value = as_float(get_field(d, name, loc), f"{loc}.{name}")
            check_ratio(value, counts[_RATE_NUM[name]], questions, f"{loc}.{name}")
        return out


@dataclass(frozen=True)
class VqaSurface:
    """Per-surface block: requests seen, ok, optional bad, and the answer counts (§5.3)."""

    responses: int
    ok: int
    counts: AnswerCounts
    bad: Optional[int] = None

    @property
    def supported_per_response(self) -> float:
        """yes / responses (note: ``responses`` counts bad rows too, §14 G5)."""
        return ratio(self.counts.yes, self.responses)

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"responses": self.responses, "ok": self.ok}
        if self.bad is not None:
            out["bad"] = self.bad
        out.update(self.counts.to_dict())
        return out

    @classmethod
    def from_dict(cls, d: Any, loc: str) -> "VqaSurface":
        d = require_mapping(d, loc)
        check_keys(d, ("responses", "ok", "bad", "questions") + ANSWERS + RATE_FIELDS, loc)
        responses = as_int(get_field(d, "responses", loc), f"{loc}.responses")
        ok = as_int(get_field(d, "ok", loc), f"{loc}.ok")
        if ok > responses:
            raise ValueError(f"{loc}.ok: {ok} > responses {responses}")
        bad = as_int(d["bad"], f"{loc}.bad") if "bad" in d else None
        return cls(responses=responses, ok=ok, bad=bad, counts=AnswerCounts.from_dict(d, loc))


@dataclass(frozen=True)
class VqaSummary:
    """A whole per-judge VQA summary (§5.3)."""

    responses: int
    ok: int
    bad: int
    surfaces: Dict[str, VqaSurface]
    categories: Dict[str, AnswerCounts]
    examples: Dict[str, List[Dict[str, Any]]] = field(default_factory=dict)
    latest_by_request: bool = True
    input: Any = None
    include: Any = None

    def surface(self, name: str) -> VqaSurface:
        try:
            return self.surfaces[name]
        except KeyError:
            raise KeyError(f"VQA summary has no surface {name!r}; has {list(self.surfaces)}") from None

    @property
    def only_surface(self) -> VqaSurface:
        if len(self.surfaces) != 1:
            raise ValueError(f"VQA summary has {len(self.surfaces)} surfaces {list(self.surfaces)}, expected one")
        return next(iter(self.surfaces.values()))

    def validate(self, loc: str = "<vqa summary>") -> None:
        if self.ok + self.bad != self.responses:
            raise ValueError(f"{loc}: responses {self.responses} != ok {self.ok} + bad {self.bad}")
        if sum(s.responses for s in self.surfaces.values()) != self.responses:
            raise ValueError(f"{loc}: responses {self.responses} != sum of surfaces.<name>.responses")
        bad_cats = [c for c in self.categories if c not in UNIT_CATEGORIES]
        if bad_cats:
            raise ValueError(f"{loc}: categories: unknown type(s) {bad_cats}; expected {list(UNIT_CATEGORIES)}")
        if self.categories:
            for a in ("questions",) + ANSWERS:
                per_cat = sum(getattr(c, a) for c in self.categories.values())
                per_surf = sum(getattr(s.counts, a) for s in self.surfaces.values())
                if per_cat != per_surf:
                    raise ValueError(f"{loc}: categories: sum of '{a}' {per_cat} != sum over surfaces {per_surf}")
        for kind, items in self.examples.items():
            if kind not in EXAMPLE_KINDS:
                raise ValueError(f"{loc}: examples.{kind}: unknown kind; expected one of {list(EXAMPLE_KINDS)}")
            if not isinstance(items, list) or len(items) > MAX_EXAMPLES:
                raise ValueError(f"{loc}: examples.{kind}: expected a list of at most {MAX_EXAMPLES} items")
            for i, item in enumerate(items):
                require_mapping(item, f"{loc}: examples.{kind}[{i}]")

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.input is not None:
            out["input"] = self.input
        if self.include is not None:
            out["include"] = self.include
        out.update(
            latest_by_request=self.latest_by_request,
            responses=self.responses,
            ok=self.ok,
            bad=self.bad,
            surfaces={n: s.to_dict() for n, s in self.surfaces.items()},
            categories={n: c.to_dict() for n, c in self.categories.items()},
            examples=self.examples,
        )
        return out


def parse_vqa_summary(obj: Any, source: Optional[PathLike] = None) -> VqaSummary:
    """Validate a decoded per-judge VQA summary; errors name ``source`` and the field."""
    loc = str(source) if source is not None else "<vqa summary>"
    d = require_mapping(obj, loc)
    check_keys(
        d, ("input", "include", "latest_by_request", "responses", "ok", "bad", "surfaces", "categories", "examples"), loc
    )
    latest = get_field(d, "latest_by_request", loc)
    if not isinstance(latest, bool):
        raise ValueError(f"{loc}: latest_by_request: expected true/false, got {latest!r}")
    surfaces_raw = require_mapping(get_field(d, "surfaces", loc), f"{loc}: surfaces")
    cats_raw = require_mapping(get_field(d, "categories", loc), f"{loc}: categories")
    examples = require_mapping(d.get("examples", {}), f"{loc}: examples")
    summary = VqaSummary(
        responses=as_int(get_field(d, "responses", loc), f"{loc}: responses"),
        ok=as_int(get_field(d, "ok", loc), f"{loc}: ok"),
        bad=as_int(get_field(d, "bad", loc), f"{loc}: bad"),
        surfaces={str(n): VqaSurface.from_dict(v, f"{loc}: surfaces.{n}") for n, v in surfaces_raw.items()},
        categories={
            str(n): AnswerCounts.from_dict(require_mapping(v, f"{loc}: categories.{n}"), f"{loc}: categories.{n}")
            for n, v in cats_raw.items()
        },
        examples={str(k): v for k, v in examples.items()},
        latest_by_request=latest,
        input=d.get("input"),
        include=d.get("include"),
    )
    summary.validate(loc)
    return summary


def read_vqa_summary(path: PathLike) -> VqaSummary:
    """Read and validate a per-judge VQA summary (§5.3)."""
    return parse_vqa_summary(load_json(path), Path(path))


def format_vqa_summary(summary: VqaSummary, ensure_ascii: bool = False) -> str:
    """JSON text: indent 2, trailing newline; ``ensure_ascii=True`` reproduces the released copies."""
    summary.validate()
    return dump_json(summary.to_dict(), indent=2, ensure_ascii=ensure_ascii, trailing_newline=True)


def write_vqa_summary(summary: VqaSummary, path: PathLike, ensure_ascii: bool = False) -> Path:
    """Validate and write a per-judge VQA summary; returns the path."""
    return write_text(format_vqa_summary(summary, ensure_ascii=ensure_ascii), path)
