"""Size-dependent corpus statistics and their size-matched comparison (issue 22).

Token/type ratio (``words / types``), vocabulary size (``types``) and singletons (types seen once)
all grow with corpus size (CC3M reports a token/type ratio of 804.8 on 3.3M captions; its 15,833
validation captions give ~14), so two corpora of different sizes cannot be compared on them.
:func:`size_matched` computes the same statistics on seeded random subsamples of a fixed size ``n``:

* ``unit="tokens"`` (default): the corpus's captions in the order of a seeded permutation
  (``random.Random(seed).sample(range(captions), captions)``), their lexical units concatenated, the
  first ``n`` kept: exactly ``n`` tokens whatever the caption lengths;
* ``unit="captions"``: ``random.Random(seed).sample(range(captions), n)`` captions, all their units.

Reported: mean and sample standard deviation over the seeds. A corpus smaller than ``n`` gets no
size-matched value (``None`` and a reason), never a number from fewer units.
"""

from __future__ import annotations

import random
import statistics
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

SIZE_UNITS = ("tokens", "captions")
SIZE_STATS = ("token_type_ratio", "types", "singletons")
SIZE_NOTE = ("token/type ratio, types and singletons grow with corpus size (CC3M reports a token/type ratio of "
             "804.8 on 3.3M captions): compare corpora on the size-matched values only")


def size_stats(tokens: Sequence[str]) -> Dict[str, Any]:
    """words, types, singletons and token/type ratio (words / types) of a token sequence."""
    counts = Counter(tokens)
    words, types = len(tokens), len(counts)
    return {"words": words, "types": types, "singletons": sum(1 for c in counts.values() if c == 1),
            "token_type_ratio": words / types if types else None}


def corpus_size(token_lists: Sequence[Sequence[str]], unit: str) -> int:
    return len(token_lists) if unit == "captions" else sum(len(t) for t in token_lists)


def draw(token_lists: Sequence[Sequence[str]], n: int, seed: int, unit: str = "tokens") -> List[str]:
    """The tokens of one seeded subsample of size ``n`` (module docstring)."""
    if unit not in SIZE_UNITS:
        raise ValueError(f"unit {unit!r} is not one of {SIZE_UNITS}")
    rng = random.Random(seed)
    if unit == "captions":
        return [w for i in rng.sample(range(len(token_lists)), n) for w in token_lists[i]]
    out: List[str] = []
    for i in rng.sample(range(len(token_lists)), len(token_lists)):
        out.extend(token_lists[i])
        if len(out) >= n:
            break
    return out[:n]


def size_matched(token_lists: Sequence[Sequence[str]], n: int, seeds: Sequence[int],
                 unit: str = "tokens") -> Dict[str, Any]:
    """Mean and sd over ``seeds`` of :data:`SIZE_STATS` on subsamples of size ``n`` (``None`` values and a
    ``reason`` when the corpus has fewer than ``n`` units)."""
    size = corpus_size(token_lists, unit)
    out: Dict[str, Any] = {"n": n, "unit": unit, "seeds": list(seeds), "corpus_size": size}
    if size < n or n < 1 or not seeds:
        out.update({f"{s}_{k}": None for s in SIZE_STATS for k in ("mean", "sd")})
        out["reason"] = (f"corpus has {size} {unit} < n = {n}" if size < n else
                         f"n = {n}: no subsample to draw" if n < 1 else "no seeds")
        return out
    draws = [size_stats(draw(token_lists, n, s, unit)) for s in seeds]
    for s in SIZE_STATS:
        vals = [d[s] for d in draws]
        out[f"{s}_mean"] = statistics.fmean(vals)
        out[f"{s}_sd"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return out


def matched_n(sizes: Sequence[int], n: Optional[int]) -> int:
    """The configured ``n``, or the size of the smallest non-empty corpus when none is configured
    (0 when every corpus is empty: then no corpus gets a size-matched value)."""
    if n is not None:
        return int(n)
    return min((x for x in sizes if x > 0), default=0)


__all__ = ["SIZE_UNITS", "SIZE_STATS", "SIZE_NOTE", "size_stats", "corpus_size", "draw", "size_matched", "matched_n"]
