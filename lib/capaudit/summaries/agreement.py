"""Judge–human agreement bootstrap schema (reference-spec §7, §14 G12).

Layout (``judge_human_agreement_bootstrap.json``, indent 1, no trailing newline)::

    {"<judge>": {"overall": Interval, "by_surface": [{"surface_group": ..., **Interval}, ...]}}

``Interval`` = ``estimate, lower, upper, bootstrap_mean, bootstrap_std, n_records, n_clusters,
n_resamples, seed`` from the image-cluster bootstrap (:func:`capaudit.stats.bootstrap.cluster_bootstrap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from ._common import PathLike, as_float, as_int, as_str, check_keys, dump_json, get_field, load_json, require_mapping, write_text

INTERVAL_FIELDS = (
    "estimate",
    "lower",
    "upper",
    "bootstrap_mean",
    "bootstrap_std",
    "n_records",
    "n_clusters",
    "n_resamples",
    "seed",
)
_INTS = ("n_records", "n_clusters", "n_resamples", "seed")


@dataclass(frozen=True)
class AgreementInterval:
    """A weighted agreement estimate with its cluster-bootstrap percentile interval (§7)."""

    estimate: float
    lower: float
    upper: float
    bootstrap_mean: float
    bootstrap_std: float
    n_records: int
    n_clusters: int
    n_resamples: int
    seed: int
    surface_group: Optional[str] = None

    def validate(self, loc: str) -> None:
        for k in ("estimate", "lower", "upper", "bootstrap_mean"):
            v = getattr(self, k)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{loc}.{k}: agreement must lie in [0, 1], got {v}")
        if self.lower > self.upper:
            raise ValueError(f"{loc}: lower {self.lower} > upper {self.upper}")
        if self.bootstrap_std < 0:
            raise ValueError(f"{loc}.bootstrap_std: must be >= 0")
        if self.n_clusters > self.n_records:
            raise ValueError(f"{loc}.n_clusters: {self.n_clusters} > n_records {self.n_records}")

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        if self.surface_group is not None:
            out["surface_group"] = self.surface_group
        out.update({k: getattr(self, k) for k in INTERVAL_FIELDS})
        return out

    @classmethod
    def from_dict(cls, d: Any, loc: str, grouped: bool = False) -> "AgreementInterval":
        d = require_mapping(d, loc)
        check_keys(d, INTERVAL_FIELDS + (("surface_group",) if grouped else ()), loc)
        vals: Dict[str, Any] = {
            k: (as_int if k in _INTS else as_float)(get_field(d, k, loc), f"{loc}.{k}") for k in INTERVAL_FIELDS
        }
        if grouped:
            vals["surface_group"] = as_str(get_field(d, "surface_group", loc), f"{loc}.surface_group")
        out = cls(**vals)
        out.validate(loc)
        return out


@dataclass(frozen=True)
class JudgeAgreement:
    overall: AgreementInterval
    by_surface: List[AgreementInterval]

    def group(self, name: str) -> AgreementInterval:
        for g in self.by_surface:
            if g.surface_group == name:
                return g
        raise KeyError(f"no surface group {name!r}; have {[g.surface_group for g in self.by_surface]}")


def parse_agreement(obj: Any, source: Optional[PathLike] = None) -> Dict[str, JudgeAgreement]:
    """Validate a decoded agreement file; errors name ``source``, the judge and the field."""
    loc = str(source) if source is not None else "<agreement>"
    d = require_mapping(obj, loc)
    out: Dict[str, JudgeAgreement] = {}
    for judge, block in d.items():
        sub = f"{loc}: {judge}"
        block = require_mapping(block, sub)
        check_keys(block, ("overall", "by_surface"), sub)
        overall = AgreementInterval.from_dict(get_field(block, "overall", sub), f"{sub}.overall")
        groups_raw = get_field(block, "by_surface", sub)
        if not isinstance(groups_raw, list):
            raise ValueError(f"{sub}.by_surface: expected a list")
        groups = [AgreementInterval.from_dict(g, f"{sub}.by_surface[{i}]", grouped=True) for i, g in enumerate(groups_raw)]
        if groups and sum(g.n_records for g in groups) != overall.n_records:
            raise ValueError(f"{sub}.by_surface: n_records sum {sum(g.n_records for g in groups)} != overall {overall.n_records}")
        out[str(judge)] = JudgeAgreement(overall=overall, by_surface=groups)
    return out


def read_agreement(path: PathLike) -> Dict[str, JudgeAgreement]:
    return parse_agreement(load_json(path), Path(path))


def format_agreement(data: Dict[str, JudgeAgreement]) -> str:
    """JSON text: indent 1, no trailing newline (reference formatting)."""
    obj = {j: {"overall": a.overall.to_dict(), "by_surface": [g.to_dict() for g in a.by_surface]} for j, a in data.items()}
    return dump_json(obj, indent=1, ensure_ascii=False, trailing_newline=False)


def write_agreement(data: Dict[str, JudgeAgreement], path: PathLike) -> Path:
    return write_text(format_agreement(data), path)
