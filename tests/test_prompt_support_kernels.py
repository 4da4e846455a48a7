"""Prompt-support kernels (issue 24): the fast paths equal the plain definitions, exactly."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pytest

from capaudit.prompts.ngrams import (
    HASH_BUCKETS,
    count_ngrams,
    hash_ngram,
    ngram_buckets,
    support_units,
    tokenize_chunk,
)

_PIECES = ["a", "red", "Car", "cat's", "o'clock", "x'", "'y", "don''t", "snake_case", "42", "3.14", "-", ",",
           "  ", "\n", "\t", "é", "Éclair", "İstanbul", "ΟΔΟΣ", "straße", "日本語", "🙂", "naïve", "x" * 9,
           "Q" * 70, "z" * 300, "mixed9Case", "’", "...", "\x00", "ABC'DEF"]


def _random_texts(rng: np.random.Generator, n: int, ascii_share: float) -> list:
    ascii_pieces = [p for p in _PIECES if p.isascii()]
    out = []
    for _ in range(n):
        pool = ascii_pieces if rng.random() < ascii_share else _PIECES
        k = int(rng.integers(0, 120))
        sep = [" ", "", " ", "-", "'"]
        out.append("".join(pool[int(rng.integers(len(pool)))] + sep[int(rng.integers(len(sep)))] for _ in range(k)))
    return out


@pytest.mark.parametrize("ascii_share", [1.0, 0.9, 0.0])
@pytest.mark.parametrize("budget", [None, 1, 5, 64])
def test_tokenize_chunk_equals_plain_definition(ascii_share, budget):
    rng = np.random.default_rng(24 + int(ascii_share * 10) + (budget or 0))
    texts = _random_texts(rng, 300, ascii_share) + ["", "   ", "!!!"]
    chunk = tokenize_chunk(texts, budget)
    units = [support_units(t, budget) for t in texts]
    assert chunk.lengths.tolist() == [len(u) for u in units]
    flat = [u for us in units for u in us]
    ucrc, scrc, slen = chunk.occurrences()
    assert ucrc.tolist() == [zlib.crc32(u.encode("utf-8")) for u in flat]
    assert scrc.tolist() == [zlib.crc32((" " + u).encode("utf-8")) for u in flat]
    assert slen.tolist() == [len((" " + u).encode("utf-8")) for u in flat]


@pytest.mark.parametrize("n,budget", [(1, None), (2, None), (2, 64), (3, 7)])
def test_ngram_buckets_equal_plain_definition(n, budget):
    rng = np.random.default_rng(7 * n)
    texts = _random_texts(rng, 200, 0.8)
    bucket, text_index = ngram_buckets(tokenize_chunk(texts, budget), n, budget, HASH_BUCKETS)
    want_b, want_t = [], []
    for i, t in enumerate(texts):
        u = support_units(t, budget)
        for k in range(len(u) - n + 1):
            want_b.append(hash_ngram(u[k : k + n]))
            want_t.append(i)
    assert bucket.tolist() == want_b
    assert text_index.tolist() == want_t
    counts = count_ngrams(texts, n, budget, HASH_BUCKETS, chunk_size=37)
    want = np.zeros(HASH_BUCKETS, np.int64)
    for b, c in Counter(want_b).items():
        want[b] = c
    assert np.array_equal(counts, want)
