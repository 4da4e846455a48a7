"""Size-dependent statistics and the size-matched comparison (issue 22)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from capaudit.alttext.sizematch import draw, matched_n, size_matched, size_stats


def _corpus(captions: int, seed: int = 7):
    """Zipf-like synthetic captions: the token/type ratio of such a corpus grows with its size."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    return [rng.choices(vocab, weights, k=rng.randint(5, 15)) for _ in range(captions)]


def test_size_stats_definition():
    s = size_stats(["a", "b", "a", "c", "a"])
    assert s == {"words": 5, "types": 3, "singletons": 2, "token_type_ratio": 5 / 3}
    assert size_stats([])["token_type_ratio"] is None


def test_one_draw_equals_direct_computation():
    tl = [["a", "b"], ["c"], ["d", "e", "f"], ["g"]]
    order = random.Random(3).sample(range(4), 4)
    flat = [w for i in order for w in tl[i]]
    assert draw(tl, 4, 3, "tokens") == flat[:4]
    picked = random.Random(3).sample(range(4), 2)
    assert draw(tl, 2, 3, "captions") == [w for i in picked for w in tl[i]]
    m = size_matched(tl, 4, [3], "tokens")
    assert m["token_type_ratio_mean"] == 4 / len(set(flat[:4])) and m["token_type_ratio_sd"] == 0.0


def test_raw_ratio_grows_with_size_matched_ratio_does_not():
    big = _corpus(8000)
    small = big[:800]  # the same corpus, a tenth of it
    raw_big = size_stats([w for t in big for w in t])["token_type_ratio"]
    raw_small = size_stats([w for t in small for w in t])["token_type_ratio"]
    assert raw_big > 1.5 * raw_small
    n = matched_n([sum(map(len, small)), sum(map(len, big))], None)
    seeds = list(range(10))
    mb, ms = size_matched(big, n, seeds), size_matched(small, n, seeds)
    assert mb["n"] == ms["n"] == n == sum(map(len, small)) and mb["seeds"] == seeds
    spread = max(mb["token_type_ratio_sd"], 0.02 * mb["token_type_ratio_mean"])
    assert abs(mb["token_type_ratio_mean"] - ms["token_type_ratio_mean"]) <= 3 * spread
    # the small corpus at its own full size: every draw is the whole corpus (a permutation)
    assert ms["token_type_ratio_sd"] == 0.0 and ms["token_type_ratio_mean"] == pytest.approx(raw_small)


def test_too_small_corpus_gets_no_number():
    m = size_matched([["a", "b"]], 5, [0, 1])
    assert m["token_type_ratio_mean"] is None and "2 tokens < n = 5" in m["reason"]
    assert size_matched([["a"], ["b"]], 3, [0], "captions")["types_mean"] is None


def test_empty_corpora_get_no_size_matched_value():
    from capaudit.alttext.sizematch import matched_n, size_matched

    assert matched_n([0, 120, 40], None) == 40  # an empty corpus does not set n to 0
    assert matched_n([0, 0], None) == 0
    empty = size_matched([[], []], 0, [0, 1])
    assert empty["token_type_ratio_mean"] is None and "no subsample" in empty["reason"]
