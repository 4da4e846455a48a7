"""Rows of the text-budget table: one surface's survey at one budget (reference-spec §1–2)."""

from __future__ import annotations

from typing import Dict, Mapping

from ..budgets import DEFAULT_BUDGET


def prefix_mass_by_construction(block: Mapping[str, object], top_k: int) -> Dict[str, bool]:
    """Per prefix kind: True when top-``top_k`` prefix mass is 1.0 by construction.

    That is the case when ``top_k`` is at least the number of distinct prefixes in the window
    (in particular when ``top_k`` >= the number of captions): the top-k then hold every prefix,
    so the value says nothing about concentration (§2.3).
    """
    return {kind: int(block[f"prefix_{kind}"]["distinct"]) <= int(top_k) for kind in ("raw", "content")}


def surface_row(name: str, r: Mapping[str, object], budget: int = DEFAULT_BUDGET, top_k: int = 100) -> Dict[str, object]:
    """One surface: records, Avg lex, the metrics at ``budget`` (keys end in the budget) and a note
    when its top-k prefix mass is 1.0 by construction."""
    b = r["budgets"][str(budget)]
    trivial = prefix_mass_by_construction(b, top_k)
    return {
        "surface": name, "records": r["records"], "avg_lex": r["avg_lex"],
        f"elig{budget}": b["eligibility"], f"trunc{budget}": b["truncation_rate"],
        f"opener{budget}": b["opener_rate"], f"prefix_raw{budget}": b["prefix_top_mass"]["raw"],
        f"prefix_content{budget}": b["prefix_top_mass"]["content"],
        **{f"d{n}_{budget}": v for n, v in b["distinct"].items()},
        **{f"rep{n}_{budget}": v for n, v in b["rep"].items()},
        "dup_rate": r["dedup"]["normalized_duplicate_rate"],
        f"prefix_note{budget}": ("1.0 by construction (top-k covers every distinct prefix)"
                                 if any(trivial.values()) else ""),
    }


__all__ = ["prefix_mass_by_construction", "surface_row"]
