"""Embedding probes of caption surfaces and prompt pools (reference-spec §8.1), end to end.

:func:`probe` embeds every surface and pool (cached, :mod:`capaudit.embed.cache`), then reports per
surface Vendi over blocks and the covariance spectrum (eRank, participation ratio, top-1/top-10
mass, mean cosine to centroid), and per (surface, pool) Coverage@k / Density@k (query in gallery:
gallery = the surface's captions, queries = the pool's prompts, sub-sampled with seeds ``seed`` and
``seed + 1``) with kNN max-cosine percentiles and threshold shares. The model's name and revision
are in every output, with the note that this Coverage is not PRDC coverage.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from capaudit.embed.cache import DEFAULT_SHARD_SIZE, embed_cached
from capaudit.embed.metrics import (COVERAGE_NOTE, KNN_PERCENTILES, KNN_THRESHOLDS, coverage_density, spectrum,
                                    vendi_blocks)
from capaudit.embed.sampling import reservoir_sample, subsample_rows
from capaudit.errors import EmptyInputError, InputError

PathLike = Union[str, Path]


@dataclass(frozen=True)
class ProbeParams:
    """Settings of :func:`probe` (defaults: the reference's, spec §8.1 / §12)."""

    seed: int = 0
    max_records: Optional[int] = None          # reservoir sample per surface (None = all)
    max_pool_records: Optional[int] = None     # reservoir sample per pool (None = max_records)
    batch_size: int = 64
    shard_size: int = DEFAULT_SHARD_SIZE
    vendi_block_size: int = 4096
    vendi_blocks: int = 64
    vendi_mode: str = "random"
    max_rows: int = 100_000                    # spectrum
    k: int = 10
    max_gallery: Optional[int] = 20_000        # coverage/density sub-sample (seed)
    max_query: Optional[int] = 10_000          # (seed + 1)
    thresholds: Tuple[float, ...] = KNN_THRESHOLDS
    percentiles: Tuple[float, ...] = KNN_PERCENTILES

    #: The params-section keys these settings are read from (nested blocks included).
    SECTION_KEYS = ("seed", "max_records", "max_pool_records", "batch_size", "shard_size", "vendi_block_size",
                    "vendi_blocks", "vendi_mode", "max_rows", "k", "max_gallery", "max_query", "thresholds",
                    "percentiles", "vendi", "support", "geometry", "knn")

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any], where: str = "embed_probes") -> "ProbeParams":
        """Params from a mapping (a params-file section); unknown keys and bad values name the key."""
        known = {f for f in cls.__dataclass_fields__}
        nested = {"vendi": ("vendi_", ("block_size", "blocks", "mode")), "support": ("", ("k", "max_gallery", "max_query")),
                  "geometry": ("", ("max_rows",)), "knn": ("", ("thresholds", "percentiles"))}
        flat: Dict[str, Any] = {}
        for key, value in m.items():
            if key in nested and isinstance(value, Mapping):
                prefix, allowed = nested[key]
                for k2, v2 in value.items():
                    if k2 not in allowed:
                        raise InputError(f"{where}.{key}: unknown key {k2!r} (known: {', '.join(allowed)})", field=k2)
                    flat[prefix + k2] = v2
            elif key in known:
                flat[key] = value
        for k in ("thresholds", "percentiles"):
            if k in flat:
                flat[k] = tuple(float(x) for x in flat[k])
        p = cls(**flat)
        p.validate(where)
        return p

    @classmethod
    def from_args(cls, args: Any) -> "ProbeParams":
        """From the ``capaudit embed probe`` options; an option not given takes the default here."""
        given = {k: getattr(args, k) for k in cls.__dataclass_fields__ if hasattr(args, k)}
        if given.get("thresholds") is not None:
            given["thresholds"] = tuple(float(x) for x in given["thresholds"])
        p = cls(**given)
        p.validate("capaudit embed probe")
        return p

    def validate(self, where: str = "embed_probes") -> None:
        for name in ("batch_size", "shard_size", "vendi_block_size", "vendi_blocks", "max_rows", "k"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"{where}: {name} must be a positive integer, got {v!r}", field=name)
        for name in ("max_records", "max_pool_records", "max_gallery", "max_query"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise InputError(f"{where}: {name} must be a positive integer or null, got {v!r}", field=name)
        if self.vendi_mode not in ("random", "partition"):
            raise InputError(f"{where}: vendi mode must be 'random' or 'partition', got {self.vendi_mode!r}",
                             field="vendi_mode")

    @property
    def pool_records(self) -> Optional[int]:
        """Reservoir size for prompt pools (``max_pool_records``, else ``max_records``)."""
        return self.max_pool_records if self.max_pool_records is not None else self.max_records

    def to_dict(self) -> Dict[str, Any]:
        d = asdict(self)
        d["thresholds"], d["percentiles"] = list(self.thresholds), list(self.percentiles)
        return d


@dataclass
class TextSet:
    """Texts of one surface or pool after sampling, with their row ids and input counts."""

    name: str
    texts: List[str]
    row_ids: List[str]
    read: int
    empty_skipped: int = 0
    source: str = ""

    def describe(self) -> Dict[str, Any]:
        return {"records": len(self.texts), "read": self.read, "empty_skipped": self.empty_skipped,
                "source": self.source}


def sample_texts(name: str, texts: Iterable[Optional[str]], max_records: Optional[int], seed: int,
                 source: str = "") -> TextSet:
    """Strip, drop empty texts (counted), then reservoir-sample ``max_records`` with ``seed`` (stream order kept)."""
    empty = 0
    read = 0

    def clean() -> Iterable[Tuple[int, str]]:
        nonlocal empty, read
        for i, t in enumerate(texts):
            read += 1
            s = t.strip() if isinstance(t, str) else ""
            if s:
                yield i, s
            else:
                empty += 1

    picked = reservoir_sample(clean(), max_records, seed)
    rows = [x for _, x in picked]
    if not rows:
        raise EmptyInputError(f"{name!r}: no non-empty text to embed ({read} read, {empty} empty)",
                              path=source or None, field=None if source else name)
    return TextSet(name, [t for _, t in rows], [str(i) for i, _ in rows], read, empty, source)


def sample_surface(params: ProbeParams, name: str, spec: Any, source: str,
                   caption_field: Optional[str] = None) -> TextSet:
    """A caption surface (spec or file) streamed through the surfaces loader and reservoir-sampled
    (``params.max_records``, ``params.seed``); empty or null captions are counted as skipped."""
    from capaudit.surfaces import LoadStats, iter_captions

    stats = LoadStats()
    ts = sample_texts(name, (r.caption for r in iter_captions(spec, caption_field=caption_field, stats=stats)),
                      params.max_records, params.seed, source=source)
    ts.empty_skipped += stats.rows_empty_caption
    return ts


def sample_pool(params: ProbeParams, name: str, path: PathLike, source: str, field: Optional[str] = None) -> TextSet:
    """A prompt pool file reservoir-sampled (``params.pool_records``, ``params.seed``)."""
    from capaudit.prompts.io import iter_prompt_records

    return sample_texts(name, iter_prompt_records(path, field), params.pool_records, params.seed, source=source)


def _embed(ts: TextSet, encoder: Any, cache_dir: Optional[PathLike], p: ProbeParams) -> Tuple[np.ndarray, Dict[str, Any]]:
    emb = embed_cached(ts.texts, encoder, cache_dir, row_ids=ts.row_ids, shard_size=p.shard_size,
                       batch_size=p.batch_size)
    return emb.vectors, emb.describe()


def surface_probe(x: np.ndarray, p: ProbeParams) -> Dict[str, Any]:
    """Vendi over blocks and the covariance spectrum of one surface's embeddings."""
    v = vendi_blocks(x, p.vendi_block_size, p.vendi_blocks, p.seed, p.vendi_mode)
    s = spectrum(x, p.max_rows, p.seed)
    return {"vendi": v, "spectrum": s}


def support_probe(gallery: np.ndarray, queries: np.ndarray, p: ProbeParams) -> Dict[str, Any]:
    """Coverage/Density@k and kNN max-cosine of a pool (queries) against a surface (gallery)."""
    gi = subsample_rows(gallery.shape[0], p.max_gallery, p.seed)
    qi = subsample_rows(queries.shape[0], p.max_query, p.seed + 1)
    r = coverage_density(gallery[gi], queries[qi], p.k, thresholds=p.thresholds, percentiles=p.percentiles)
    r.pop("per_query", None)
    r["gallery_seed"], r["query_seed"] = p.seed, p.seed + 1
    return r


def probe(surfaces: Mapping[str, TextSet], pools: Mapping[str, TextSet], encoder: Any, *,
          params: Optional[ProbeParams] = None, cache_dir: Optional[PathLike] = None,
          keep_vectors: bool = False) -> Dict[str, Any]:
    """Run the §8.1 probes (module docstring). ``keep_vectors`` adds ``_vectors`` (name → array) for plots."""
    p = params or ProbeParams()
    p.validate()
    if not surfaces:
        raise InputError("embedding probe: give at least one surface", field="surface")
    names = list(surfaces) + list(pools)
    if len(set(names)) != len(names):
        raise InputError("embedding probe: surface and pool names must be distinct", field="name")
    model = encoder.describe()
    out: Dict[str, Any] = {"model": model, "params": p.to_dict(), "surfaces": {}, "pools": {}, "support": {},
                           "notes": [COVERAGE_NOTE,
                                     f"embeddings: {model['name']} (revision {model['revision']}), L2-normalised"]}
    vectors: Dict[str, np.ndarray] = {}
    for name, ts in surfaces.items():
        x, cache = _embed(ts, encoder, cache_dir, p)
        vectors[name] = x
        out["surfaces"][name] = {**ts.describe(), "cache": cache, **surface_probe(x, p)}
    for name, ts in pools.items():
        x, cache = _embed(ts, encoder, cache_dir, p)
        vectors[name] = x
        out["pools"][name] = {**ts.describe(), "cache": cache}
    for s in surfaces:
        out["support"][s] = {}
        for q in pools:
            out["support"][s][q] = {"model": model["name"], "revision": model["revision"],
                                    **support_probe(vectors[s], vectors[q], p)}
    if keep_vectors:
        out["_vectors"] = vectors
    return out


def summary_rows(result: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """One row per surface: records, Vendi (mean, CI), eRank, PR, top-1/top-10 mass, mean cosine to centroid."""
    m = result["model"]
    rows = []
    for name, r in result["surfaces"].items():
        v, s = r["vendi"], r["spectrum"]
        rows.append({"surface": name, "records": r["records"], "vendi_mean": v["vendi_mean"],
                     "vendi_ci95_low": v["vendi_ci95"][0], "vendi_ci95_high": v["vendi_ci95"][1],
                     "vendi_blocks": v["blocks"], "vendi_block_size": v["block_size"], "erank": s["erank"],
                     "participation_ratio": s["participation_ratio"], "top1_mass": s["top1_mass"],
                     "top10_mass": s["top10_mass"], "mean_cos_centroid": s["mean_cosine_to_centroid"],
                     "model": m["name"], "revision": m["revision"]})
    return rows


def support_rows(result: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """One row per (surface, pool): Coverage@k, Density@k, kNN max-cosine median and share ≥ 0.70."""
    m = result["model"]
    rows = []
    for s, pools in result["support"].items():
        for q, r in pools.items():
            knn = r["knn"]
            rows.append({"surface": s, "pool": q, "k": r["k"], "gallery": r["gallery"], "queries": r["queries"],
                         "coverage": r["coverage"], "density": r["density"], "knn_max_cos_p50": knn["percentiles"].get("p50"),
                         "knn_share_ge_070": knn["share_at_or_above"].get("0.70"), "model": m["name"],
                         "revision": m["revision"], "note": "query-in-gallery coverage, not PRDC coverage"})
    return rows


__all__ = ["ProbeParams", "TextSet", "probe", "sample_pool", "sample_surface", "sample_texts", "summary_rows", "support_probe", "support_rows",
           "surface_probe"]
