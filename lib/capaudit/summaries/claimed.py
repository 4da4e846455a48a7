"""Claimed-CBU summary schema (reference-spec §4.4): what the claims stage writes, the paper reads.

File layout (``claimed_cbu_summary.json``)::

    {"input"?: ..., "mode": "claimed", "status": {"responses", "captions", "bad"?},
     "surfaces": {"__all__": {...}, "<surface>": {...}}}

Each surface block carries summed counts, ratios (``claimed_dedup_per_caption`` = CBU/cap,
``claimed_dedup_per_100_tokens`` = CBU/100 lex), per-type counts/ratios and four distribution
blocks (median, p25, p75, trimmed mean). The reader validates the arithmetic (ratios equal their
counts, per-type counts sum to totals); the writer emits ``json.dumps(indent=2,
ensure_ascii=False)`` plus a trailing newline, so reading and re-writing a reference file is
byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._common import (
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

ALL = "__all__"
#: Summed integer counts, in file order.
COUNT_FIELDS: Tuple[str, ...] = (
    "captions",
    "claimed_total",
    "claimed_dedup_total",
    "duplicate_units",
    "suspicious_units",
    "caption_tokens",
    "rows_with_duplicate",
    "rows_with_suspicious",
)
#: Ratio fields (after the per-type counts), in file order.
RATIO_FIELDS: Tuple[str, ...] = (
    "claimed_per_caption",
    "claimed_dedup_per_caption",
    "claimed_dedup_per_100_tokens",
    "duplicate_units_per_caption",
    "suspicious_units_per_caption",
    "duplicate_row_rate",
    "suspicious_row_rate",
    "grounded_precision",
    "unsupported_rate",
    "uncertain_rate",
)
#: Fields that exist only in grounded mode; 0.0 in claimed mode.
GROUNDED_FIELDS: Tuple[str, ...] = ("grounded_precision", "unsupported_rate", "uncertain_rate")
#: Distribution names and statistics (§4.4).
DISTRIBUTIONS: Tuple[str, ...] = ("claimed", "claimed_dedup", "claimed_dedup_per_100_tokens", "caption_tokens")
DIST_STATS: Tuple[str, ...] = ("median", "p25", "p75", "trimmed_mean")
#: Ratio → (numerator, denominator, scale) for validation.
_RATIO_DEFS: Dict[str, Tuple[str, str, float]] = {
    "claimed_per_caption": ("claimed_total", "captions", 1.0),
    "claimed_dedup_per_caption": ("claimed_dedup_total", "captions", 1.0),
    "claimed_dedup_per_100_tokens": ("claimed_dedup_total", "caption_tokens", 100.0),
    "duplicate_units_per_caption": ("duplicate_units", "captions", 1.0),
    "suspicious_units_per_caption": ("suspicious_units", "captions", 1.0),
    "duplicate_row_rate": ("rows_with_duplicate", "captions", 1.0),
    "suspicious_row_rate": ("rows_with_suspicious", "captions", 1.0),
}


def surface_field_order() -> List[str]:
    """All keys of one surface block, in the order the reference writes them."""
    keys = list(COUNT_FIELDS)
    keys += [f"claimed_{t}" for t in UNIT_CATEGORIES]
    keys += [f"claimed_dedup_{t}" for t in UNIT_CATEGORIES]
    keys += list(RATIO_FIELDS)
    for t in UNIT_CATEGORIES:
        keys += [f"claimed_{t}_per_caption", f"claimed_dedup_{t}_per_caption"]
    for name in DISTRIBUTIONS:
        keys += [f"{name}_{s}" for s in DIST_STATS]
    return keys


@dataclass(frozen=True)
class Distribution:
    """Per-caption distribution summary: median, p25/p75 (nearest rank), 10 % trimmed mean (§4.4)."""

    median: float
    p25: float
    p75: float
    trimmed_mean: float

    def __post_init__(self) -> None:
        for name in DIST_STATS:
            object.__setattr__(self, name, as_float(getattr(self, name), f"distribution.{name}"))


@dataclass(frozen=True)
class ClaimedSurface:
    """One surface block of a claimed summary (§4.4). Build with :meth:`from_counts` or :meth:`from_dict`."""

    captions: int
    claimed_total: int
    claimed_dedup_total: int
    duplicate_units: int
    suspicious_units: int
    caption_tokens: int
    rows_with_duplicate: int
    rows_with_suspicious: int
    claimed_by_type: Dict[str, int]
    claimed_dedup_by_type: Dict[str, int]
    ratios: Dict[str, float]
    per_type_per_caption: Dict[str, float]
    per_type_dedup_per_caption: Dict[str, float]
    distributions: Dict[str, Distribution]

    # -- convenient names for the paper ------------------------------------------------------
    @property
    def cbu_per_cap(self) -> float:
        """CBU/cap = ``claimed_dedup_total / captions``."""
        return self.ratios["claimed_dedup_per_caption"]

    @property
    def cbu_per_100_lex(self) -> float:
        """CBU/100 lex = ``100 · claimed_dedup_total / caption_tokens``."""
        return self.ratios["claimed_dedup_per_100_tokens"]

    @classmethod
    def from_counts(
        cls,
        counts: Mapping[str, int],
        distributions: Mapping[str, Distribution],
    ) -> "ClaimedSurface":
        """Finalize summed counts into a surface block (§4.4 ``finalize``).

        ``counts`` holds the eight :data:`COUNT_FIELDS` plus ``claimed_<type>`` and
        ``claimed_dedup_<type>`` for every type (missing types count 0); ``distributions`` maps each
        name in :data:`DISTRIBUTIONS` to its :class:`Distribution`. Ratios use 0.0 on an empty
        denominator; grounded-mode fields are 0.0.
        """
        c = {k: int(counts.get(k, 0)) for k in COUNT_FIELDS}
        by_type = {t: int(counts.get(f"claimed_{t}", 0)) for t in UNIT_CATEGORIES}
        dedup_by_type = {t: int(counts.get(f"claimed_dedup_{t}", 0)) for t in UNIT_CATEGORIES}
        ratios = {name: scale * ratio(c[num], c[den]) for name, (num, den, scale) in _RATIO_DEFS.items()}
        ratios.update({name: 0.0 for name in GROUNDED_FIELDS})
        ratios = {name: ratios[name] for name in RATIO_FIELDS}
        missing = [d for d in DISTRIBUTIONS if d not in distributions]
        if missing:
            raise ValueError(f"ClaimedSurface.from_counts: distributions missing {missing}")
        surface = cls(
            **c,
            claimed_by_type=by_type,
            claimed_dedup_by_type=dedup_by_type,
            ratios=ratios,
            per_type_per_caption={t: ratio(by_type[t], c["captions"]) for t in UNIT_CATEGORIES},
            per_type_dedup_per_caption={t: ratio(dedup_by_type[t], c["captions"]) for t in UNIT_CATEGORIES},
            distributions={d: distributions[d] for d in DISTRIBUTIONS},
        )
        surface.validate("ClaimedSurface.from_counts")
        return surface

    @classmethod
    def from_dict(cls, d: Any, loc: str = "surface") -> "ClaimedSurface":
        """Parse and validate one surface block; errors name ``loc`` and the field."""
        d = require_mapping(d, loc)
        order = surface_field_order()
        check_keys(d, order, loc)
        ints = {k: as_int(get_field(d, k, loc), f"{loc}.{k}") for k in COUNT_FIELDS}
        by_type = {t: as_int(get_field(d, f"claimed_{t}", loc), f"{loc}.claimed_{t}") for t in UNIT_CATEGORIES}
        dedup = {
            t: as_int(get_field(d, f"claimed_dedup_{t}", loc), f"{loc}.claimed_dedup_{t}") for t in UNIT_CATEGORIES
        }
        ratios = {k: as_float(get_field(d, k, loc), f"{loc}.{k}") for k in RATIO_FIELDS}
        ptc = {
            t: as_float(get_field(d, f"claimed_{t}_per_caption", loc), f"{loc}.claimed_{t}_per_caption")
            for t in UNIT_CATEGORIES
        }
        ptd = {
            t: as_float(get_field(d, f"claimed_dedup_{t}_per_caption", loc), f"{loc}.claimed_dedup_{t}_per_caption")
            for t in UNIT_CATEGORIES
        }
        dists = {
            name: Distribution(
                **{s: as_float(get_field(d, f"{name}_{s}", loc), f"{loc}.{name}_{s}") for s in DIST_STATS}
            )
            for name in DISTRIBUTIONS
        }
        surface = cls(
            **ints,
            claimed_by_type=by_type,
            claimed_dedup_by_type=dedup,
            ratios=ratios,
            per_type_per_caption=ptc,
            per_type_dedup_per_caption=ptd,
            distributions=dists,
        )
        surface.validate(loc)
        return surface

    def validate(self, loc: str = "surface") -> None:
        """Check §4.4 arithmetic: types sum to totals, dedup ≤ raw, ratios equal their counts."""
        for k in COUNT_FIELDS:
            as_int(getattr(self, k), f"{loc}.{k}")
        if sum(self.claimed_by_type.values()) != self.claimed_total:
            raise ValueError(
                f"{loc}.claimed_total: {self.claimed_total} != sum of claimed_<type> {sum(self.claimed_by_type.values())}"
            )
        if sum(self.claimed_dedup_by_type.values()) != self.claimed_dedup_total:
            raise ValueError(
                f"{loc}.claimed_dedup_total: {self.claimed_dedup_total} != sum of claimed_dedup_<type> "
                f"{sum(self.claimed_dedup_by_type.values())}"
            )
        if self.claimed_dedup_total > self.claimed_total:
            raise ValueError(f"{loc}.claimed_dedup_total: {self.claimed_dedup_total} > claimed_total {self.claimed_total}")
        for t in UNIT_CATEGORIES:
            if self.claimed_dedup_by_type[t] > self.claimed_by_type[t]:
                raise ValueError(f"{loc}.claimed_dedup_{t}: exceeds claimed_{t}")
        for name, (num, den, scale) in _RATIO_DEFS.items():
            check_ratio(self.ratios[name], getattr(self, num), getattr(self, den), f"{loc}.{name}", scale)
        for t in UNIT_CATEGORIES:
            check_ratio(self.per_type_per_caption[t], self.claimed_by_type[t], self.captions, f"{loc}.claimed_{t}_per_caption")
            check_ratio(
                self.per_type_dedup_per_caption[t],
                self.claimed_dedup_by_type[t],
                self.captions,
                f"{loc}.claimed_dedup_{t}_per_caption",
            )
        for name, dist in self.distributions.items():
            if not dist.p25 <= dist.median <= dist.p75:
                raise ValueError(f"{loc}.{name}_median: not within [p25, p75] = [{dist.p25}, {dist.p75}]")

    def to_dict(self) -> Dict[str, Any]:
        """The surface block with keys in the reference order."""
        out: Dict[str, Any] = {k: getattr(self, k) for k in COUNT_FIELDS}
        out.update({f"claimed_{t}": self.claimed_by_type[t] for t in UNIT_CATEGORIES})
        out.update({f"claimed_dedup_{t}": self.claimed_dedup_by_type[t] for t in UNIT_CATEGORIES})
        out.update({k: self.ratios[k] for k in RATIO_FIELDS})
        for t in UNIT_CATEGORIES:
            out[f"claimed_{t}_per_caption"] = self.per_type_per_caption[t]
            out[f"claimed_dedup_{t}_per_caption"] = self.per_type_dedup_per_caption[t]
        for name in DISTRIBUTIONS:
            dist = self.distributions[name]
            for s in DIST_STATS:
                out[f"{name}_{s}"] = getattr(dist, s)
        return out


@dataclass(frozen=True)
class ClaimedStatus:
    """``status`` block: responses read, captions with an ok response, optional ``bad`` count."""

    responses: int
    captions: int
    bad: Optional[int] = None

    def to_dict(self) -> Dict[str, int]:
        out = {"responses": self.responses, "captions": self.captions}
        if self.bad is not None:
            out["bad"] = self.bad
        return out


@dataclass(frozen=True)
class ClaimedSummary:
    """A whole ``claimed_cbu_summary.json`` (§4.4)."""

    status: ClaimedStatus
    surfaces: Dict[str, ClaimedSurface]
    mode: str = "claimed"
    input: Any = field(default=None)

    def surface(self, name: str) -> ClaimedSurface:
        """The named surface block (``"__all__"`` for the pooled one); KeyError lists what exists."""
        try:
            return self.surfaces[name]
        except KeyError:
            raise KeyError(f"claimed summary has no surface {name!r}; has {list(self.surfaces)}") from None

    @property
    def only_surface(self) -> ClaimedSurface:
        """The single non-``__all__`` surface (error if there is not exactly one)."""
        names = [s for s in self.surfaces if s != ALL]
        if len(names) != 1:
            raise ValueError(f"claimed summary has {len(names)} surfaces {names}, expected exactly one")
        return self.surfaces[names[0]]

    def validate(self, loc: str = "<claimed summary>") -> None:
        if self.mode != "claimed":
            raise ValueError(f"{loc}: mode: expected 'claimed', got {self.mode!r}")
        if not self.surfaces:
            raise ValueError(f"{loc}: surfaces: empty")
        for name, s in self.surfaces.items():
            s.validate(f"{loc}: surfaces.{name}")
        if ALL in self.surfaces:
            pooled = self.surfaces[ALL]
            rest = [s for n, s in self.surfaces.items() if n != ALL]
            for k in COUNT_FIELDS:
                total = sum(getattr(s, k) for s in rest)
                if rest and getattr(pooled, k) != total:
                    raise ValueError(
                        f"{loc}: surfaces.__all__.{k}: {getattr(pooled, k)} != sum over surfaces {total}"
                    )
            if self.status.captions != pooled.captions:
                raise ValueError(
                    f"{loc}: status.captions: {self.status.captions} != surfaces.__all__.captions {pooled.captions}"
                )
        if self.status.bad is not None and self.status.responses != self.status.captions + self.status.bad:
            raise ValueError(
                f"{loc}: status: responses {self.status.responses} != captions {self.status.captions} + bad {self.status.bad}"
            )

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.input is not None:
            out["input"] = self.input
        out["mode"] = self.mode
        out["status"] = self.status.to_dict()
        out["surfaces"] = {name: s.to_dict() for name, s in self.surfaces.items()}
        return out


def parse_claimed_summary(obj: Any, source: Optional[PathLike] = None) -> ClaimedSummary:
    """Validate a decoded claimed summary; errors name ``source`` and the field path."""
    loc = str(source) if source is not None else "<claimed summary>"
    d = require_mapping(obj, loc)
    check_keys(d, ("input", "mode", "status", "surfaces"), loc)
    mode = as_str(get_field(d, "mode", loc), f"{loc}: mode")
    st = require_mapping(get_field(d, "status", loc), f"{loc}: status")
    check_keys(st, ("responses", "captions", "bad"), f"{loc}: status")
    status = ClaimedStatus(
        responses=as_int(get_field(st, "responses", f"{loc}: status"), f"{loc}: status.responses"),
        captions=as_int(get_field(st, "captions", f"{loc}: status"), f"{loc}: status.captions"),
        bad=as_int(st["bad"], f"{loc}: status.bad") if "bad" in st else None,
    )
    surfaces_raw = require_mapping(get_field(d, "surfaces", loc), f"{loc}: surfaces")
    surfaces = {
        str(name): ClaimedSurface.from_dict(block, f"{loc}: surfaces.{name}") for name, block in surfaces_raw.items()
    }
    summary = ClaimedSummary(status=status, surfaces=surfaces, mode=mode, input=d.get("input"))
    summary.validate(loc)
    return summary


def read_claimed_summary(path: PathLike) -> ClaimedSummary:
    """Read and validate ``claimed_cbu_summary.json`` (§4.4)."""
    return parse_claimed_summary(load_json(path), Path(path))


def format_claimed_summary(summary: ClaimedSummary) -> str:
    """JSON text: indent 2, ``ensure_ascii=False``, trailing newline (§10)."""
    summary.validate()
    return dump_json(summary.to_dict(), indent=2, ensure_ascii=False, trailing_newline=True)


def write_claimed_summary(summary: ClaimedSummary, path: PathLike) -> Path:
    """Validate and write a claimed summary; returns the path."""
    return write_text(format_claimed_summary(summary), path)
