"""The ``human:`` params section as typed values: the study's own settings (:class:`StudyConfig`)
and the stage keys (where the study lives, which judged claims it samples, the simulated demo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Tuple

from capaudit.config import ParamsSection, RunConfig

from .protocol import StudyConfig

SECTION = "human"
DEFAULT_JUDGED = "judges/*/judged_claims.jsonl"


@dataclass(frozen=True)
class SimulateParams:
    """``human.simulate``: the simulated annotators of the demo study."""

    annotators: int = 3
    accuracy: float = 0.85
    seed: Optional[int] = None  # None: the study's seed

    KEYS = ("annotators", "accuracy", "seed")

    @classmethod
    def from_section(cls, s: ParamsSection) -> "SimulateParams":
        s = s.only(cls.KEYS)
        accuracy = s.number("accuracy", cls.accuracy, 0.0)
        if accuracy > 1:
            raise s.error("accuracy", f"expected a share in [0, 1], got {accuracy!r}")
        return cls(annotators=s.integer("annotators", cls.annotators), accuracy=float(accuracy),
                   seed=s.integer("seed", None, 0))


@dataclass(frozen=True)
class HumanParams:
    """The ``human:`` section: the study config and the stage keys (their only defaults)."""

    study: StudyConfig
    db: Optional[str] = None  # None: <artifacts>/human/<study_id>.sqlite
    judged_claims: Tuple[str, ...] = (DEFAULT_JUDGED,)  # files or globs, relative to the artifacts folder
    simulate: SimulateParams = field(default_factory=SimulateParams)

    @classmethod
    def from_config(cls, cfg: RunConfig) -> "HumanParams":
        """From the params file (an unknown key or a bad value names the file, section and key)."""
        section = cfg.section(SECTION)
        s = ParamsSection.of(section, SECTION, cfg.path)
        spec = s.raw("judged_claims", list(cls.judged_claims))
        judged = (spec,) if isinstance(spec, str) else s.names("judged_claims", list(cls.judged_claims))
        db = s.raw("db")
        if db is not None and not isinstance(db, str):
            raise s.error("db", f"expected a path, got {db!r}")
        return cls(study=StudyConfig.from_mapping(section, source=str(cfg.path)), db=db or None,
                   judged_claims=tuple(judged), simulate=SimulateParams.from_section(s.sub("simulate")))

    def db_path(self, cfg: RunConfig) -> Path:
        """``db``, else ``<artifacts>/human/<study_id>.sqlite``."""
        return Path(self.db) if self.db else cfg.out_dir / "artifacts" / "human" / f"{self.study.study_id}.sqlite"


__all__ = ["DEFAULT_JUDGED", "HumanParams", "SECTION", "SimulateParams"]
