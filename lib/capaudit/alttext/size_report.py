"""Size-dependent corpus statistics per corpus, raw (with the corpus size) and size-matched
(params ``alttext.coverage.size_matched: {n, unit, seeds}``; :mod:`.sizematch`)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from .sizematch import SIZE_NOTE, corpus_size, matched_n, size_matched, size_stats


def size_stat_rows(token_lists: Mapping[str, Sequence[Sequence[str]]], unit: str, seeds: Sequence[int],
                   n: Optional[int]) -> Tuple[List[Dict[str, Any]], int]:
    """One row per corpus (raw statistics with captions and words, size-matched mean and sd over
    ``seeds``), and the ``n`` used."""
    n_used = matched_n([corpus_size(v, unit) for v in token_lists.values()], n)
    rows = []
    for name, tl in token_lists.items():
        raw = size_stats([w for t in tl for w in t])
        m = size_matched(tl, n_used, seeds, unit)
        rows.append({"corpus": name, "captions": len(tl), "words": raw["words"], "types": raw["types"],
                     "singletons": raw["singletons"], "token_type_ratio": raw["token_type_ratio"],
                     "matched_n": n_used, "matched_unit": unit, "draws": len(seeds),
                     **{f"matched_{k}": m[k] for k in m if k.endswith(("_mean", "_sd"))},
                     "note": m.get("reason", "")})
    return rows, n_used


def size_definition(n: int, unit: str, seeds: Sequence[int]) -> str:
    """What the size-stats table shows (its note)."""
    seeds = list(seeds)
    seeds_txt = f"{seeds[0]}..{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else str(seeds)
    return (f"{SIZE_NOTE}; size-matched = the same statistic on seeded random subsamples of n = {n:,} {unit} "
            f"per corpus (unit tokens: captions in a seeded random order, first n lexical units), mean and sd "
            f"over seeds {seeds_txt}; token/type ratio = lower-cased lexical units / distinct ones")


__all__ = ["size_definition", "size_stat_rows"]
