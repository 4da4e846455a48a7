"""Paired local − reference deltas of a fair slice with normal 95% intervals (reference-spec §2.7)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from ..budgets import DEFAULT_BUDGET
from .lexical import lex_units
from .violations import OpenerOptions, ViolationChecker


def paired_deltas(local: Sequence[str], reference: Sequence[str], budget: int = DEFAULT_BUDGET) -> pd.DataFrame:
    """Per-pair local − reference deltas with normal 95% intervals (spec §2.7).

    Metrics: full lex count, B-eligibility indicator, rep-4 inside the B window and the
    start-of-string opener on the full caption (the "fast" check of §2.7, no MULTILINE).
    """
    if len(local) != len(reference):
        raise ValueError(f"paired deltas need equal-length surfaces, got {len(local)} and {len(reference)}")
    fast = ViolationChecker(OpenerOptions(multiline=False))

    def feats(texts: Sequence[str]) -> np.ndarray:
        rows = []
        for t in texts:
            toks = lex_units(t)
            w = toks[:budget]
            grams = [tuple(w[i:i + 4]) for i in range(len(w) - 3)]
            rows.append((len(toks), float(len(toks) >= budget), float(len(grams) != len(set(grams))),
                         float(fast.is_opener(t.strip()))))
        return np.array(rows, float).reshape(-1, 4)

    d = feats(local) - feats(reference)
    names = ["avg_lexical_tokens", f"elig{budget}", f"rep4_at{budget}", "fast_full_j_meta_statement"]
    n = d.shape[0]
    out = []
    for j, name in enumerate(names):
        mean = float(d[:, j].mean()) if n else math.nan
        sd = float(d[:, j].std(ddof=1)) if n > 1 else math.nan
        half = 1.96 * sd / math.sqrt(n) if n > 1 else math.nan
        out.append({"metric": name, "pairs": n, "delta_mean": mean, "ci95_low": mean - half, "ci95_high": mean + half})
    return pd.DataFrame(out)


__all__ = ["paired_deltas"]
