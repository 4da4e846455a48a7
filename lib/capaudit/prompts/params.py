"""The ``prompt_support:`` params section as typed values (defaults = the reference's CLI, spec §12)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple

from capaudit.prompts.io import resolve_location
from capaudit.prompts.ngrams import HASH_BUCKETS
from capaudit.prompts.pools import MAX_TOKENS, MIN_TOKENS, UnionSpec, source_from_params
from capaudit.prompts.support import ALPHA, BLOCK_SIZE, BOOTSTRAP_REPS

SECTION = "prompt_support"


@dataclass(frozen=True)
class Comparison:
    """A paired caption file and the two fields compared (§3.2)."""

    name: str
    pairs: Path
    local_field: str = "local_caption"
    reference_field: str = "reference_caption"
    local_surface: str = ""
    reference_surface: str = ""
    block_size: Optional[int] = None
    skip_incomplete: bool = False


@dataclass(frozen=True)
class PoolFileSpec:
    """A ready pool file used as given (no preparation filters)."""

    name: str
    path: Path
    field: Optional[str] = None
    fmt: Optional[str] = None


@dataclass
class StageParams:
    """Typed view of the ``prompt_support:`` section (defaults = the reference's CLI, §12)."""

    budget: Optional[int] = 64
    ngram: int = 2
    hash_buckets: int = HASH_BUCKETS
    alpha: float = ALPHA
    block_size: int = BLOCK_SIZE
    reps: int = BOOTSTRAP_REPS
    seed: int = 0
    max_prompt_records: Optional[int] = 1_000_000
    max_caption_records: Optional[int] = 250_000
    workers: int = 1
    engine: str = "local"  # where pool chunks and caption block runs are counted (local | ray)
    address: Optional[str] = None  # Ray cluster address (else RAY_ADDRESS, else a local cluster)
    cache_dir: Optional[Path] = None
    prepare_sources: List[Any] = field(default_factory=list)
    prepare_unions: List[UnionSpec] = field(default_factory=list)
    min_tokens: int = MIN_TOKENS
    max_tokens: int = MAX_TOKENS
    max_per_source: Optional[int] = None
    use: str = "filtered"
    include: Optional[List[str]] = None
    pool_files: List[PoolFileSpec] = field(default_factory=list)
    paper_pools: Optional[List[str]] = None
    comparisons: List[Comparison] = field(default_factory=list)
    sensitivity_budgets: List[Optional[int]] = field(default_factory=list)
    sensitivity_ngrams: List[int] = field(default_factory=list)


def _budget(value: Any, where: str) -> Optional[int]:
    if value is None or (isinstance(value, str) and value.lower() in ("full", "none", "all")):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: budget must be a positive integer or 'full', got {value!r}")
    return value


def _int(section: Mapping[str, Any], key: str, default: Any, where: str, minimum: int = 0) -> Any:
    value = section.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where}.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def parse_params(section: Mapping[str, Any], where: str = SECTION,
                 slices: Optional[Mapping[str, Tuple[Path, str, str]]] = None) -> StageParams:
    """Validate the params section; errors name the offending key."""
    known = {"budget", "ngram", "hash_buckets", "alpha", "block_size", "reps", "seed", "max_prompt_records",
             "max_caption_records", "workers", "cache_dir", "pools", "paper_pools", "comparisons", "sensitivity",
             "engine", "address"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown} (known: {sorted(known)})")
    p = StageParams()
    p.budget = _budget(section.get("budget", 64), f"{where}.budget")
    p.ngram = _int(section, "ngram", 2, where, 1)
    p.hash_buckets = _int(section, "hash_buckets", HASH_BUCKETS, where, 1)
    alpha = section.get("alpha", ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha < 0:
        raise ValueError(f"{where}.alpha: expected a number >= 0, got {alpha!r}")
    p.alpha = float(alpha)
    p.block_size = _int(section, "block_size", BLOCK_SIZE, where, 1)
    p.reps = _int(section, "reps", BOOTSTRAP_REPS, where, 1)
    p.seed = _int(section, "seed", 0, where, 0)
    p.max_prompt_records = _int(section, "max_prompt_records", 1_000_000, where, 1)
    p.max_caption_records = _int(section, "max_caption_records", 250_000, where, 1)
    p.workers = _int(section, "workers", 1, where, 1)
    from capaudit.engine.executors import check_engine

    p.engine = check_engine(section.get("engine", "local"))
    p.address = str(section["address"]) if section.get("address") else None
    if section.get("cache_dir"):
        p.cache_dir = Path(str(section["cache_dir"]))
    pools = section.get("pools") or {}
    if not isinstance(pools, Mapping):
        raise ValueError(f"{where}.pools: expected a mapping")
    prep = pools.get("prepare") or {}
    p.prepare_sources = [source_from_params(s, f"{where}.pools.prepare.sources") for s in prep.get("sources", [])]
    p.prepare_unions = [
        UnionSpec(str(u["name"]), tuple(u["members"])) for u in prep.get("unions", []) if "name" in u and "members" in u
    ]
    if len(p.prepare_unions) != len(prep.get("unions", [])):
        raise ValueError(f"{where}.pools.prepare.unions: each union needs 'name' and 'members'")
    p.min_tokens = _int(prep, "min_tokens", MIN_TOKENS, f"{where}.pools.prepare")
    p.max_tokens = _int(prep, "max_tokens", MAX_TOKENS, f"{where}.pools.prepare")
    p.max_per_source = _int(prep, "max_per_source", None, f"{where}.pools.prepare", 1)
    p.use = str(pools.get("use", "filtered"))
    if p.use not in ("filtered", "prompt_only"):
        raise ValueError(f"{where}.pools.use: expected 'filtered' or 'prompt_only', got {p.use!r}")
    p.include = list(pools["include"]) if pools.get("include") else None
    for i, f in enumerate(pools.get("files", []) or []):
        loc = f"{where}.pools.files[{i}]"
        if not isinstance(f, Mapping) or "name" not in f:
            raise ValueError(f"{loc}: needs 'name' and 'path' (or 'dataset' + 'path')")
        p.pool_files.append(PoolFileSpec(str(f["name"]), resolve_location({k: f[k] for k in ("dataset", "path") if k in f}, loc),
                                         f.get("field"), f.get("format")))
    p.paper_pools = list(section["paper_pools"]) if section.get("paper_pools") else None
    comparisons = section.get("comparisons") or []
    if not comparisons:
        raise ValueError(f"{where}.comparisons: at least one comparison is required")
    for i, c in enumerate(comparisons):
        loc = f"{where}.comparisons[{i}]"
        if not isinstance(c, Mapping) or "name" not in c or ("pairs" in c) == ("slice" in c):
            raise ValueError(f"{loc}: needs 'name' and one of 'pairs' (a file) or 'slice' (a fair slice of this run)")
        lf = str(c.get("local_field", "local_caption"))
        rf = str(c.get("reference_field", "reference_caption"))
        if "slice" in c:  # the fair slice's pairs file; surface names from its roles
            if not slices or str(c["slice"]) not in slices:
                raise ValueError(f"{loc}.slice: '{c['slice']}' is not a slice of this run (slices: {sorted(slices or {})})")
            pairs, local_name, ref_name = slices[str(c["slice"])]
        else:
            pairs, local_name, ref_name = resolve_location(c["pairs"], f"{loc}.pairs"), lf, rf
        p.comparisons.append(
            Comparison(
                name=str(c["name"]),
                pairs=pairs,
                local_field=lf,
                reference_field=rf,
                local_surface=str(c.get("local_surface", local_name)),
                reference_surface=str(c.get("reference_surface", ref_name)),
                block_size=_int(c, "block_size", None, loc, 1),
                skip_incomplete=bool(c.get("skip_incomplete", False)),
            )
        )
    names = [c.name for c in p.comparisons]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}.comparisons: names must be unique, got {names}")
    sens = section.get("sensitivity") or {}
    if sens and sens.get("enabled", True):
        p.sensitivity_budgets = [_budget(b, f"{where}.sensitivity.budgets") for b in sens.get("budgets", [64, 128, "full"])]
        p.sensitivity_ngrams = [int(n) for n in sens.get("ngrams", [1, 2, 3])]
    return p


__all__ = ["SECTION", "Comparison", "PoolFileSpec", "StageParams", "parse_params"]
