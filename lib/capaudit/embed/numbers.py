"""The numbers the manuscript quotes from the encoder-probe stages (fragments ``encoder_truncation`` and
``embed_probes``): values with their format, never a printed form (the paper prints them)."""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, Mapping, Optional

from capaudit.summaries.numbers_fragments import macro_word

Numbers = Dict[str, Dict[str, Any]]


def _put(numbers: Numbers, name: str, value: Any, fmt: str, description: str) -> None:
    """Add a number; a missing value (None, NaN) is left out, never printed."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return
    numbers[name] = {"value": value, "format": fmt, "description": description}


def truncation_numbers(rows: Iterable[Mapping[str, Any]], empty: str) -> Numbers:
    """Per surface × encoder row (:func:`capaudit.embed.table_rows.encoder_rows`): the share of captions
    truncated and the mean tokens; rows without a truncated rate are left out."""
    numbers: Numbers = {}
    for r in rows:
        if r["truncated_rate"] is None:
            continue
        _put(numbers, macro_word("enc", "trunc", r["encoder"], r["surface"]), r["truncated_rate"], "pct:1",
             f"share of {r['surface']} captions over {r['max_length']} {r['encoder']} tokens ({r['tokenizer']})")
        _put(numbers, macro_word("enc", "tokens", r["encoder"], r["surface"]), r["mean"], "num:1",
             f"mean {r['encoder']} tokens per {r['surface']} caption (with special tokens; {r['tokenizer']}; "
             f"empty={empty})")
    return numbers


def probe_numbers(summary: Iterable[Mapping[str, Any]], support: Iterable[Mapping[str, Any]], model_label: str,
                  retrieval: Optional[Mapping[str, Any]] = None) -> Numbers:
    """Mean Vendi and eRank per surface, Coverage@k per surface × pool and, with the retrieval result,
    image-to-text R@1 per surface."""
    numbers: Numbers = {}
    for r in summary:
        _put(numbers, macro_word("embed", "vendi", r["surface"]), r["vendi_mean"], "num:1",
             f"mean Vendi of {r['surface']} ({model_label})")
        _put(numbers, macro_word("embed", "erank", r["surface"]), r["erank"], "num:1",
             f"eRank of {r['surface']} ({model_label})")
    for r in support:
        _put(numbers, macro_word("embed", "coverage", r["surface"], r["pool"]), r["coverage"], "num:3",
             f"Coverage@{r['k']} (query in gallery, not PRDC) of pool {r['pool']} in {r['surface']} ({model_label})")
    if retrieval is not None:
        rm = retrieval["model"]
        for k, v in retrieval["surfaces"].items():
            _put(numbers, macro_word("embed", "retrieval", k, "image", "to", "text", "recall", "at", "one"),
                 v["i2t_r1"], "num:3", f"i2t R@1 of {k} with {rm['name']}"
                 + (" (RANDOM-INIT model: code-path check)" if rm["random_init"] else ""))
    return numbers


__all__ = ["Numbers", "probe_numbers", "truncation_numbers"]
