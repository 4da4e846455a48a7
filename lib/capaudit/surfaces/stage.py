"""Surfaces stage: load a run's declared surfaces, tabulate them, build its fair slices.

Params sections (reference-spec §11): ``surfaces:`` is a list of surface specs (see
:mod:`capaudit.surfaces.surface`); ``slices:`` is a list of
``{name, local, reference, n, seed}`` (or ``{name, surfaces: [a, b, ...], n, seed}``) items,
``n: null`` meaning every matched key.  Slices go to ``outputs/<run>/artifacts/slices/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pandas as pd

from ..config import PathLike, RunConfig
from ..io.atomic import atomic_path, write_json_atomic
from ..results import StageResult
from .params import SliceParams, SurfacesParams, read_surface_specs
from .slices import SliceManifest, build_fair_slice
from .surface import LoadStats, Surface, iter_captions, load_surface


def surface_specs(cfg: RunConfig) -> Dict[str, Dict[str, Any]]:
    """The ``surfaces:`` list of a params file, keyed by name (names must be unique)."""
    return read_surface_specs(cfg)


def _where(spec: Mapping[str, Any]) -> str:
    return (f"{spec['dataset']}/{spec['path']}" if spec.get("dataset") else
            f"hf:{spec['hf_path']}" if spec.get("format") == "hf" else str(spec.get("file") or spec.get("path")))


def surface_row(s: Surface) -> Dict[str, Any]:
    """One line of ``tables/surfaces.csv`` for a loaded surface."""
    spec = s.spec
    where = _where(spec)
    keys = int(s.frame["key"].nunique())
    return {"surface": s.name, "source": where, "caption_field": spec.get("caption_field") or "auto",
            "key_field": spec.get("key_field") or "", "rows": s.stats.rows, "records": len(s.frame), "keys": keys,
            "captions_per_key": round(len(s.frame) / keys, 4) if keys else 0.0,
            "rows_without_caption": s.stats.rows_without_caption,
            "rows_missing_field": s.stats.rows_missing_field, "rows_empty_caption": s.stats.rows_empty_caption,
            "sha256": ",".join(src.sha256 or "" for src in s.sources)}


def surface_counts(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """Rows, records and distinct keys of a surface spec, streamed (nothing is materialised)."""
    stats = LoadStats()
    keys = set()
    for r in iter_captions(spec, stats=stats):
        keys.add(r.key)
    return {"surface": spec.get("name", ""), "source": _where(spec), "caption_field": spec.get("caption_field") or "auto",
            "key_field": spec.get("key_field") or "", "rows": stats.rows, "records": stats.records, "keys": len(keys),
            "rows_without_caption": stats.rows_without_caption}


def slice_row(m: SliceManifest) -> Dict[str, Any]:
    row: Dict[str, Any] = {"slice": m.name, "surfaces": " vs ".join(m.surfaces), "n": m.n, "seed": m.seed,
                           "matched": m.matched, "sampled": m.sampled}
    row["unmatched"] = "; ".join(f"{s}={m.per_surface[s]['unmatched_count']}" for s in m.surfaces)
    row["dir"] = str(m.dir)
    return row


def load_surfaces(params: SurfacesParams, names: Optional[List[str]] = None) -> Dict[str, Surface]:
    """Load the surfaces ``names`` (default: all) and those the slices use, in that order."""
    wanted = names or list(params.specs)
    for n in wanted:
        if n not in params.specs:
            raise KeyError(f"{params.path}: surface '{n}' is not declared under 'surfaces'")
    needed = list(dict.fromkeys(wanted + [n for sl in params.slices for n in sl.surfaces]))
    return {n: load_surface(params.specs[n]) for n in needed}


def build_slice(params: SliceParams, surfaces: Mapping[str, Surface], out_dir: PathLike) -> SliceManifest:
    """Build (or reuse) one fair slice of loaded ``surfaces`` under ``out_dir``."""
    return build_fair_slice([surfaces[n] for n in params.surfaces], params.n, params.seed, out_dir, params.name,
                            overwrite=params.overwrite)


def build_slices(params: SurfacesParams, surfaces: Mapping[str, Surface], out_dir: PathLike) -> Dict[str, SliceManifest]:
    """Every slice of the run, by name."""
    return {sl.name: build_slice(sl, surfaces, out_dir) for sl in params.slices}


@dataclass(frozen=True, eq=False)
class SurfacesResult(StageResult):
    """What :func:`run` loaded and wrote: surfaces by name, their table, slice manifests and their table."""

    surfaces: Dict[str, Surface]
    table: pd.DataFrame
    slices: Dict[str, SliceManifest]
    slices_table: pd.DataFrame


def run(cfg: RunConfig, names: Optional[List[str]] = None) -> SurfacesResult:
    """Load the run's surfaces (all, or ``names``), write ``tables/surfaces.csv``, build every slice."""
    params = SurfacesParams.from_config(cfg)
    dirs = cfg.dirs()
    surfaces = load_surfaces(params, names)
    table = pd.DataFrame([surface_row(s) for s in surfaces.values()])
    with atomic_path(dirs["tables"] / "surfaces.csv") as tmp:
        table.to_csv(tmp, index=False)
    manifests = build_slices(params, surfaces, dirs["artifacts"] / "slices")
    slices_table = pd.DataFrame([slice_row(m) for m in manifests.values()])
    with atomic_path(dirs["tables"] / "slices.csv") as tmp:
        slices_table.to_csv(tmp, index=False)
    summary = {"surfaces": table.to_dict(orient="records"),
               "slices": {k: {"dir": str(m.dir), "matched": m.matched, "sampled": m.sampled,
                              "fingerprint": m.fingerprint} for k, m in manifests.items()}}
    write_json_atomic(dirs["artifacts"] / "surfaces_summary.json", summary)
    return SurfacesResult(surfaces, table, manifests, slices_table)


def slice_pairs(cfg: RunConfig) -> Dict[str, Tuple[Path, str, str]]:
    """Each declared slice's ``pairs.parquet`` with its local and reference surface names."""
    from .slices import slice_dir

    root = cfg.out_dir / "artifacts" / "slices"
    return {sl.name: (slice_dir(root, sl.name, sl.n, sl.seed) / "pairs.parquet", sl.surfaces[0], sl.surfaces[1])
            for sl in SurfacesParams.from_config(cfg).slices}


def slice_dirs(cfg: RunConfig) -> Dict[str, Path]:
    """Where each declared slice of a run lives (for later stages that read ``pairs.parquet``)."""
    return {name: pairs.parent for name, (pairs, _, _) in slice_pairs(cfg).items()}
