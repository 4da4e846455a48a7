"""Every selection strategy on one pool: the exported subsets and a summary row each."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence

from .definitions import icr_definition
from .export import export_subset
from .selection import STRATEGIES, STRATEGY_LABELS, select, subset_stats


def selection_rows(rows: Sequence[Mapping[str, Any]], strategies: Sequence[str], k: Any, t: Any, seed: int,
                   out_dir: Path, backends: Mapping[str, str]) -> List[Dict[str, Any]]:
    """Run and export every strategy; one table row each (avg ICR, AOD, length, ITM, CD, and the ICR
    name and relation count of the rows)."""
    icr = icr_definition(rows)["name"]
    rel = ",".join(sorted({str(r["relation_ends"]) for r in rows if r.get("relation_ends")})) or None
    table = []
    for s in strategies:
        sel = select(rows, s, k if STRATEGIES[s][0] is not None else None, t if s != "full" else None, seed=seed)
        export_subset(rows, sel, out_dir / f"{s}.jsonl", backends=backends)
        st = subset_stats(rows, sel)
        table.append({"strategy": s, "label": STRATEGY_LABELS[s], "pool": st["pool"], "k": st["k"], "t": st["t"],
                      "selected": st["selected"], "avg_icr": st["avg_icr"], "avg_aod": st["avg_aod"],
                      "avg_length": st["avg_length"], "avg_itm": st["avg_itm"], "avg_cd": st["avg_cd"],
                      "icr_definition": icr, "relation_ends": rel, "itm_scorer": backends["itm"],
                      "parser": backends["parser"], "grounding": backends["grounding"]})
    return table


__all__ = ["selection_rows"]
