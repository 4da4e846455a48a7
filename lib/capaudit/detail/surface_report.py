"""Per-surface detailness: mean ICR, AOD, CD and length with image-cluster bootstrap intervals."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence


def _cluster(row: Mapping[str, Any]) -> str:
    img = row.get("image")
    return str(img).replace("\\", "/").rsplit("/", 1)[-1] if img is not None else f"id:{row.get('id')}"


def surface_means(rows: Sequence[Mapping[str, Any]], n_resamples: int = 2000, seed: int = 1477,
                  confidence: float = 0.95) -> Dict[str, Any]:
    """Mean ICR, AOD, CD of one surface with image-cluster bootstrap intervals (nulls left out)."""
    from capaudit.stats.bootstrap import cluster_bootstrap

    out: Dict[str, Any] = {"captions": len(rows), "images": len({_cluster(r) for r in rows})}
    for key in ("icr", "aod", "cd", "length"):
        vals = [(float(r[key]), _cluster(r)) for r in rows if isinstance(r.get(key), (int, float))]
        out[f"n_{key}"] = len(vals)
        if len(vals) < 2:
            out[key] = {"estimate": vals[0][0] if vals else None, "lower": None, "upper": None}
            continue
        cb = cluster_bootstrap([v for v, _ in vals], [c for _, c in vals], lambda xs: sum(xs) / len(xs),
                               n_resamples=n_resamples, seed=seed, confidence=confidence)
        out[key] = {"estimate": cb.estimate, "lower": cb.lower, "upper": cb.upper, "n_clusters": cb.n_clusters}
    return out


def surface_table(means: Mapping[str, Mapping[str, Any]], labels: Mapping[str, str],
                  backends: Mapping[str, str], icr_names: Optional[Mapping[str, str]] = None,
                  relation_ends: Optional[str] = None) -> List[Dict[str, Any]]:
    """One row per surface; ``icr_names`` (surface → ICR name) and ``relation_ends`` name the definitions."""
    rows = []
    for name, m in means.items():
        row: Dict[str, Any] = {"surface": name, "label": labels.get(name, name), "captions": m["captions"],
                               "images": m["images"], "captions_with_icr": m["n_icr"]}
        for key in ("icr", "aod", "cd", "length"):
            row[f"{key}_mean"] = m[key]["estimate"]
            row[f"{key}_lower"] = m[key]["lower"]
            row[f"{key}_upper"] = m[key]["upper"]
        row.update({"icr_definition": (icr_names or {}).get(name), "relation_ends": relation_ends,
                    "parser": backends["parser"], "grounding": backends["grounding"]})
        rows.append(row)
    return rows


__all__ = ["surface_means", "surface_table"]
