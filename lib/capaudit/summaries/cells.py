"""By-category VQA cells schema (reference-spec §5.4): ``cbu_vqa_by_category_b64.json``.

Layout::

    {"cells": [{"slice", "judge", "surface",
                "all_types": CellStats, "excluding_count_relation": CellStats,
                "by_type": {"<type>": {"yes", "no", "uncertain"}}}, ...],
     "cc12m_judge_agreement": {"__all__"|"<type>": {"joined", "exact", "exact_rate"}},
     "cc12m_extraction": {"<surface>": {"requests", "valid", "valid_zero_claims", "invalid",
                                        "invalid_at_token_cap"}},
     "judge_agreement"?: {"<slice>": {"judges": [a, b], "by_type": {"__all__"|"<type>": Agreement}}},
     "judges_agreement"?: {"<slice>": {"judges": [j1, j2, ...], "labels": ["yes", "no", "uncertain"],
                                       "by_type": {"__all__"|"<type>": {
                                           "questions", "exact_all", "exact_all_rate",
                                           "fleiss_kappa", "gwet_ac1", "krippendorff_alpha",
                                           "pairs": {"<a>|<b>": {"joined", "exact", "exact_rate",
                                                                 "cohen_kappa"}}}}}},
     "extraction"?: {"<slice>": {"<surface>": Extraction}}}

The last three keys are written by our own judges stage (``capaudit.judges``) for any slice; the
reference file has only the ``cc12m_*`` blocks. A file written by the stage omits empty
``cc12m_*`` blocks, and the reference layout never has the new keys, so reference files still
round-trip byte for byte; files written before ``judges_agreement`` existed still load.

``judge_agreement`` is the reference study's exact agreement of the *first two* judges.
``judges_agreement`` (:class:`JudgesAgreement`, two or more judges) covers *all* judges of the slice
on the questions every judge answered (joined on question id over the captions every judge
answered): ``questions``, ``exact_all`` (all judges gave the same answer) and its rate, Fleiss' κ,
Gwet's AC1 (``q`` = 3 labels) and Krippendorff's nominal α over all judges, and per judge pair
(``"<a>|<b>"``, judges in the listed order) exact agreement and Cohen's κ on the same questions
(``joined`` = ``questions``). A statistic that is undefined (e.g. one label only) is ``null``; a type
with no joined question is left out (``__all__`` too), so no entry is a number from no data.

A cell is one (slice, judge, surface side) over the requests both judges answered.
``supported_cap`` = yes/responses, ``risk`` = no/questions, ``uncertain_rate`` =
uncertain/questions; ``*_std`` are caption-level bootstrap stds (§5.4, :mod:`capaudit.stats`).
The reader checks every G2 identity and names the cell that breaks one. Written with indent 2 and
**no** trailing newline (§10), so a reference file round-trips byte-identically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._common import (
    ANSWERS,
    UNIT_CATEGORIES,
    PathLike,
    as_float,
    as_int,
    as_str,
    check_keys,
    check_ratio,
    dump_json,
    get_field,
    load_json,
    ratio,
    require_mapping,
    write_text,
)

QWEN_JUDGE = "Qwen3.5-397B-A17B-FP8"
GEMMA_JUDGE = "Gemma-4-31B-IT"
JUDGES: Tuple[str, ...] = (QWEN_JUDGE, GEMMA_JUDGE)
#: Types dropped by the ``excluding_count_relation`` view.
EXCLUDED_TYPES: Tuple[str, ...] = ("count", "relation")
STAT_FIELDS: Tuple[str, ...] = (
    "responses",
    "questions",
    "yes",
    "no",
    "uncertain",
    "supported_cap",
    "risk",
    "uncertain_rate",
    "supported_cap_std",
    "risk_std",
)
EXTRACTION_FIELDS: Tuple[str, ...] = ("requests", "valid", "valid_zero_claims", "invalid", "invalid_at_token_cap")
AGREEMENT_ALL = "__all__"


@dataclass(frozen=True)
class CellStats:
    """Counts, rates and bootstrap stds of one cell view (§5.4)."""

    responses: int
    questions: int
    yes: int
    no: int
    uncertain: int
    supported_cap: float
    risk: float
    uncertain_rate: float
    supported_cap_std: float
    risk_std: float

    @classmethod
    def from_counts(
        cls, responses: int, yes: int, no: int, uncertain: int, supported_cap_std: float, risk_std: float
    ) -> "CellStats":
        """Derive ``questions`` and the rates from answer counts (§5.4)."""
        q = yes + no + uncertain
        return cls(
            responses=responses,
            questions=q,
            yes=yes,
            no=no,
            uncertain=uncertain,
            supported_cap=ratio(yes, responses),
            risk=ratio(no, q),
            uncertain_rate=ratio(uncertain, q),
            supported_cap_std=float(supported_cap_std),
            risk_std=float(risk_std),
        )

    def validate(self, loc: str) -> None:
        for k in STAT_FIELDS[:5]:
            as_int(getattr(self, k), f"{loc}.{k}")
        if self.questions != self.yes + self.no + self.uncertain:
            raise ValueError(
                f"{loc}.questions: {self.questions} != yes {self.yes} + no {self.no} + uncertain {self.uncertain}"
            )
        check_ratio(self.supported_cap, self.yes, self.responses, f"{loc}.supported_cap")
        check_ratio(self.risk, self.no, self.questions, f"{loc}.risk")
        check_ratio(self.uncertain_rate, self.uncertain, self.questions, f"{loc}.uncertain_rate")
        for k in ("supported_cap_std", "risk_std"):
            if as_float(getattr(self, k), f"{loc}.{k}") < 0:
                raise ValueError(f"{loc}.{k}: must be >= 0, got {getattr(self, k)}")

    def to_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in STAT_FIELDS}

    @classmethod
    def from_dict(cls, d: Any, loc: str) -> "CellStats":
        d = require_mapping(d, loc)
        check_keys(d, STAT_FIELDS, loc)
        vals: Dict[str, Any] = {}
        for k in STAT_FIELDS:
            v = get_field(d, k, loc)
            vals[k] = as_int(v, f"{loc}.{k}") if k in STAT_FIELDS[:5] else as_float(v, f"{loc}.{k}")
        out = cls(**vals)
        out.validate(loc)
        return out


@dataclass(frozen=True)
class TypeCounts:
    """Answer counts of one claim type inside a cell."""

    yes: int
    no: int
    uncertain: int

    @property
    def questions(self) -> int:
        return self.yes + self.no + self.uncertain

    def to_dict(self) -> Dict[str, int]:
        return {"yes": self.yes, "no": self.no, "uncertain": self.uncertain}


@dataclass(frozen=True)
class Cell:
    """One (slice, judge, surface) cell of §5.4."""

    slice: str
    judge: str
    surface: str
    all_types: CellStats
    excluding_count_relation: CellStats
    by_type: Dict[str, TypeCounts]

    @property
    def key(self) -> Tuple[str, str, str]:
        return (self.slice, self.judge, self.surface)

    @property
    def label(self) -> str:
        return f"cell ({self.slice}, {self.judge}, {self.surface})"

    def validate(self, loc: str = "") -> None:
        """G2 identities: stats arithmetic, by-type sums, excluding = all minus count and relation."""
        loc = f"{loc}{self.label}" if loc else self.label
        self.all_types.validate(f"{loc}.all_types")
        self.excluding_count_relation.validate(f"{loc}.excluding_count_relation")
        unknown = [t for t in self.by_type if t not in UNIT_CATEGORIES]
        if unknown:
            raise ValueError(f"{loc}.by_type: unknown type(s) {unknown}")
        for a in ANSWERS:
            total = sum(getattr(c, a) for c in self.by_type.values())
            if total != getattr(self.all_types, a):
                raise ValueError(f"{loc}.by_type: sum of '{a}' {total} != all_types.{a} {getattr(self.all_types, a)}")
            kept = sum(getattr(c, a) for t, c in self.by_type.items() if t not in EXCLUDED_TYPES)
            if kept != getattr(self.excluding_count_relation, a):
                raise ValueError(
                    f"{loc}.excluding_count_relation.{a}: {getattr(self.excluding_count_relation, a)} != "
                    f"all_types minus count/relation {kept}"
                )
        if self.excluding_count_relation.responses != self.all_types.responses:
            raise ValueError(
                f"{loc}.excluding_count_relation.responses: {self.excluding_count_relation.responses} != "
                f"all_types.responses {self.all_types.responses}"
            )

    def to_dict(self) -> Dict[str, Any]:
        return {
            "slice": self.slice,
            "judge": self.judge,
            "surface": self.surface,
            "all_types": self.all_types.to_dict(),
            "excluding_count_relation": self.excluding_count_relation.to_dict(),
            "by_type": {t: c.to_dict() for t, c in self.by_type.items()},
        }


@dataclass(frozen=True)
class Agreement:
    """Exact agreement of the two judges on joined question ids."""

    joined: int
    exact: int
    exact_rate: float

    def to_dict(self) -> Dict[str, Any]:
        return {"joined": self.joined, "exact": self.exact, "exact_rate": self.exact_rate}


@dataclass(frozen=True)
class Extraction:
    """Claim-extraction outcome for one CC12M surface (§5.4 ``cc12m_extraction``)."""

    requests: int
    valid: int
    valid_zero_claims: int
    invalid: int
    invalid_at_token_cap: int

    def to_dict(self) -> Dict[str, int]:
        return {k: getattr(self, k) for k in EXTRACTION_FIELDS}


@dataclass(frozen=True)
class SliceAgreement:
    """Exact agreement of two judges on one slice, joined on question id (§5.4), per type and ``__all__``."""

    judges: Tuple[str, str]
    by_type: Dict[str, Agreement]

    def to_dict(self) -> Dict[str, Any]:
        return {"judges": list(self.judges), "by_type": {n: a.to_dict() for n, a in self.by_type.items()}}


#: The labels of :class:`JudgesAgreement` (answer codes 0, 1, 2).
AGREEMENT_LABELS: Tuple[str, ...] = ANSWERS
MULTI_FIELDS: Tuple[str, ...] = ("questions", "exact_all", "exact_all_rate", "fleiss_kappa", "gwet_ac1",
                                 "krippendorff_alpha", "pairs")
PAIR_FIELDS: Tuple[str, ...] = ("joined", "exact", "exact_rate", "cohen_kappa")


def pair_key(a: str, b: str) -> str:
    """The ``pairs`` key of judges ``a`` and ``b``: ``"a|b"``."""
    return f"{a}|{b}"


def pair_keys(judges: Sequence[str]) -> List[str]:
    """``pairs`` keys of all judge pairs, in the listed order (``j1|j2``, ``j1|j3``, ``j2|j3``, ...)."""
    return [pair_key(a, b) for i, a in enumerate(judges) for b in judges[i + 1:]]


@dataclass(frozen=True)
class PairAgreement:
    """Exact agreement and Cohen's κ of one judge pair (``cohen_kappa`` ``None`` when undefined)."""

    joined: int
    exact: int
    exact_rate: float
    cohen_kappa: Optional[float]

    def to_dict(self) -> Dict[str, Any]:
        return {"joined": self.joined, "exact": self.exact, "exact_rate": self.exact_rate,
                "cohen_kappa": self.cohen_kappa}


@dataclass(frozen=True)
class MultiAgreement:
    """Agreement of all judges of a slice on the questions every judge answered (one type or ``__all__``)."""

    questions: int
    exact_all: int
    exact_all_rate: float
    fleiss_kappa: Optional[float]
    gwet_ac1: Optional[float]
    krippendorff_alpha: Optional[float]
    pairs: Dict[str, PairAgreement]

    def to_dict(self) -> Dict[str, Any]:
        return {"questions": self.questions, "exact_all": self.exact_all, "exact_all_rate": self.exact_all_rate,
                "fleiss_kappa": self.fleiss_kappa, "gwet_ac1": self.gwet_ac1,
                "krippendorff_alpha": self.krippendorff_alpha,
                "pairs": {k: p.to_dict() for k, p in self.pairs.items()}}


@dataclass(frozen=True)
class JudgesAgreement:
    """Agreement among all (two or more) judges of one slice, per type and ``__all__`` (module docstring)."""

    judges: Tuple[str, ...]
    by_type: Dict[str, MultiAgreement]
    labels: Tuple[str, ...] = AGREEMENT_LABELS

    def to_dict(self) -> Dict[str, Any]:
        return {"judges": list(self.judges), "labels": list(self.labels),
                "by_type": {n: a.to_dict() for n, a in self.by_type.items()}}

    def validate(self, loc: str) -> None:
        judges = list(self.judges)
        if len(judges) < 2 or len(set(judges)) != len(judges) or not all(isinstance(j, str) for j in judges):
            raise ValueError(f"{loc}.judges: expected two or more distinct judge names, got {judges!r}")
        keys = pair_keys(judges)
        if len(set(keys)) != len(keys):
            raise ValueError(f"{loc}.judges: judge pair keys collide ({keys}); a judge name holds '|'")
        labels = list(self.labels)
        if len(labels) < 2 or len(set(labels)) != len(labels) or not all(isinstance(x, str) for x in labels):
            raise ValueError(f"{loc}.labels: expected two or more distinct labels, got {labels!r}")
        bad = [t for t in self.by_type if t != AGREEMENT_ALL and t not in UNIT_CATEGORIES]
        if bad:
            raise ValueError(f"{loc}.by_type: unknown type(s) {bad}")
        for t, a in self.by_type.items():
            sub = f"{loc}.by_type.{t}"
            if a.questions < 1:
                raise ValueError(f"{sub}.questions: a type with no joined question is left out, got {a.questions}")
            if a.exact_all > a.questions:
                raise ValueError(f"{sub}.exact_all: {a.exact_all} > questions {a.questions}")
            check_ratio(a.exact_all_rate, a.exact_all, a.questions, f"{sub}.exact_all_rate")
            for k in ("fleiss_kappa", "gwet_ac1", "krippendorff_alpha"):
                _check_coefficient(getattr(a, k), f"{sub}.{k}")
            if list(a.pairs) != keys:
                raise ValueError(f"{sub}.pairs: expected the pairs {keys}, got {list(a.pairs)}")
            for k, p in a.pairs.items():
                ps = f"{sub}.pairs.{k}"
                if p.joined != a.questions:
                    raise ValueError(f"{ps}.joined: {p.joined} != questions {a.questions} (pairs use the same questions)")
                if not a.exact_all <= p.exact <= p.joined:
                    raise ValueError(f"{ps}.exact: {p.exact} not between exact_all {a.exact_all} and joined {p.joined}")
                check_ratio(p.exact_rate, p.exact, p.joined, f"{ps}.exact_rate")
                _check_coefficient(p.cohen_kappa, f"{ps}.cohen_kappa")
        parts = [a for n, a in self.by_type.items() if n != AGREEMENT_ALL]
        total = self.by_type.get(AGREEMENT_ALL)
        if parts and total is None:
            raise ValueError(f"{loc}.by_type.__all__: missing while types have joined questions")
        if parts and total is not None:
            for k in ("questions", "exact_all"):
                s = sum(getattr(a, k) for a in parts)
                if s != getattr(total, k):
                    raise ValueError(f"{loc}.by_type.__all__.{k}: {getattr(total, k)} != sum {s}")
            for key in keys:
                s = sum(a.pairs[key].exact for a in parts)
                if s != total.pairs[key].exact:
                    raise ValueError(f"{loc}.by_type.__all__.pairs.{key}.exact: {total.pairs[key].exact} != sum {s}")


def _check_coefficient(value: Optional[float], loc: str) -> None:
    """An agreement coefficient: ``None`` (undefined) or a finite number <= 1."""
    if value is None:
        return
    v = as_float(value, loc)
    if v > 1.0 + 1e-9:
        raise ValueError(f"{loc}: must be <= 1, got {value!r}")


@dataclass(frozen=True)
class CellsFile:
    """The whole by-category file (§5.4)."""

    cells: List[Cell]
    cc12m_judge_agreement: Dict[str, Agreement] = field(default_factory=dict)
    cc12m_extraction: Dict[str, Extraction] = field(default_factory=dict)
    #: Agreement per slice (our judges stage; any slice name).
    judge_agreement: Dict[str, SliceAgreement] = field(default_factory=dict)
    #: Extraction accounting per slice and surface (our judges stage).
    extraction: Dict[str, Dict[str, Extraction]] = field(default_factory=dict)
    #: Agreement among all judges per slice (our judges stage, two or more judges).
    judges_agreement: Dict[str, JudgesAgreement] = field(default_factory=dict)

    def get(self, slice: str, judge: str, surface: str) -> Cell:
        """The cell for (slice, judge, surface); KeyError lists the slice's cells."""
        for c in self.cells:
            if c.key == (slice, judge, surface):
                return c
        have = sorted({(c.judge, c.surface) for c in self.cells if c.slice == slice})
        raise KeyError(f"no cell ({slice}, {judge}, {surface}); slice {slice!r} has {have}")

    def slices(self) -> List[str]:
        """Slice names in first-seen order."""
        return list(dict.fromkeys(c.slice for c in self.cells))

    def surfaces(self, slice: str) -> List[str]:
        return list(dict.fromkeys(c.surface for c in self.cells if c.slice == slice))

    def validate(self, loc: str = "<cells>") -> None:
        seen: Dict[Tuple[str, str, str], int] = {}
        for i, c in enumerate(self.cells):
            if c.key in seen:
                raise ValueError(f"{loc}: cells[{i}]: duplicate {c.label} (first at cells[{seen[c.key]}])")
            seen[c.key] = i
            c.validate(f"{loc}: cells[{i}] ")
        # Both-judges intersection: every judge of a slice sees the same requests per surface.
        responses: Dict[Tuple[str, str], Tuple[str, int]] = {}
        for c in self.cells:
            k = (c.slice, c.surface)
            if k in responses and responses[k][1] != c.all_types.responses:
                raise ValueError(
                    f"{loc}: {c.label}: responses {c.all_types.responses} != {responses[k][1]} of judge "
                    f"{responses[k][0]!r} (cells must use the both-judges intersection)"
                )
            responses.setdefault(k, (c.judge, c.all_types.responses))
        if self.cc12m_judge_agreement:
            for name, a in self.cc12m_judge_agreement.items():
                if a.exact > a.joined:
                    raise ValueError(f"{loc}: cc12m_judge_agreement.{name}.exact: {a.exact} > joined {a.joined}")
                check_ratio(a.exact_rate, a.exact, a.joined, f"{loc}: cc12m_judge_agreement.{name}.exact_rate")
            if AGREEMENT_ALL in self.cc12m_judge_agreement:
                parts = [a for n, a in self.cc12m_judge_agreement.items() if n != AGREEMENT_ALL]
                total = self.cc12m_judge_agreement[AGREEMENT_ALL]
                for k in ("joined", "exact"):
                    s = sum(getattr(a, k) for a in parts)
                    if parts and s != getattr(total, k):
                        raise ValueError(f"{loc}: cc12m_judge_agreement.__all__.{k}: {getattr(total, k)} != sum {s}")
        for sl, sa in self.judge_agreement.items():
            _check_agreement_block(sa.by_type, f"{loc}: judge_agreement.{sl}.by_type")
        for sl, ja in self.judges_agreement.items():
            sub = f"{loc}: judges_agreement.{sl}"
            ja.validate(sub)
            have = {c.judge for c in self.cells if c.slice == sl}
            missing = [j for j in ja.judges if have and j not in have]
            if missing:
                raise ValueError(f"{sub}.judges: {missing} have no cell in slice {sl!r} (cells: {sorted(have)})")
            two = self.judge_agreement.get(sl)
            if len(ja.judges) == 2 and two is not None:
                # two judges: the pair's questions are exactly judge_agreement's joined questions
                if tuple(two.judges) != tuple(ja.judges):
                    raise ValueError(f"{sub}.judges: {list(ja.judges)} != judge_agreement.{sl}.judges {list(two.judges)}")
                key = pair_key(*ja.judges)
                want = {t: (a.joined, a.exact) for t, a in two.by_type.items() if a.joined}
                got = {t: (a.pairs[key].joined, a.pairs[key].exact) for t, a in ja.by_type.items()}
                if want != got:
                    raise ValueError(f"{sub}: pair {key} (joined, exact) {got} != judge_agreement.{sl} {want}")
        ext_items = [(f"cc12m_extraction.{n}", e) for n, e in self.cc12m_extraction.items()]
        ext_items += [(f"extraction.{sl}.{n}", e) for sl, block in self.extraction.items() for n, e in block.items()]
        for name, e in ext_items:
            sub = f"{loc}: {name}"
            if e.valid + e.invalid != e.requests:
                raise ValueError(f"{sub}: valid {e.valid} + invalid {e.invalid} != requests {e.requests}")
            if e.invalid_at_token_cap > e.invalid:
                raise ValueError(f"{sub}.invalid_at_token_cap: {e.invalid_at_token_cap} > invalid {e.invalid}")
            if e.valid_zero_claims > e.valid:
                raise ValueError(f"{sub}.valid_zero_claims: {e.valid_zero_claims} > valid {e.valid}")

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"cells": [c.to_dict() for c in self.cells]}
        generic = bool(self.judge_agreement or self.extraction or self.judges_agreement)
        if self.cc12m_judge_agreement or not generic:
            out["cc12m_judge_agreement"] = {n: a.to_dict() for n, a in self.cc12m_judge_agreement.items()}
        if self.cc12m_extraction or not generic:
            out["cc12m_extraction"] = {n: e.to_dict() for n, e in self.cc12m_extraction.items()}
        if self.judge_agreement:
            out["judge_agreement"] = {n: a.to_dict() for n, a in self.judge_agreement.items()}
        if self.judges_agreement:
            out["judges_agreement"] = {n: a.to_dict() for n, a in self.judges_agreement.items()}
        if self.extraction:
            out["extraction"] = {sl: {n: e.to_dict() for n, e in block.items()} for sl, block in self.extraction.items()}
        return out


def _check_agreement_block(block: Mapping[str, Agreement], loc: str) -> None:
    for name, a in block.items():
        if a.exact > a.joined:
            raise ValueError(f"{loc}.{name}.exact: {a.exact} > joined {a.joined}")
        check_ratio(a.exact_rate, a.exact, a.joined, f"{loc}.{name}.exact_rate")
    if AGREEMENT_ALL in block:
        parts = [a for n, a in block.items() if n != AGREEMENT_ALL]
        total = block[AGREEMENT_ALL]
        for k in ("joined", "exact"):
            s = sum(getattr(a, k) for a in parts)
            if parts and s != getattr(total, k):
                raise ValueError(f"{loc}.__all__.{k}: {getattr(total, k)} != sum {s}")


def _parse_cell(d: Any, loc: str) -> Cell:
    d = require_mapping(d, loc)
    check_keys(d, ("slice", "judge", "surface", "all_types", "excluding_count_relation", "by_type"), loc)
    s = as_str(get_field(d, "slice", loc), f"{loc}.slice")
    j = as_str(get_field(d, "judge", loc), f"{loc}.judge")
    sf = as_str(get_field(d, "surface", loc), f"{loc}.surface")
    cl = f"{loc} ({s}, {j}, {sf})"
    bt_raw = require_mapping(get_field(d, "by_type", loc), f"{cl}.by_type")
    by_type: Dict[str, TypeCounts] = {}
    for t, v in bt_raw.items():
        v = require_mapping(v, f"{cl}.by_type.{t}")
        check_keys(v, ANSWERS, f"{cl}.by_type.{t}")
        by_type[str(t)] = TypeCounts(**{a: as_int(get_field(v, a, f"{cl}.by_type.{t}"), f"{cl}.by_type.{t}.{a}") for a in ANSWERS})
    cell = Cell(
        slice=s,
        judge=j,
        surface=sf,
        all_types=CellStats.from_dict(get_field(d, "all_types", cl), f"{cl}.all_types"),
        excluding_count_relation=CellStats.from_dict(
            get_field(d, "excluding_count_relation", cl), f"{cl}.excluding_count_relation"
        ),
        by_type=by_type,
    )
    cell.validate(f"{loc} ")
    return cell


def parse_cells(obj: Any, source: Optional[PathLike] = None) -> CellsFile:
    """Validate a decoded by-category file; errors name ``source``, the cell and the field."""
    loc = str(source) if source is not None else "<cells>"
    d = require_mapping(obj, loc)
    check_keys(d, ("cells", "cc12m_judge_agreement", "cc12m_extraction", "judge_agreement", "judges_agreement",
                   "extraction"), loc)
    raw_cells = get_field(d, "cells", loc)
    if not isinstance(raw_cells, list):
        raise ValueError(f"{loc}: cells: expected a list")
    cells = [_parse_cell(c, f"{loc}: cells[{i}]") for i, c in enumerate(raw_cells)]
    agreement = _parse_agreement_block(d.get("cc12m_judge_agreement", {}), f"{loc}: cc12m_judge_agreement")
    extraction = _parse_extraction_block(d.get("cc12m_extraction", {}), f"{loc}: cc12m_extraction")
    slice_agreement: Dict[str, SliceAgreement] = {}
    for sl, v in require_mapping(d.get("judge_agreement", {}), f"{loc}: judge_agreement").items():
        sub = f"{loc}: judge_agreement.{sl}"
        v = require_mapping(v, sub)
        check_keys(v, ("judges", "by_type"), sub)
        judges = get_field(v, "judges", sub)
        if not isinstance(judges, list) or len(judges) != 2 or not all(isinstance(j, str) for j in judges):
            raise ValueError(f"{sub}.judges: expected a list of two judge names, got {judges!r}")
        slice_agreement[str(sl)] = SliceAgreement(
            (judges[0], judges[1]), _parse_agreement_block(get_field(v, "by_type", sub), f"{sub}.by_type"))
    slice_extraction = {
        str(sl): _parse_extraction_block(v, f"{loc}: extraction.{sl}")
        for sl, v in require_mapping(d.get("extraction", {}), f"{loc}: extraction").items()
    }
    judges_agreement = {
        str(sl): _parse_judges_agreement(v, f"{loc}: judges_agreement.{sl}")
        for sl, v in require_mapping(d.get("judges_agreement", {}), f"{loc}: judges_agreement").items()
    }
    out = CellsFile(cells=cells, cc12m_judge_agreement=agreement, cc12m_extraction=extraction,
                    judge_agreement=slice_agreement, extraction=slice_extraction, judges_agreement=judges_agreement)
    out.validate(loc)
    return out


def _optional_float(d: Mapping[str, Any], key: str, loc: str) -> Optional[float]:
    v = get_field(d, key, loc)
    return None if v is None else as_float(v, f"{loc}.{key}")


def _names(value: Any, loc: str) -> Tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise ValueError(f"{loc}: expected a list of strings, got {value!r}")
    return tuple(value)


def _parse_judges_agreement(obj: Any, loc: str) -> JudgesAgreement:
    v = require_mapping(obj, loc)
    check_keys(v, ("judges", "labels", "by_type"), loc)
    judges = _names(get_field(v, "judges", loc), f"{loc}.judges")
    labels = _names(get_field(v, "labels", loc), f"{loc}.labels")
    by_type: Dict[str, MultiAgreement] = {}
    for t, a in require_mapping(get_field(v, "by_type", loc), f"{loc}.by_type").items():
        sub = f"{loc}.by_type.{t}"
        a = require_mapping(a, sub)
        check_keys(a, MULTI_FIELDS, sub)
        pairs: Dict[str, PairAgreement] = {}
        for k, p in require_mapping(get_field(a, "pairs", sub), f"{sub}.pairs").items():
            ps = f"{sub}.pairs.{k}"
            p = require_mapping(p, ps)
            check_keys(p, PAIR_FIELDS, ps)
            pairs[str(k)] = PairAgreement(joined=as_int(get_field(p, "joined", ps), f"{ps}.joined"),
                                          exact=as_int(get_field(p, "exact", ps), f"{ps}.exact"),
                                          exact_rate=as_float(get_field(p, "exact_rate", ps), f"{ps}.exact_rate"),
                                          cohen_kappa=_optional_float(p, "cohen_kappa", ps))
        by_type[str(t)] = MultiAgreement(
            questions=as_int(get_field(a, "questions", sub), f"{sub}.questions"),
            exact_all=as_int(get_field(a, "exact_all", sub), f"{sub}.exact_all"),
            exact_all_rate=as_float(get_field(a, "exact_all_rate", sub), f"{sub}.exact_all_rate"),
            fleiss_kappa=_optional_float(a, "fleiss_kappa", sub),
            gwet_ac1=_optional_float(a, "gwet_ac1", sub),
            krippendorff_alpha=_optional_float(a, "krippendorff_alpha", sub),
            pairs=pairs)
    return JudgesAgreement(judges=judges, by_type=by_type, labels=labels)


def _parse_agreement_block(obj: Any, loc: str) -> Dict[str, Agreement]:
    out: Dict[str, Agreement] = {}
    for n, v in require_mapping(obj, loc).items():
        sub = f"{loc}.{n}"
        v = require_mapping(v, sub)
        check_keys(v, ("joined", "exact", "exact_rate"), sub)
        out[str(n)] = Agreement(
            joined=as_int(get_field(v, "joined", sub), f"{sub}.joined"),
            exact=as_int(get_field(v, "exact", sub), f"{sub}.exact"),
            exact_rate=as_float(get_field(v, "exact_rate", sub), f"{sub}.exact_rate"),
        )
    return out


def _parse_extraction_block(obj: Any, loc: str) -> Dict[str, Extraction]:
    out: Dict[str, Extraction] = {}
    for n, v in require_mapping(obj, loc).items():
        sub = f"{loc}.{n}"
        v = require_mapping(v, sub)
        check_keys(v, EXTRACTION_FIELDS, sub)
        out[str(n)] = Extraction(**{k: as_int(get_field(v, k, sub), f"{sub}.{k}") for k in EXTRACTION_FIELDS})
    return out


def merge_cells_files(files: List[CellsFile]) -> CellsFile:
    """Concatenate cells files of different slices (a slice may appear in one file only)."""
    cells: List[Cell] = []
    agreement: Dict[str, SliceAgreement] = {}
    extraction: Dict[str, Dict[str, Extraction]] = {}
    cc_ag: Dict[str, Agreement] = {}
    cc_ex: Dict[str, Extraction] = {}
    multi: Dict[str, JudgesAgreement] = {}
    seen: Dict[str, int] = {}
    for i, f in enumerate(files):
        for sl in f.slices():
            if sl in seen:
                raise ValueError(f"merge_cells_files: slice {sl!r} is in file {seen[sl]} and file {i}")
            seen[sl] = i
        cells += f.cells
        agreement.update(f.judge_agreement)
        extraction.update(f.extraction)
        cc_ag.update(f.cc12m_judge_agreement)
        cc_ex.update(f.cc12m_extraction)
        multi.update(f.judges_agreement)
    out = CellsFile(cells, cc_ag, cc_ex, agreement, extraction, multi)
    out.validate("<merged cells>")
    return out


def read_cells(path: PathLike) -> CellsFile:
    """Read and validate ``cbu_vqa_by_category_b64.json`` (§5.4)."""
    return parse_cells(load_json(path), Path(path))


def format_cells(cells: CellsFile) -> str:
    """JSON text: indent 2, no trailing newline (§10)."""
    cells.validate()
    return dump_json(cells.to_dict(), indent=2, ensure_ascii=False, trailing_newline=False)


def write_cells(cells: CellsFile, path: PathLike) -> Path:
    """Validate and write the by-category file; returns the path."""
    return write_text(format_cells(cells), path)
