"""Surfaces stage: load a run's declared surfaces, tabulate them, build its fair slices.

Params sections (reference-spec §11): ``surfaces:`` is a list of surface specs (see
:mod:`capaudit.surfaces.surface`); ``slices:`` is a list of
``{name, local, reference, n, seed}`` (or ``{name, surfaces: [a, b, ...], n, seed}``) items,
``n: null`` meaning every matched key.  Slices go to ``outputs/<run>/artifacts/slices/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pandas as pd

from ..config import RunConfig
from ..io.atomic import atomic_path, write_json_atomic
from .slices import SliceManifest, build_fair_slice
from .surface import LoadStats, Surface, iter_captions, load_surface


def surface_specs(cfg: RunConfig) -> Dict[str, Dict[str, Any]]:
    """The ``surfaces:`` list of a params file, keyed by name (names must be unique)."""
    raw = cfg.raw.get("surfaces")
    if raw is None:
        raise KeyError(f"{cfg.path}: params section 'surfaces' is missing")
    if not isinstance(raw, list):
        raise ValueError(f"{cfg.path}: 'surfaces' must be a list of surface specs")
    out: Dict[str, Dict[str, Any]] = {}
    for i, spec in enumerate(raw, start=1):
        if not isinstance(spec, Mapping) or not spec.get("name"):
            raise ValueError(f"{cfg.path}: surfaces item {i} must be a mapping with a 'name'")
        if spec["name"] in out:
            raise ValueError(f"{cfg.path}: surface name '{spec['name']}' is declared twice")
        out[str(spec["name"])] = dict(spec)
    return out


def slice_specs(cfg: RunConfig, known: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The ``slices:`` list, each with its ``surfaces`` resolved (local first)."""
    raw = cfg.raw.get("slices") or []
    if not isinstance(raw, list):
        raise ValueError(f"{cfg.path}: 'slices' must be a list")
    out = []
    for i, item in enumerate(raw, start=1):
        if not isinstance(item, Mapping) or not item.get("name"):
            raise ValueError(f"{cfg.path}: slices item {i} must be a mapping with a 'name'")
        names = list(item.get("surfaces") or [item.get("local"), item.get("reference")])
        if any(n is None for n in names) or len(names) < 2:
            raise ValueError(f"{cfg.path}: slice '{item['name']}' needs 'local' and 'reference' (or 'surfaces')")
        for n in names:
            if n not in known:
                raise KeyError(f"{cfg.path}: slice '{item['name']}' uses surface '{n}', not declared under 'surfaces'")
        out.append({"name": str(item["name"]), "surfaces": names, "n": item.get("n"),
                    "seed": int(item.get("seed", 0)), "overwrite": bool(item.get("overwrite", False))})
    return out


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


def run(cfg: RunConfig, names: Optional[List[str]] = None) -> Dict[str, Any]:
    """Load the run's surfaces (all, or ``names``), write ``tables/surfaces.csv``, build every slice."""
    specs = surface_specs(cfg)
    slices = slice_specs(cfg, specs)
    dirs = cfg.dirs()
    wanted = names or list(specs)
    for n in wanted:
        if n not in specs:
            raise KeyError(f"{cfg.path}: surface '{n}' is not declared under 'surfaces'")
    needed = list(dict.fromkeys(wanted + [n for sl in slices for n in sl["surfaces"]]))
    surfaces = {n: load_surface(specs[n]) for n in needed}
    table = pd.DataFrame([surface_row(surfaces[n]) for n in needed])
    with atomic_path(dirs["tables"] / "surfaces.csv") as tmp:
        table.to_csv(tmp, index=False)
    out_dir = dirs["artifacts"] / "slices"
    manifests = {sl["name"]: build_fair_slice([surfaces[n] for n in sl["surfaces"]], sl["n"], sl["seed"], out_dir,
                                              sl["name"], overwrite=sl["overwrite"]) for sl in slices}
    slices_table = pd.DataFrame([slice_row(m) for m in manifests.values()])
    with atomic_path(dirs["tables"] / "slices.csv") as tmp:
        slices_table.to_csv(tmp, index=False)
    summary = {"surfaces": table.to_dict(orient="records"),
               "slices": {k: {"dir": str(m.dir), "matched": m.matched, "sampled": m.sampled,
                              "fingerprint": m.fingerprint} for k, m in manifests.items()}}
    write_json_atomic(dirs["artifacts"] / "surfaces_summary.json", summary)
    return {"surfaces": surfaces, "table": table, "slices": manifests, "slices_table": slices_table}


def slice_pairs(cfg: RunConfig) -> Dict[str, Tuple[Path, str, str]]:
    """Each declared slice's ``pairs.parquet`` with its local and reference surface names."""
    from .slices import slice_dir

    specs = surface_specs(cfg)
    root = cfg.out_dir / "artifacts" / "slices"
    return {sl["name"]: (slice_dir(root, sl["name"], sl["n"], sl["seed"]) / "pairs.parquet", sl["surfaces"][0],
                         sl["surfaces"][1]) for sl in slice_specs(cfg, specs)}


def slice_dirs(cfg: RunConfig) -> Dict[str, Path]:
    """Where each declared slice of a run lives (for later stages that read ``pairs.parquet``)."""
    return {name: pairs.parent for name, (pairs, _, _) in slice_pairs(cfg).items()}
