"""Whole-surface prompt support at other budgets and n-gram orders (spec §3.2 sensitivity)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.prompts.ngrams import PoolCounts, count_ngrams_multi
from capaudit.prompts.params import Comparison
from capaudit.prompts.support import whole_surface_metrics


def sensitivity_rows(
    comparison: Comparison,
    local: Sequence[str],
    reference: Sequence[str],
    pools_by_n: Mapping[int, Sequence[PoolCounts]],
    budgets: Sequence[Optional[int]],
    ngrams: Sequence[int],
    buckets: int,
    alpha: float,
    workers: int = 1,
) -> List[Dict[str, Any]]:
    """Whole-surface variants (§3.2 sensitivity): every pool × role × budget × n."""
    specs = [(n, b) for b in budgets for n in ngrams]
    out: List[Dict[str, Any]] = []
    for role, surface, texts in (("local", comparison.local_surface, local), ("reference", comparison.reference_surface, reference)):
        counts = count_ngrams_multi(texts, specs, buckets, workers=workers)
        for (n, b), cap in zip(specs, counts):
            for pool in pools_by_n[n]:
                row: Dict[str, Any] = {
                    "prompt_pool": pool.name, "comparison": comparison.name, "role": role, "surface": surface,
                    "budget": "full" if b is None else b, "ngram": n, "caption_records": len(texts),
                    "prompt_records": pool.records,
                }
                row.update(whole_surface_metrics(cap, pool.counts, alpha))
                out.append(row)
    out.sort(key=lambda r: (r["prompt_pool"], r["comparison"], r["role"],
                            r["budget"] if isinstance(r["budget"], int) else float("inf"), r["ngram"]))
    return out


__all__ = ["sensitivity_rows"]
