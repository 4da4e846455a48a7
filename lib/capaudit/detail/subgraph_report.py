"""Controlled subgraphs of a seeded caption sample, and their reach rate per measure and target."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .graph import SceneGraph
from .subgraphs import REALISER_LABEL, TemplateRealiser, controlled_subgraphs, derived_seed


def subgraph_records(row: Mapping[str, Any], grounding: Any, measures: Sequence[str], fractions: Sequence[float],
                     seed: int, key: Any, tolerance: float, relation_ends: str,
                     fields: Optional[Mapping[str, Any]] = None, where: str = "scene graph"
                     ) -> List[Tuple[Dict[str, Any], Optional[SceneGraph]]]:
    """The controlled subgraphs of one score row (its ``scene_graph``) at each measure and fraction:
    ``(record, subgraph)`` pairs, the subgraph ``None`` where the target was not reached; ``fields``
    are written after the targets' own (the step of the stage and ``capaudit detail subgraphs``)."""
    g = SceneGraph.from_json(row["scene_graph"], where=where)
    grounded = grounding.ground(row.get("image")) if grounding is not None else None
    out = []
    for item in controlled_subgraphs(g, grounded, measures, fractions, seed, key, tolerance, relation_ends):
        s = item.pop("sample")
        rec: Dict[str, Any] = {"id": row.get("id"), "image": row.get("image"), "caption": row.get("caption"), **item,
                               **(fields or {}), "icr_kind": grounded.icr_kind if grounded is not None else None,
                               "relation_ends": relation_ends}
        if s is not None:
            rec.update({k: v for k, v in s.to_dict().items() if k not in ("measure", "fraction")})
        out.append((rec, s.graph if s is not None else None))
    return out


def subgraph_rows(rows: Sequence[Mapping[str, Any]], grounding: Any, n_captions: int, seed: int,
                  fractions: Sequence[float], tolerance: float, measures: Sequence[str], relation_ends: str
                  ) -> List[Dict[str, Any]]:
    """Controlled subgraphs of a seeded sample of ``n_captions`` captions (with a graph), realised by
    the template realiser."""
    cands = [r for r in rows if r.get("scene_graph") is not None]
    cands = sorted(cands, key=lambda r: derived_seed(seed, "sample", r["id"]))[:n_captions]
    cands = sorted(cands, key=lambda r: str(r["id"]))
    realiser = TemplateRealiser()
    out = []
    for r in cands:
        for rec, graph in subgraph_records(r, grounding, measures, fractions, seed, r["id"], tolerance, relation_ends):
            if graph is not None:
                rec["realised_caption"] = realiser.realise(graph)
                rec["realiser"] = REALISER_LABEL
            out.append(rec)
    return out


def subgraph_table(sub: Sequence[Mapping[str, Any]], backends: Optional[Mapping[str, str]] = None,
                   icr_name_: Optional[str] = None, relation_ends: Optional[str] = None) -> List[Dict[str, Any]]:
    """Reach rate and mean achieved ratio per measure and fraction (``icr_name_`` / ``relation_ends``
    name the definitions of the ICR and AOD measures)."""
    table = []
    for m in dict.fromkeys(r["measure"] for r in sub):
        for f in dict.fromkeys(r["fraction"] for r in sub if r["measure"] == m):
            cell = [r for r in sub if r["measure"] == m and r["fraction"] == f]
            ok = [r for r in cell if r["status"] == "ok"]
            table.append({"measure": m, "measure_label": m.upper(), "fraction": f, "captions": len(cell),
                          "reached": len(ok), "reach_rate": len(ok) / len(cell) if cell else None,
                          "mean_ratio": sum(r["ratio"] for r in ok) / len(ok) if ok else None,
                          "max_abs_error": max(abs(r["ratio"] - f) for r in ok) if ok else None,
                          "definition": icr_name_ if m == "icr" else (relation_ends if m == "aod" else None),
                          "realiser": REALISER_LABEL, "parser": (backends or {}).get("parser"),
                          "grounding": (backends or {}).get("grounding")})
    return table


__all__ = ["subgraph_records", "subgraph_rows", "subgraph_table"]
