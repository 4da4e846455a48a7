"""Hashed n-gram support, JSD, blocks and the block bootstrap (reference-spec §3.2)."""

from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
import zlib
from collections import Counter

import numpy as np
import pytest

from capaudit.prompts.ngrams import (
    HASH_BUCKETS,
    PoolCounts,
    count_ngrams,
    count_ngrams_multi,
    hash_ngram,
    load_pool_counts,
    support_units,
)
from capaudit.prompts.support import (
    block_bootstrap,
    block_bounds,
    compare_surfaces,
    derive_seed,
    jensen_shannon,
    kl_divergence,
    mass_on_support,
    smoothed_distribution,
    stable_direction,
    whole_surface_metrics,
)


def test_support_units_lower_each_match():
    assert support_units("A person's Close-up, 3.5 blue_hair") == ["a", "person's", "close", "up", "3", "5", "blue", "hair"]
    assert support_units("Café ÉTÉ’s") == ["café", "été", "s"]


def test_hash_is_crc32_of_space_joined_units():
    assert hash_ngram(["red", "car"]) == zlib.crc32(b"red car") % 262144
    assert HASH_BUCKETS == 2**18


TEXTS = [
    "A red car parked near a red barn.",
    "",
    "one",
    "Ünïcödé naïve façade — İstanbul ΣΊΣΥΦΟΣ " + "x" * 150 + " end",
    "person's close-up 3.5 blue_hair ’s",
    "the the the the the the",
]


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("budget", [None, 1, 4, 64])
def test_vectorised_counts_equal_literal_definition(n, budget):
    expected = np.zeros(HASH_BUCKETS, dtype=np.int64)
    for text in TEXTS:
        units = support_units(text)[: budget if budget is not None else None]
        for i in range(len(units) - n + 1):
            expected[hash_ngram(units[i : i + n])] += 1
    got = count_ngrams(TEXTS, n, budget, chunk_size=2)
    assert got.dtype == np.int64
    assert np.array_equal(got, expected)


def test_multi_spec_and_workers_agree():
    specs = [(1, None), (2, 3), (3, None)]
    single = count_ngrams_multi(TEXTS * 3, specs, chunk_size=4)
    for spec, counts in zip(specs, single):
        assert np.array_equal(counts, count_ngrams(TEXTS * 3, *spec))
    parallel = count_ngrams_multi(TEXTS * 3, specs, chunk_size=4, workers=2)
    assert all(np.array_equal(a, b) for a, b in zip(single, parallel))


def test_distribution_jsd_and_mass_by_hand():
    c = np.array([1, 0, 1, 0])
    q_counts = np.array([1, 1, 0, 0])
    p = smoothed_distribution(c, alpha=0.0)
    q = smoothed_distribution(q_counts, alpha=0.0)
    assert p.tolist() == [0.5, 0.0, 0.5, 0.0]
    # m = [.5, .25, .25, 0]; KL(p||m) = KL(q||m) = .5 ln 2 → JSD = .5 ln 2
    assert jensen_shannon(p, q) == pytest.approx(0.5 * math.log(2), rel=1e-15)
    assert mass_on_support(q, c) == 0.5
    # empty counts without smoothing → uniform
    assert smoothed_distribution(np.zeros(4, dtype=np.int64), 0.0).tolist() == [0.25] * 4
    # alpha on every bucket
    s = smoothed_distribution(np.array([2, 0]), alpha=1.0)
    assert s.tolist() == [0.75, 0.25]
    assert kl_divergence(np.array([1.0, 0.0]), np.array([0.5, 0.5])) == pytest.approx(math.log(2))


def test_block_bounds_keep_last_partial_block():
    assert block_bounds(12, 5) == [(0, 5), (5, 10), (10, 12)]
    assert block_bounds(10, 5) == [(0, 5), (5, 10)]
    assert len(block_bounds(114_621, 5000)) == 23  # CC12M-Qwen3-VL in the reference
    with pytest.raises(ValueError):
        block_bounds(3, 0)


def test_derive_seed_is_blake2b_uint64():
    expected = int.from_bytes(hashlib.blake2b(b"0\x1fcmp\x1fpool\x1fjsd", digest_size=8).digest(), "little")
    assert derive_seed(0, "cmp", "pool", "jsd") == expected
    assert derive_seed(0, "cmp", "pool", "jsd") != derive_seed(1, "cmp", "pool", "jsd")
    assert derive_seed(0, "cmp", "pool", "jsd") != derive_seed(0, "cmp", "pool", "prompt_mass_on_caption_support")


def test_block_bootstrap_by_hand():
    const = block_bootstrap(np.array([0.1, 0.1, 0.1]), reps=50, seed=3)
    assert (const.delta_mean, const.ci95_low, const.ci95_high) == (pytest.approx(0.1),) * 3
    deltas = np.array([1.0, 2.0, 4.0])
    res = block_bootstrap(deltas, reps=400, seed=7)
    assert res.delta_mean == pytest.approx(7 / 3)
    assert 1.0 <= res.ci95_low <= res.delta_mean <= res.ci95_high <= 4.0
    # the first replicate's indices are the first row of one integers() call
    idx = np.random.default_rng(7).integers(0, 3, size=(400, 3))
    expected = np.quantile(deltas[idx].mean(axis=1), [0.025, 0.975])
    assert (res.ci95_low, res.ci95_high) == (float(expected[0]), float(expected[1]))


SCRIPT = (
    "import numpy as np\n"
    "from capaudit.prompts.support import block_bootstrap, derive_seed\n"
    "r = block_bootstrap(np.array([0.3, -0.1, 0.2, 0.05, 0.4]), 2000, derive_seed(0, 'cmp', 'pool', 'jsd'))\n"
    "print(repr(r.ci95_low), repr(r.ci95_high))\n"
)


def test_bootstrap_identical_across_processes_and_hash_seeds():
    outputs = set()
    for hash_seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
        outputs.add(proc.stdout.strip())
    r = block_bootstrap(np.array([0.3, -0.1, 0.2, 0.05, 0.4]), 2000, derive_seed(0, "cmp", "pool", "jsd"))
    outputs.add(f"{r.ci95_low!r} {r.ci95_high!r}")
    assert len(outputs) == 1


@pytest.mark.parametrize(
    "metric, low, high, label",
    [
        ("jsd", -0.2, -0.1, "local_lower"),
        ("jsd", 0.1, 0.2, "reference_lower"),
        ("jsd", -0.1, 0.0, "inconclusive"),
        ("jsd", 0.0, 0.1, "inconclusive"),
        ("prompt_mass_on_caption_support", 0.1, 0.2, "local_higher"),
        ("prompt_mass_on_caption_support", -0.2, -0.1, "reference_higher"),
        ("prompt_mass_on_caption_support", 0.0, 0.2, "inconclusive"),
    ],
)
def test_stable_direction(metric, low, high, label):
    assert stable_direction(metric, low, high) == label


def _naive_block_values(texts, pool_prompts, n, budget, block_size, alpha):
    """A direct re-statement of §3.2 with Counter and zlib (the oracle)."""
    pool = Counter()
    for prompt in pool_prompts:
        u = support_units(prompt)
        pool.update(zlib.crc32(" ".join(u[i : i + n]).encode()) % HASH_BUCKETS for i in range(len(u) - n + 1))
    q = np.full(HASH_BUCKETS, alpha)
    for k, v in pool.items():
        q[k] += v
    q /= q.sum()
    jsd, mass = [], []
    for start in range(0, len(texts), block_size):
        c = np.zeros(HASH_BUCKETS)
        for text in texts[start : start + block_size]:
            u = support_units(text)[:budget]
            for i in range(len(u) - n + 1):
                c[zlib.crc32(" ".join(u[i : i + n]).encode()) % HASH_BUCKETS] += 1
        p = (c + alpha) / (c + alpha).sum()
        m = (p + q) / 2
        jsd.append(0.5 * np.sum(p * np.log(p / m)) + 0.5 * np.sum(q * np.log(q / m)))
        mass.append(q[c > 0].sum())
    return np.array(jsd), np.array(mass)


def test_compare_surfaces_matches_naive_oracle():
    local = ["a red car on a street", "two dogs play in the park", "a red car", "blue sky over the sea", "cats"]
    reference = ["a car", "dogs in a park at dusk", "red", "a photo of the sky", "a cat sleeping on a mat"]
    prompts = ["a red car", "a red car parked on a street", "dogs play in a park", "the sky", "x"]
    pool = PoolCounts("toy", count_ngrams(prompts, 2), len(prompts), 2, HASH_BUCKETS)
    rows = compare_surfaces(local, reference, [pool], "cmp", "L", "R", ngram=2, budget=3, block_size=2, reps=500, seed=0)
    assert [r.metric for r in rows] == ["jsd", "prompt_mass_on_caption_support"]
    lj, lm = _naive_block_values(local, prompts, 2, 3, 2, 1e-12)
    rj, rm = _naive_block_values(reference, prompts, 2, 3, 2, 1e-12)
    jsd_row, mass_row = rows
    assert (jsd_row.blocks, jsd_row.block_size, jsd_row.records) == (3, 2, 5)
    assert jsd_row.local_block_mean == pytest.approx(lj.mean(), rel=1e-12)
    assert jsd_row.reference_block_mean == pytest.approx(rj.mean(), rel=1e-12)
    assert jsd_row.delta_mean_local_minus_reference == pytest.approx((lj - rj).mean(), rel=1e-9)
    assert mass_row.local_block_mean == pytest.approx(lm.mean(), rel=1e-12)
    assert mass_row.delta_mean_local_minus_reference == pytest.approx((lm - rm).mean(), rel=1e-9)
    # Pool bigrams: 13 (a red 2, red car 2, dogs play 1, ...). Local block 1 with B=3 has bigrams
    # {a red, red car, two dogs, dogs play} → prompt mass (2 + 2 + 1) / 13 (α shifts it by ~1e-8).
    assert lm[0] == pytest.approx(5 / 13, rel=1e-6)
    # Reference block 1: {a car, dogs in, in a} → only "in a" (1) is in the pool.
    assert rm[0] == pytest.approx(1 / 13, rel=1e-6)


def test_whole_surface_metrics_by_hand():
    cap = np.array([2, 0, 1, 0])
    pool = np.array([1, 1, 0, 2])
    m = whole_surface_metrics(cap, pool, alpha=0.0)
    assert (m["caption_buckets"], m["prompt_buckets"], m["overlap_buckets"]) == (2, 3, 1)
    assert m["prompt_mass_on_caption_support"] == pytest.approx(0.25)  # q[0]
    assert m["caption_mass_on_prompt_support"] == pytest.approx(2 / 3)  # p[0]
    assert m["kl_caption_to_prompt"] == float("inf")  # caption bucket 2 has no pool mass
    smoothed = whole_surface_metrics(cap, pool, alpha=1e-12)
    assert math.isfinite(smoothed["kl_caption_to_prompt"]) and math.isfinite(smoothed["kl_prompt_to_caption"])


def test_pool_counts_cache_is_keyed_by_content(tmp_path):
    pool_file = tmp_path / "pool.txt"
    pool_file.write_text("a red car\n\n   \nblue sky\n", encoding="utf-8")
    cache = tmp_path / "cache"
    first = load_pool_counts("p", pool_file, 2, cache_dir=cache)
    assert first.records == 2 and first.total_ngrams == 3
    assert len(list(cache.glob("p.n2.*.npy"))) == 1
    again = load_pool_counts("p", pool_file, 2, cache_dir=cache)
    assert np.array_equal(first.counts, again.counts) and again.records == 2
    pool_file.write_text("a red car\nblue sky\ngreen grass\n", encoding="utf-8")
    changed = load_pool_counts("p", pool_file, 2, cache_dir=cache)
    assert changed.total_ngrams == 4 and len(list(cache.glob("p.n2.*.npy"))) == 2
    load_pool_counts("p", pool_file, 1, cache_dir=cache)
    assert len(list(cache.glob("p.n1.*.npy"))) == 1


def test_support_units_prefix_cut_is_exact():
    long_text = ("Word's " * 40 + "naïve-CAFÉ " * 40 + "x" * 300 + " tail") * 3
    full = support_units(long_text)
    for b in (1, 5, 39, 40, 41, 80, 81, 200, 10_000):
        assert support_units(long_text, b) == full[:b]
    assert support_units("a b", 0) == []


def test_block_metrics_workers_identical():
    local = [f"a red car number {i} near the old barn" for i in range(23)]
    reference = [f"photo {i} of a cat" for i in range(23)]
    pool = PoolCounts("toy", count_ngrams(["a red car", "a cat on a mat", "old barn"], 2), 3, 2, HASH_BUCKETS)
    one = compare_surfaces(local, reference, [pool], "c", ngram=2, budget=5, block_size=4, reps=100)
    two = compare_surfaces(local, reference, [pool], "c", ngram=2, budget=5, block_size=4, reps=100, workers=2)
    assert one == two and one[0].blocks == 6


def test_pool_digest_is_remembered_only_while_the_file_is_unchanged(tmp_path, monkeypatch):
    import os
    import time

    import capaudit.prompts.io as pio

    file_digest_of = pio.file_digest

    pool_file = tmp_path / "pool.txt"
    pool_file.write_text("a red car\nblue sky\n", encoding="utf-8")
    memo = tmp_path / "cache"
    assert pio.remembered_file_digest(pool_file, memo) == pio.file_digest(pool_file)
    assert not (memo / "digests").exists()  # just written: too recent to be remembered
    monkeypatch.setattr(pio, "RACY_NS", 0)
    first = pio.remembered_file_digest(pool_file, memo)
    assert first == pio.file_digest(pool_file) and len(list((memo / "digests").glob("*.json"))) == 1

    def no_read(path, chunk=1 << 20):
        raise AssertionError("the file was read again")

    monkeypatch.setattr(pio, "file_digest", no_read)
    assert pio.remembered_file_digest(pool_file, memo) == first  # unchanged: not read
    monkeypatch.setattr(pio, "file_digest", file_digest_of)
    time.sleep(0.05)  # past the file system's time tick
    # same size, modification time set back: the change time still moves, so the file is read
    st = pool_file.stat()
    pool_file.write_text("a red bus\nblue sky\n", encoding="utf-8")
    os.utime(pool_file, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = pio.remembered_file_digest(pool_file, memo)
    assert changed == pio.file_digest(pool_file) != first
    # a damaged memo is not trusted
    (next((memo / "digests").glob("*.json"))).write_text("{not json", encoding="utf-8")
    assert pio.remembered_file_digest(pool_file, memo) == changed
    # and the pool counts follow the content through the cache
    counts = load_pool_counts("p", pool_file, 2, cache_dir=memo)
    assert counts.digest == changed


def test_pool_digest_memo_is_best_effort(tmp_path, monkeypatch):
    import errno

    import capaudit.io.atomic as atomic
    import capaudit.prompts.io as pio

    pool_file = tmp_path / "pool.txt"
    pool_file.write_text("a red car\nblue sky\n", encoding="utf-8")
    monkeypatch.setattr(pio, "RACY_NS", 0)

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(atomic, "write_text_atomic", read_only)  # a cache on a read-only volume
    assert pio.remembered_file_digest(pool_file, tmp_path / "cache") == pio.file_digest(pool_file)


def test_jensen_shannon_fast_path_is_the_definition_bit_for_bit():
    rng = np.random.default_rng(3)
    for _ in range(50):
        p = smoothed_distribution(rng.integers(0, 5, 4096) * (rng.random(4096) < 0.1), 1e-12)
        q = smoothed_distribution(rng.integers(0, 50, 4096), 1e-12)
        m = 0.5 * (p + q)
        assert jensen_shannon(p, q) == 0.5 * kl_divergence(p, m) + 0.5 * kl_divergence(q, m)
