"""The ``judges:`` params section as one frozen value: the judges, the judged slices, the judge
requests and the cells' bootstrap (the only defaults of the judges stage). The claims of the judged
slices are the claims stage's (:class:`capaudit.claims.params.JudgedClaimsParams`, same section)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from capaudit.claims.params import JudgedClaimsParams
from capaudit.config import ParamsSection, PathLike, RunConfig
from capaudit.errors import InputError

from .slices import SurfaceSpec
from .stage_params import SECTION, JudgeSpec, judge_specs, slice_specs


@dataclass(frozen=True)
class YesBiasProbeParams:
    """``judges.probe`` (:mod:`capaudit.judges.probe`): the SugarCrepe pair surfaces of one judged slice."""

    slice: str
    positive: str
    negative: str
    reps: int = 2000
    seed: int = 0
    written: Mapping[str, Any] = field(default_factory=dict)  # the block as written (recorded with the rows)

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "YesBiasProbeParams":
        """From the ``judges:`` section's ``probe`` block; a missing or bad key is one line naming it."""
        p = ParamsSection.of(section, SECTION, path).raw("probe")
        if not isinstance(p, Mapping) or not all(p.get(k) for k in ("slice", "positive", "negative")):
            raise InputError("judges.probe needs 'slice', 'positive' and 'negative'", path=path, field="probe")
        s = ParamsSection.of(p, f"{SECTION}.probe", path).only(("slice", "positive", "negative", "reps", "seed"))
        return cls(str(p["slice"]), str(p["positive"]), str(p["negative"]), s.integer("reps", cls.reps),
                   s.integer("seed", cls.seed, None), dict(p))


@dataclass(frozen=True)
class JudgesParams:
    """``judges:`` (see :mod:`capaudit.judges.stage`)."""

    judges: Tuple[JudgeSpec, ...]
    slices: Tuple[Tuple[str, Tuple[SurfaceSpec, ...]], ...]
    claims: JudgedClaimsParams = JudgedClaimsParams()
    image_mode: str = "file"
    max_tokens: int = 2048
    evidence: bool = False
    comparisons: Tuple[Mapping[str, Any], ...] = ()
    agreement_slice: Optional[str] = None  # None: the first slice when there are >= 2 judges
    denominators_slice: Optional[str] = None  # None: the first slice
    reps: int = 2000
    seed: int = 0
    probe: Optional[Mapping[str, Any]] = None  # capaudit.judges.probe

    KEYS = ("judges", "slices", "image_mode", "max_tokens", "evidence", "comparisons", "agreement_slice",
            "denominators_slice", "reps", "seed", "probe") + JudgedClaimsParams.KEYS

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None,
                     placeholders: Optional[Mapping[str, str]] = None) -> "JudgesParams":
        """From the params section; an unknown key or a bad value is one line naming the file, section
        and key. ``placeholders``: ``{run_dir}``/``{artifacts}`` of the surfaces' paths."""
        s = ParamsSection.of(section, SECTION, path).only(cls.KEYS)
        where = str(path)
        slices = tuple((name, tuple(specs)) for name, specs in slice_specs(s.values, where, placeholders))
        comparisons = s.raw("comparisons") or []
        for i, c in enumerate(comparisons):
            if not isinstance(c, Mapping):
                raise InputError(f"judges.comparisons[{i}] must be a mapping", path=where, field="comparisons")
        judges = tuple(judge_specs(s.values, where))
        first = slices[0][0]
        return cls(judges=judges, slices=slices, claims=JudgedClaimsParams.from_section(s.values, path),
                   image_mode=s.text("image_mode", cls.image_mode), max_tokens=s.integer("max_tokens", cls.max_tokens),
                   evidence=s.boolean("evidence", cls.evidence), comparisons=tuple(comparisons),
                   agreement_slice=s.raw("agreement_slice", first if len(judges) >= 2 else None),
                   denominators_slice=s.raw("denominators_slice", first), reps=s.integer("reps", cls.reps),
                   seed=s.integer("seed", cls.seed, None), probe=s.raw("probe"))

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "JudgesParams":
        """The run's ``judges:`` section, surface paths expanded for the run."""
        art = cfg.out_dir / "artifacts"
        return cls.from_section(cfg.section(SECTION), cfg.path, {"run_dir": str(cfg.out_dir), "artifacts": str(art)})

    def check_only(self, only: Optional[Sequence[str]], where: PathLike) -> None:
        """``only`` (``judges run --judge NAME``) names judges of the params, else one line naming them."""
        if only is None:
            return
        unknown = sorted(set(only) - {j.name for j in self.judges})
        if unknown:
            raise InputError(f"--judge {', '.join(unknown)}: no such judge (judges: "
                             f"{', '.join(j.name for j in self.judges)})", path=where, field="judges")

    def by_name(self) -> Dict[str, JudgeSpec]:
        return {j.name: j for j in self.judges}


__all__ = ["JudgesParams", "SECTION", "YesBiasProbeParams"]
