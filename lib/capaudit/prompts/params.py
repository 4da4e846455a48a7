"""The ``prompt_support:`` params section (and ``capaudit prompt-support`` options) as one frozen value
(defaults = the reference's CLI, spec §12)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from capaudit.budgets import DEFAULT_BUDGET, SENSITIVITY_BUDGETS
from capaudit.config import ParamsSection, PathLike
from capaudit.errors import InputError
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


@dataclass(frozen=True)
class PromptSupportParams:
    """Typed view of the ``prompt_support:`` section (defaults = the reference's CLI, §12); the only
    home of the stage's defaults (``capaudit prompt-support`` takes unset options from here)."""

    budget: Optional[int] = DEFAULT_BUDGET
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
    prepare_sources: Tuple[Any, ...] = ()
    prepare_unions: Tuple[UnionSpec, ...] = ()
    min_tokens: int = MIN_TOKENS
    max_tokens: int = MAX_TOKENS
    max_per_source: Optional[int] = None
    use: str = "filtered"
    include: Optional[Tuple[str, ...]] = None
    pool_files: Tuple[PoolFileSpec, ...] = ()
    paper_pools: Optional[Tuple[str, ...]] = None
    comparisons: Tuple[Comparison, ...] = ()
    sensitivity_budgets: Tuple[Optional[int], ...] = ()
    sensitivity_ngrams: Tuple[int, ...] = ()

    KEYS = ("budget", "ngram", "hash_buckets", "alpha", "block_size", "reps", "seed", "max_prompt_records",
            "max_caption_records", "workers", "cache_dir", "pools", "paper_pools", "comparisons", "sensitivity",
            "engine", "address")

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None,
                     slices: Optional[Mapping[str, Tuple[Path, str, str]]] = None) -> "PromptSupportParams":
        """Validate the params section; errors name the params file, section and key. ``slices``:
        the run's fair slices (``comparisons[i].slice``), from :func:`capaudit.surfaces.stage.slice_pairs`."""
        return _from_section(ParamsSection.of(section, SECTION, path).only(cls.KEYS), slices)

    @classmethod
    def from_args(cls, args: argparse.Namespace, pool_files: Sequence[PoolFileSpec], comparison: Comparison,
                  cache_dir: Optional[Path]) -> "PromptSupportParams":
        """From the ``capaudit prompt-support`` options; an option not given takes the default here."""
        given = {k: getattr(args, k) for k in ("budget", "ngram", "block_size", "reps", "seed", "alpha",
                                                "hash_buckets", "max_caption_records", "max_prompt_records",
                                                "workers", "engine", "address") if hasattr(args, k)}
        return cls(**given, cache_dir=cache_dir, pool_files=tuple(pool_files), comparisons=(comparison,))


#: The name this class had (kept for callers of the stage's params).
StageParams = PromptSupportParams


def _budget(value: Any, s: ParamsSection, key: str) -> Optional[int]:
    """A text budget: a positive integer, or ``None`` for the full caption (``full``/``none``/``all``)."""
    if value is None or (isinstance(value, str) and value.lower() in ("full", "none", "all")):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise s.error(key, f"budget must be a positive integer or 'full', got {value!r}")
    return value


def _from_section(s: ParamsSection, slices: Optional[Mapping[str, Tuple[Path, str, str]]]) -> PromptSupportParams:
    from capaudit.engine.executors import check_engine

    where, P = s.name, PromptSupportParams
    v: Dict[str, Any] = {}
    v["budget"] = _budget(s.raw("budget", P.budget), s, "budget")
    for key, minimum in (("ngram", 1), ("hash_buckets", 1), ("block_size", 1), ("reps", 1), ("seed", 0),
                         ("max_prompt_records", 1), ("max_caption_records", 1), ("workers", 1)):
        v[key] = s.integer(key, getattr(P, key), minimum)
    v["alpha"] = s.number("alpha", P.alpha, 0)
    try:
        v["engine"] = check_engine(s.raw("engine", P.engine))
    except InputError as exc:
        raise s.error("engine", exc.message) from None
    v["address"] = str(s.raw("address")) if s.raw("address") else None
    if s.raw("cache_dir"):
        v["cache_dir"] = Path(str(s.raw("cache_dir")))
    pools = s.sub("pools")
    prep = pools.sub("prepare")
    v["prepare_sources"] = tuple(source_from_params(x, f"{where}.pools.prepare.sources")
                                 for x in prep.raw("sources", []))
    unions = prep.raw("unions", [])
    v["prepare_unions"] = tuple(UnionSpec(str(u["name"]), tuple(u["members"])) for u in unions
                                if "name" in u and "members" in u)
    if len(v["prepare_unions"]) != len(unions):
        raise prep.error("unions", "each union needs 'name' and 'members'")
    v["min_tokens"] = prep.integer("min_tokens", P.min_tokens, 0)
    v["max_tokens"] = prep.integer("max_tokens", P.max_tokens, 0)
    v["max_per_source"] = prep.integer("max_per_source", P.max_per_source, 1)
    v["use"] = pools.text("use", P.use)
    if v["use"] not in ("filtered", "prompt_only"):
        raise pools.error("use", f"expected 'filtered' or 'prompt_only', got {v['use']!r}")
    v["include"] = tuple(pools.raw("include")) if pools.raw("include") else None
    files = []
    for i, f in enumerate(pools.raw("files", []) or []):
        loc = f"{where}.pools.files[{i}]"
        if not isinstance(f, Mapping) or "name" not in f:
            raise s.error(f"pools.files[{i}]", "needs 'name' and 'path' (or 'dataset' + 'path')")
        files.append(PoolFileSpec(str(f["name"]), resolve_location({k: f[k] for k in ("dataset", "path") if k in f}, loc),
                                  f.get("field"), f.get("format")))
    v["pool_files"] = tuple(files)
    v["paper_pools"] = tuple(s.raw("paper_pools")) if s.raw("paper_pools") else None
    comparisons = s.raw("comparisons") or []
    if not comparisons:
        raise s.error("comparisons", "at least one comparison is required")
    out = []
    for i, c in enumerate(comparisons):
        loc = f"{where}.comparisons[{i}]"
        if not isinstance(c, Mapping) or "name" not in c or ("pairs" in c) == ("slice" in c):
            raise s.error(f"comparisons[{i}]", "needs 'name' and one of 'pairs' (a file) or 'slice' (a fair slice of this run)")
        cs = ParamsSection.of(c, loc, s.path)
        lf = cs.text("local_field", Comparison.local_field)
        rf = cs.text("reference_field", Comparison.reference_field)
        if "slice" in c:  # the fair slice's pairs file; surface names from its roles
            if not slices or str(c["slice"]) not in slices:
                raise cs.error("slice", f"'{c['slice']}' is not a slice of this run (slices: {sorted(slices or {})})")
            pairs, local_name, ref_name = slices[str(c["slice"])]
        else:
            pairs, local_name, ref_name = resolve_location(c["pairs"], f"{loc}.pairs"), lf, rf
        out.append(Comparison(name=str(c["name"]), pairs=pairs, local_field=lf, reference_field=rf,
                              local_surface=cs.text("local_surface", local_name),
                              reference_surface=cs.text("reference_surface", ref_name),
                              block_size=cs.integer("block_size", Comparison.block_size, 1),
                              skip_incomplete=cs.boolean("skip_incomplete", Comparison.skip_incomplete)))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise s.error("comparisons", f"names must be unique, got {names}")
    v["comparisons"] = tuple(out)
    sens = s.sub("sensitivity")
    if sens.values and sens.raw("enabled", True):
        v["sensitivity_budgets"] = tuple(_budget(b, sens, "budgets")
                                         for b in sens.raw("budgets", list(SENSITIVITY_BUDGETS)))
        v["sensitivity_ngrams"] = tuple(int(n) for n in sens.raw("ngrams", [1, 2, 3]))
    return PromptSupportParams(**v)


def parse_params(section: Mapping[str, Any], where: Optional[PathLike] = None,
                 slices: Optional[Mapping[str, Tuple[Path, str, str]]] = None) -> PromptSupportParams:
    """:meth:`PromptSupportParams.from_section` (``where``: the params file)."""
    return PromptSupportParams.from_section(section, where, slices)


__all__ = ["SECTION", "Comparison", "PoolFileSpec", "PromptSupportParams", "StageParams", "parse_params"]
