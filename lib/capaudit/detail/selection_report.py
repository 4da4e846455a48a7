"""Every selection strategy on one pool: the exported subsets and a summary row each."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .definitions import icr_definition
from .export import export_subset
from .selection import STRATEGIES, STRATEGY_LABELS, Selection, select, subset_stats


def select_subset(rows: Sequence[Mapping[str, Any]], strategy: str, k: Any, t: Any, seed: int, out: Union[str, Path],
                  backends: Union[Mapping[str, Any], Callable[[Selection], Mapping[str, Any]], None] = None,
                  itm_field: str = "itm", where: str = "scores", extra: Optional[Mapping[str, Any]] = None
                  ) -> Tuple[Selection, Dict[str, Path], Dict[str, Any]]:
    """One strategy on a pool of score rows, exported (JSONL + Parquet + WebDataset-style manifest at
    ``out``): ``(selection, paths, subset stats)``; the step of the stage and ``capaudit detail select``.
    ``backends`` (named in the export): a mapping, or a function of the selection (the CLI names
    those of the selected rows)."""
    sel = select(rows, strategy, k, t, seed=seed, itm_field=itm_field, where=where)
    named = backends(sel) if callable(backends) else backends
    paths = export_subset(rows, sel, out, itm_field=itm_field, backends=named, extra=extra)
    return sel, paths, subset_stats(rows, sel, itm_field)


def selection_rows(rows: Sequence[Mapping[str, Any]], strategies: Sequence[str], k: Any, t: Any, seed: int,
                   out_dir: Path, backends: Mapping[str, str]) -> List[Dict[str, Any]]:
    """Run and export every strategy; one table row each (avg ICR, AOD, length, ITM, CD, and the ICR
    name and relation count of the rows)."""
    icr = icr_definition(rows)["name"]
    rel = ",".join(sorted({str(r["relation_ends"]) for r in rows if r.get("relation_ends")})) or None
    table = []
    for s in strategies:
        _, _, st = select_subset(rows, s, k if STRATEGIES[s][0] is not None else None, t if s != "full" else None,
                                 seed, out_dir / f"{s}.jsonl", backends)
        table.append({"strategy": s, "label": STRATEGY_LABELS[s], "pool": st["pool"], "k": st["k"], "t": st["t"],
                      "selected": st["selected"], "avg_icr": st["avg_icr"], "avg_aod": st["avg_aod"],
                      "avg_length": st["avg_length"], "avg_itm": st["avg_itm"], "avg_cd": st["avg_cd"],
                      "icr_definition": icr, "relation_ends": rel, "itm_scorer": backends["itm"],
                      "parser": backends["parser"], "grounding": backends["grounding"]})
    return table


__all__ = ["select_subset", "selection_rows"]
