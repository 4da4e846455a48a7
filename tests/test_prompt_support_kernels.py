"""Prompt-support kernels (issue 24): the fast paths equal the plain definitions, exactly."""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pytest

from capaudit.text.lexical import LEX_RE

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
    # budgets found only after the prefix is doubled (7·B characters hold too few units) several times
    texts += [" ".join(["z" * 100] * 70), " ".join(["é" * 90] * 70), "-" * 5000 + " a b c"]
    chunk = tokenize_chunk(texts, budget)
    units = [[m.lower() for m in LEX_RE.findall(t)][:budget] for t in texts]  # the definition, on whole texts
    assert units == [support_units(t, budget) for t in texts]
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


def _pairs_file(tmp_path, rows, name="pairs.jsonl"):
    import json

    p = tmp_path / name
    p.write_bytes(b"".join((r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in rows))
    return p


@pytest.mark.parametrize("limit", [None, 3, 7, 1000])
@pytest.mark.parametrize("size", [1, 2, 5, 5000])
def test_pair_chunks_equal_iter_pairs(tmp_path, limit, size):
    from capaudit.prompts.io import PairStats, iter_pair_chunks, iter_pairs

    rows = [b"\xef\xbb\xbf" + b'{"local_caption": "bom", "reference_caption": "r0"}']
    rows += [{"local_caption": f"l{i}", "reference_caption": f"r{i}", "x": 1} for i in range(12)]
    rows[4] = b"   "
    rows[6] = {"local_caption": None, "reference_caption": "null local"}
    rows[9] = b""
    path = _pairs_file(tmp_path, rows)
    for skip in (False, True):
        a, b = PairStats(), PairStats()
        want = list(iter_pairs(path, limit=limit, skip_incomplete=skip, stats=a))
        got = [pair for loc, ref in iter_pair_chunks(path, limit=limit, skip_incomplete=skip, stats=b, size=size)
               for pair in zip(loc, ref)]
        assert got == want and (a.pairs, a.skipped) == (b.pairs, b.skipped)


@pytest.mark.parametrize("bad", [b'{"local_caption": 3, "reference_caption": "x"}', b'{"reference_caption": "x"}',
                                 b"[1, 2]", b"{not json"])
def test_pair_chunks_errors_equal_iter_pairs(tmp_path, bad):
    from capaudit.prompts.io import iter_pair_chunks, iter_pairs

    path = _pairs_file(tmp_path, [{"local_caption": "a", "reference_caption": "b"}] * 5 + [bad])
    with pytest.raises(ValueError) as want:
        list(iter_pairs(path))
    with pytest.raises(ValueError) as got:
        list(iter_pair_chunks(path, size=4))
    assert str(got.value) == str(want.value)


def test_prompt_runs_never_read_past_the_limit(tmp_path):
    from capaudit.prompts.io import iter_prompts

    path = _pairs_file(tmp_path, [{"prompt": f"p {i}"} for i in range(5)] + [{"prompt": ""}, b"[1]"], "pool.jsonl")
    assert list(iter_prompts(path, limit=5)) == [f"p {i}" for i in range(5)]
    with pytest.raises(ValueError, match="row 7"):
        list(iter_prompts(path, limit=6))


def _same_partition(key: np.ndarray, ids: np.ndarray, firsts: np.ndarray) -> None:
    """``ids`` number the distinct keys ``0..u-1`` (equal keys, equal ids; distinct keys, distinct
    ids), as ``pandas.factorize``'s codes do, and ``firsts[i]`` is an occurrence of id ``i``."""
    pd = pytest.importorskip("pandas")
    codes, uniq = pd.factorize(key)
    assert ids.dtype == np.int64 and ids.shape == key.shape
    if not key.size:
        assert firsts.size == 0
        return
    assert ids.min() == 0 and ids.max() == len(uniq) - 1
    assert np.unique(np.stack([codes.astype(np.int64), ids]), axis=1).shape[1] == len(uniq)  # a bijection
    assert np.array_equal(ids[firsts], np.arange(len(uniq)))


@pytest.mark.parametrize("n, distinct", [(0, 1), (1, 1), (7, 2), (5_000, 3), (100_000, 60_000), (400_000, 8_000),
                                         (300_000, 1 << 62)])
def test_factorize_equals_pandas(n, distinct):
    from capaudit.text.lexkernel import factorize_keys as _factorize

    key = np.random.default_rng(n).integers(0, distinct, n, dtype=np.uint64)
    _same_partition(key, *_factorize(key))


def test_factorize_exact_when_every_key_collides():
    from capaudit.text.lexkernel import factorize_keys as _factorize

    key = np.arange(20_000, dtype=np.uint64) << np.uint64(44)  # equal top bits after few multipliers
    key = np.concatenate([key, key[::-1], key[::7], np.array([0, 2**64 - 1, 2**63], np.uint64)])
    _same_partition(key, *_factorize(key))


def test_unit_keys_equal_exactly_when_units_equal():
    """Keys of byte runs (units, up to 300 bytes) are equal when the bytes are; distinct runs get
    distinct keys here (exact up to 7 bytes, a 64-bit hash above), as the old keys did."""
    from capaudit.text.lexkernel import unit_keys as _unit_keys; _PAD8 = bytes(8)

    rng = np.random.default_rng(5)
    alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789'"
    units = sorted({bytes(alphabet[i] for i in rng.integers(0, len(alphabet), int(k)))
                    for k in rng.integers(1, 40, 20_000)} | {b"a" * k for k in range(1, 300)} | {b"ab", b"ba"})
    seq = [units[i] for i in rng.integers(0, len(units), 60_000)]
    raw = b"\n" + b"\n".join(seq) + b"\n"
    lens = np.fromiter(map(len, seq), np.int64, len(seq))
    starts = 1 + np.cumsum(lens + 1) - (lens + 1)
    key = _unit_keys(np.frombuffer(raw + _PAD8, np.uint8), starts, starts + lens)
    by_unit = {}
    for u, k in zip(seq, key.tolist()):
        assert by_unit.setdefault(u, k) == k
    assert len(set(by_unit.values())) == len(by_unit)


@pytest.mark.parametrize("units, occurrences, max_len", [(50, 10_000, 64), (1_000, 2_000, 20), (3, 1, 0), (20, 500, 200)])
def test_shift_first_equals_shift(units, occurrences, max_len):
    """The (unit, length) table of the first shift gives :func:`_shift`'s values (and falls back
    to it for lengths past the tables or too many distinct units)."""
    from capaudit.prompts.ngrams import _shift, _shift_first

    rng = np.random.default_rng(units)
    unit_crc = rng.integers(0, 2**32, units, dtype=np.uint32)
    first = rng.integers(0, units, occurrences).astype(np.int64)
    length = rng.integers(0, max_len + 1, occurrences).astype(np.int64)
    assert np.array_equal(_shift_first(unit_crc, first, length), _shift(unit_crc[first], length))
    expect = [zlib.crc32(b"\0" * int(n), int(c)) ^ zlib.crc32(b"\0" * int(n)) for c, n in zip(unit_crc[first], length)]
    assert _shift_first(unit_crc, first, length).tolist() == expect


def test_ngram_buckets_same_with_and_without_the_pair_table(monkeypatch):
    import capaudit.prompts.ngrams as ng

    rng = np.random.default_rng(7)
    texts = ["a red car " * int(k) + "the cat's o'clock" for k in rng.integers(0, 30, 400)] + _random_texts(rng, 200, 0.9)
    chunk = tokenize_chunk(texts, 64)
    with_table = ng.ngram_buckets_per_text(chunk, 2, 64)
    monkeypatch.setattr(ng, "_PAIR_TABLE_MAX", 0)
    without = ng.ngram_buckets_per_text(chunk, 2, 64)
    assert all(np.array_equal(a, b) for a, b in zip(with_table, without))
    plain = [hash_ngram(u[i : i + 2]) for u in (support_units(t, 64) for t in texts) for i in range(len(u) - 1)]
    assert with_table[0].tolist() == plain


def _small_pool():
    from capaudit.prompts.ngrams import pool_counts_from_prompts

    return pool_counts_from_prompts("p", ["a red car", "the cat sat on the mat", "o'clock tower at noon"] * 5, 2)


def _caption_rows(n):
    rng = np.random.default_rng(n)
    return [{"local_caption": " ".join(rng.choice(["a", "red", "car", "the", "cat's", "mat", "Tower"], 12)),
             "reference_caption": " ".join(rng.choice(["a", "car", "on", "noon", "é"], 5))} for _ in range(n)]


@pytest.mark.parametrize("limit", [None, 23, 40, 5])
def test_raw_lines_metrics_equal_the_row_reader(tmp_path, limit):
    """Workers parsing their own runs of lines give the block values of the row reader."""
    from capaudit.prompts.io import iter_pair_chunks
    from capaudit.prompts.support import PreparedPool, _metrics_from_raw_lines, block_metrics_stream

    path = _pairs_file(tmp_path, _caption_rows(47))
    pools = [PreparedPool.from_counts(_small_pool(), 0.5)]
    got, records = _metrics_from_raw_lines(path, pools, "local_caption", "reference_caption", limit, 2, 4, 5, HASH_BUCKETS,
                                           0.5, 2, chunk_target=10)
    want = block_metrics_stream(None, pools, 2, 4, 5, HASH_BUCKETS, 0.5, chunk_target=10,
                                runs=iter_pair_chunks(path, limit=limit, size=5))
    assert records == (47 if limit is None else min(limit, 47)) and got.blocks == want.blocks
    for side in ("local", "reference"):
        for metric, values in getattr(want, side)["p"].items():
            assert np.array_equal(getattr(got, side)["p"][metric], values)


@pytest.mark.parametrize("odd", [None, b"", b'{"local_caption": null, "reference_caption": "x"}',
                                 b'{"local_caption": 3, "reference_caption": "x"}', b"{not json",
                                 b"\xef\xbb\xbf" + b'{"local_caption": "bom", "reference_caption": "r"}'])
def test_compare_pairs_file_two_workers_equal_one(tmp_path, odd):
    """Two local workers (raw runs of lines, or the row reader again when a line is not a plain
    pair) give the one-worker rows, or its error."""
    from capaudit.prompts.support import compare_pairs_file

    rows = _caption_rows(31)
    if odd is not None:
        rows[17] = odd
    path = _pairs_file(tmp_path, rows)
    results = []
    for workers in (1, 2):
        try:
            rows_out, stats = compare_pairs_file(path, [_small_pool()], "c", budget=4, block_size=4, reps=50,
                                                 workers=workers)
            results.append((rows_out, (stats.pairs, stats.skipped)))
        except ValueError as exc:
            results.append((type(exc), str(exc)))
    assert results[0] == results[1]


def test_line_range_jobs_cut_the_file_into_runs_of_lines(tmp_path):
    import random

    from capaudit.prompts.support import _line_range_jobs

    rng = random.Random(24)
    path = tmp_path / "pairs.jsonl"
    for _ in range(300):
        lines = ["x" * rng.randint(0, 9) for _ in range(rng.randint(0, 60))]
        data = "\n".join(lines) + ("\n" if lines and rng.random() < 0.5 else "")
        path.write_text(data, encoding="utf-8")
        limit, size = rng.choice([None, 0, 1, 5, 17, 100]), rng.randint(1, 12)
        block = rng.randint(1, size)
        want = data.encode().splitlines(keepends=True)[:limit]  # the lines a line reader gives
        counted = [0]
        got, first = [], 0
        blob = path.read_bytes()
        for p, start, end, count, bounds in _line_range_jobs(path, limit, size, block, counted, piece=rng.randint(1, 20)):
            assert p == str(path) and count == len(blob[start:end].splitlines()) and 0 < count <= size
            assert bounds == [(s, min(s + block, first + count)) for s in range(first, first + count, block)]
            got.append(blob[start:end])
            first += count
        assert b"".join(got) == b"".join(want) and counted[0] == first == len(want)


def test_lone_surrogate_is_no_unit():
    texts = ["café \ud83d nice", "a red car", "naïve \udc00x"]
    want = [support_units(t) for t in texts]
    for budget in (None, 1, 64):
        chunk = tokenize_chunk(texts, budget)
        assert chunk.lengths.tolist() == [len(u[:budget]) for u in want]
