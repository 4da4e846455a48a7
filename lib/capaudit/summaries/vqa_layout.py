"""Layout of judged slices for the paper layer: judges, surfaces, roles, comparisons (``vqa_layout.json``).

The reference study's table layout (CC12M and four paired corpora, Qwen and Gemma judges) is
fixed in :mod:`capaudit.paper.layout`. Our own judges stage (:mod:`capaudit.judges`) writes this
file beside its cells, so the same paper layer lays out any run's cells::

    {"judges": [{"name", "short", "label", "backend": "offline"|"model", "kinds"?: [model card kinds]}],
     "slices": [{"name", "surfaces": [{"name", "label", "role": "ours"|"ref"|"control"|"probe",
                                        "policy"?, "corpus"?, "eligibility"?: float, "budget"?: int,
                                        "claimed"?: {"captions", "cbu_per_cap", "cbu_per_100_lex"}}]}],
     "comparisons": [{"key", "label", "slice", "ours", "ref"}],
     "agreement_slice": "<slice>" | null,
     "denominators_slice": "<slice>" | null}

``role``: ``ours`` / ``ref`` are pooled in the by-type table (as Ours / Refs), ``control`` and
``probe`` surfaces are left out of pools. ``kinds``: the kinds of the model cards that answered the
judge (:mod:`capaudit.llm.cards`: heuristic, random-vision test model, real, unknown), as recorded
beside its stores; a table's caveats follow from them. ``policy`` (with ``corpus``) marks a surface for the
policy-control table. ``key`` is letters only (it names TeX macros).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from capaudit.io.atomic import write_json_atomic

from ._common import PathLike, as_float, as_int, as_str, check_keys, get_field, load_json, require_mapping

ROLES = ("ours", "ref", "control", "probe")
BACKENDS = ("offline", "model")
_KEY = re.compile(r"^[A-Za-z]+$")


@dataclass(frozen=True)
class LayoutJudge:
    name: str
    short: str
    label: str
    backend: str = "model"
    kinds: Tuple[str, ...] = ()

    @property
    def offline(self) -> bool:
        return self.backend == "offline"

    @property
    def stand_in_kinds(self) -> Tuple[str, ...]:
        """The non-real kinds that answered this judge (an offline judge recorded before model cards
        counts as a heuristic)."""
        kinds = tuple(k for k in self.kinds if k != "real")
        return kinds or (("heuristic",) if self.offline and not self.kinds else ())

    @property
    def stand_in_note(self) -> str:
        """What a reader must know about who answered (empty for a real model)."""
        notes = {"heuristic": "an offline heuristic, not a VLM",
                 "random-vision test model": "a random-vision test model, its answers not about the images",
                 "unknown": "who answered is unknown (no model card)"}
        return "; ".join(notes[k] for k in self.stand_in_kinds if k in notes)


@dataclass(frozen=True)
class LayoutSurface:
    name: str
    label: str
    role: str = "ours"
    policy: Optional[str] = None
    corpus: Optional[str] = None
    eligibility: Optional[float] = None
    budget: Optional[int] = None
    claimed: Optional[Dict[str, float]] = None


@dataclass(frozen=True)
class LayoutSlice:
    name: str
    surfaces: List[LayoutSurface]

    def surface(self, name: str) -> LayoutSurface:
        for s in self.surfaces:
            if s.name == name:
                return s
        raise KeyError(f"slice {self.name!r} has no surface {name!r}; has {[s.name for s in self.surfaces]}")


@dataclass(frozen=True)
class Comparison:
    key: str
    label: str
    slice: str
    ours: str
    ref: str


@dataclass(frozen=True)
class VqaLayout:
    judges: List[LayoutJudge]
    slices: List[LayoutSlice]
    comparisons: List[Comparison] = field(default_factory=list)
    agreement_slice: Optional[str] = None
    denominators_slice: Optional[str] = None

    def slice(self, name: str) -> LayoutSlice:
        for s in self.slices:
            if s.name == name:
                return s
        raise KeyError(f"layout has no slice {name!r}; has {[s.name for s in self.slices]}")

    def judge(self, name: str) -> LayoutJudge:
        for j in self.judges:
            if j.name == name:
                return j
        raise KeyError(f"layout has no judge {name!r}; has {[j.name for j in self.judges]}")

    @property
    def any_offline(self) -> bool:
        return any(j.offline for j in self.judges)

    @property
    def judge_kinds(self) -> Tuple[str, ...]:
        """The stand-in kinds that answered any judge, judge by judge (:attr:`LayoutJudge.stand_in_kinds`;
        sorted, empty when every judge is a real model)."""
        return tuple(sorted({k for j in self.judges for k in j.stand_in_kinds}))

    def validate(self, loc: str = "<vqa layout>") -> None:
        if not self.judges:
            raise ValueError(f"{loc}: judges: at least one judge is needed")
        for i, j in enumerate(self.judges):
            if j.backend not in BACKENDS:
                raise ValueError(f"{loc}: judges[{i}].backend: expected one of {BACKENDS}, got {j.backend!r}")
        names = [s.name for s in self.slices]
        if len(set(names)) != len(names):
            raise ValueError(f"{loc}: slices: duplicate slice names {names}")
        for sl in self.slices:
            for i, s in enumerate(sl.surfaces):
                if s.role not in ROLES:
                    raise ValueError(f"{loc}: slices.{sl.name}.surfaces[{i}].role: expected one of {ROLES}, got {s.role!r}")
        for i, c in enumerate(self.comparisons):
            if not _KEY.match(c.key):
                raise ValueError(f"{loc}: comparisons[{i}].key: letters only (TeX macros), got {c.key!r}")
            sl = self.slice(c.slice)
            sl.surface(c.ours)
            sl.surface(c.ref)
        for attr in ("agreement_slice", "denominators_slice"):
            v = getattr(self, attr)
            if v is not None:
                self.slice(v)

    def to_dict(self) -> Dict[str, Any]:
        def surf(s: LayoutSurface) -> Dict[str, Any]:
            d: Dict[str, Any] = {"name": s.name, "label": s.label, "role": s.role}
            for k in ("policy", "corpus", "eligibility", "budget", "claimed"):
                if getattr(s, k) is not None:
                    d[k] = getattr(s, k)
            return d

        return {
            "judges": [{"name": j.name, "short": j.short, "label": j.label, "backend": j.backend}
                       | ({"kinds": list(j.kinds)} if j.kinds else {}) for j in self.judges],
            "slices": [{"name": sl.name, "surfaces": [surf(s) for s in sl.surfaces]} for sl in self.slices],
            "comparisons": [{"key": c.key, "label": c.label, "slice": c.slice, "ours": c.ours, "ref": c.ref}
                            for c in self.comparisons],
            "agreement_slice": self.agreement_slice,
            "denominators_slice": self.denominators_slice,
        }


def parse_vqa_layout(obj: Any, source: Optional[PathLike] = None) -> VqaLayout:
    """Validate a decoded layout; errors name ``source`` and the field."""
    loc = str(source) if source is not None else "<vqa layout>"
    d = require_mapping(obj, loc)
    check_keys(d, ("judges", "slices", "comparisons", "agreement_slice", "denominators_slice"), loc)
    judges = []
    for i, j in enumerate(get_field(d, "judges", loc) or []):
        sub = f"{loc}: judges[{i}]"
        j = require_mapping(j, sub)
        check_keys(j, ("name", "short", "label", "backend", "kinds"), sub)
        name = as_str(get_field(j, "name", sub), f"{sub}.name")
        judges.append(LayoutJudge(name, as_str(j.get("short", name), f"{sub}.short"),
                                  as_str(j.get("label", name), f"{sub}.label"), as_str(j.get("backend", "model"), f"{sub}.backend"),
                                  tuple(as_str(k, f"{sub}.kinds") for k in (j.get("kinds") or ()))))
    slices = []
    for i, sl in enumerate(get_field(d, "slices", loc) or []):
        sub = f"{loc}: slices[{i}]"
        sl = require_mapping(sl, sub)
        check_keys(sl, ("name", "surfaces"), sub)
        surfaces = []
        for k, s in enumerate(get_field(sl, "surfaces", sub) or []):
            ss = f"{sub}.surfaces[{k}]"
            s = require_mapping(s, ss)
            check_keys(s, ("name", "label", "role", "policy", "corpus", "eligibility", "budget", "claimed"), ss)
            name = as_str(get_field(s, "name", ss), f"{ss}.name")
            claimed = s.get("claimed")
            if claimed is not None:
                claimed = {str(k2): as_float(v, f"{ss}.claimed.{k2}") for k2, v in require_mapping(claimed, f"{ss}.claimed").items()}
            surfaces.append(LayoutSurface(
                name=name, label=as_str(s.get("label", name), f"{ss}.label"), role=as_str(s.get("role", "ours"), f"{ss}.role"),
                policy=None if s.get("policy") is None else as_str(s["policy"], f"{ss}.policy"),
                corpus=None if s.get("corpus") is None else as_str(s["corpus"], f"{ss}.corpus"),
                eligibility=None if s.get("eligibility") is None else as_float(s["eligibility"], f"{ss}.eligibility"),
                budget=None if s.get("budget") is None else as_int(s["budget"], f"{ss}.budget"),
                claimed=claimed,
            ))
        slices.append(LayoutSlice(as_str(get_field(sl, "name", sub), f"{sub}.name"), surfaces))
    comparisons = []
    for i, c in enumerate(d.get("comparisons") or []):
        sub = f"{loc}: comparisons[{i}]"
        c = require_mapping(c, sub)
        check_keys(c, ("key", "label", "slice", "ours", "ref"), sub)
        comparisons.append(Comparison(*(as_str(get_field(c, k, sub), f"{sub}.{k}") for k in ("key", "label", "slice", "ours", "ref"))))
    out = VqaLayout(judges, slices, comparisons, d.get("agreement_slice"), d.get("denominators_slice"))
    out.validate(loc)
    return out


def read_vqa_layout(path: PathLike) -> VqaLayout:
    """Read and validate ``vqa_layout.json``."""
    return parse_vqa_layout(load_json(path), Path(path))


def write_vqa_layout(layout: VqaLayout, path: PathLike) -> Path:
    """Validate and write ``vqa_layout.json`` atomically (indent 2, trailing newline)."""
    layout.validate(str(path))
    return write_json_atomic(path, layout.to_dict())


__all__ = ["ROLES", "LayoutJudge", "LayoutSurface", "LayoutSlice", "Comparison", "VqaLayout",
           "parse_vqa_layout", "read_vqa_layout", "write_vqa_layout"]
