"""Embedding-probe metrics (reference-spec §8.1) on constructed inputs with hand-computed values."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from capaudit.embed.metrics import (COVERAGE_NOTE, coverage_density, gallery_radii, knn_max_cosine, l2_normalize,
                                    normal_ci, spectrum, vendi_blocks, vendi_score)
from capaudit.embed.sampling import reservoir_sample, subsample_rows


def _circle(degrees):
    r = np.radians(np.asarray(degrees, dtype=np.float64))
    return np.stack([np.cos(r), np.sin(r)], axis=1)


def test_vendi_identical_vectors_is_one():
    x = l2_normalize(np.tile([[1.0, 2.0, 3.0]], (7, 1)))
    assert vendi_score(x)["vendi"] == pytest.approx(1.0)
    assert vendi_score(x)["max_eigen_prob"] == pytest.approx(1.0)


@pytest.mark.parametrize("n,d", [(4, 4), (5, 12), (3, 100)])
def test_vendi_orthonormal_vectors_is_n(n, d):
    x = np.eye(d)[:n]
    assert vendi_score(x)["vendi"] == pytest.approx(n)
    assert vendi_score(x)["max_eigen_prob"] == pytest.approx(1 / n)


def test_vendi_two_groups_hand_checked():
    # 2 copies of e1 and 2 of e2: K has eigenvalues 2, 2 (trace 4) -> p = (1/2, 1/2) -> Vendi = 2
    x = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float)
    assert vendi_score(x)["vendi"] == pytest.approx(2.0)
    # 3 copies of e1 and 1 of e2: p = (3/4, 1/4) -> exp(H) = exp(-(.75 ln .75 + .25 ln .25))
    y = np.array([[1, 0], [1, 0], [1, 0], [0, 1]], dtype=float)
    assert vendi_score(y)["vendi"] == pytest.approx(math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25))))


def test_vendi_blocks_follow_the_seeded_block_rule():
    rng = np.random.default_rng(3)
    x = l2_normalize(rng.normal(size=(50, 6)))
    r = vendi_blocks(x, block_size=10, blocks=4, seed=7)
    gen = random.Random(7)
    manual = [vendi_score(x[gen.sample(range(50), 10)])["vendi"] for _ in range(4)]
    assert r["per_block"] == pytest.approx(manual)
    assert r["vendi_mean"] == pytest.approx(np.mean(manual))
    half = 1.96 * np.std(manual, ddof=1) / 2
    assert r["vendi_ci95"] == pytest.approx([np.mean(manual) - half, np.mean(manual) + half])
    assert vendi_blocks(x, 10, 4, seed=7) == r  # deterministic under the seed
    assert vendi_blocks(x, 10, 4, seed=8)["per_block"] != r["per_block"]
    part = vendi_blocks(x, block_size=20, blocks=99, seed=0, mode="partition")
    assert part["blocks"] == 2 and part["block_size"] == 20  # 50 rows: two full blocks, the partial one dropped
    small = vendi_blocks(x, block_size=100, blocks=5)
    assert small["blocks"] == 1 and small["block_size"] == 50
    with pytest.raises(ValueError):
        vendi_blocks(x, mode="bogus")


def test_erank_of_isotropic_sample_is_about_d():
    d = 8
    x = l2_normalize(np.random.default_rng(0).normal(size=(20000, d)))
    s = spectrum(x)
    assert s["erank"] == pytest.approx(d, rel=0.01)
    assert s["participation_ratio"] == pytest.approx(d, rel=0.03)
    assert s["top1_mass"] == pytest.approx(1 / d, rel=0.1)
    assert s["top10_mass"] == pytest.approx(1.0)
    assert abs(s["mean_cosine_to_centroid"]) < 0.05


def test_spectrum_hand_checked():
    # ±e1, ±e2: centred already; cov = diag(2, 2) / 3 -> equal eigenvalues: eRank = PR = 2, top-1 = 1/2
    x = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], dtype=float)
    s = spectrum(x)
    assert s["eigenvalues"] == pytest.approx([2 / 3, 2 / 3])
    assert (s["erank"], s["participation_ratio"], s["top1_mass"]) == pytest.approx((2.0, 2.0, 0.5))
    # three points at 0°, 0°, 90°: centroid (2/3, 1/3); cosines 2/sqrt(5), 2/sqrt(5), 1/sqrt(5)
    y = _circle([0, 0, 90])
    assert spectrum(y)["mean_cosine_to_centroid"] == pytest.approx((2 + 2 + 1) / (3 * math.sqrt(5)))
    assert spectrum(y)["erank"] == pytest.approx(1.0)  # rank-1 covariance


def test_spectrum_subsample_is_seeded():
    x = l2_normalize(np.random.default_rng(1).normal(size=(300, 5)))
    a, b = spectrum(x, max_rows=100, seed=4), spectrum(x, max_rows=100, seed=4)
    assert a == b and a["rows"] == 100
    assert spectrum(x, max_rows=100, seed=5)["erank"] != a["erank"]


GALLERY = [0, 10, 30, 60, 100]       # degrees on the unit circle
QUERIES = [5, 180, 80, 45]


def test_gallery_radii_hand_checked():
    cos = lambda deg: math.cos(math.radians(deg))  # noqa: E731
    # k=1: nearest other point at 10, 10, 20, 30, 40 degrees
    assert gallery_radii(_circle(GALLERY), k=1) == pytest.approx([cos(10), cos(10), cos(20), cos(30), cos(40)])
    # k=2: second nearest at 30, 20, 30, 40, 70 degrees
    assert gallery_radii(_circle(GALLERY), k=2) == pytest.approx([cos(30), cos(20), cos(30), cos(40), cos(70)])


def test_coverage_density_hand_checked():
    g, q = _circle(GALLERY), _circle(QUERIES)
    r1 = coverage_density(g, q, k=1)
    # balls containing each query (k=1): 5° -> {0, 10}; 180° -> none; 80° -> {60, 100}; 45° -> {30, 60}
    assert r1["per_query"]["balls"] == [2, 0, 2, 2]
    assert r1["coverage"] == pytest.approx(3 / 4) and r1["density"] == pytest.approx(6 / 4)
    r2 = coverage_density(g, q, k=2)
    # k=2: 5° -> {0, 10, 30}; 180° -> none; 80° -> {60, 100}; 45° -> {30, 60, 100}
    assert r2["per_query"]["balls"] == [3, 0, 2, 3]
    assert r2["coverage"] == pytest.approx(3 / 4) and r2["density"] == pytest.approx(8 / 8)
    assert r2["note"] == COVERAGE_NOTE and "PRDC" in r2["note"]
    knn = r2["knn"]
    cos = lambda deg: math.cos(math.radians(deg))  # noqa: E731
    assert r2["per_query"]["max_cosine"] == pytest.approx([cos(5), cos(80), cos(20), cos(15)])
    assert knn["percentiles"]["p50"] == pytest.approx(cos(15))  # sorted index round(0.5 * 3) = 2
    assert knn["share_at_or_above"]["0.90"] == pytest.approx(3 / 4)
    assert knn["share_at_or_above"]["0.60"] == pytest.approx(3 / 4)
    assert knn_max_cosine(g, q)["percentiles"] == knn["percentiles"]


def test_coverage_needs_more_gallery_points_than_k():
    with pytest.raises(ValueError, match="more than k=10"):
        coverage_density(_circle(range(0, 50, 5)), _circle([1]), k=10)


def test_query_equal_to_gallery_point_is_inside_its_ball():
    g = _circle(GALLERY)
    r = coverage_density(g, g[:1], k=1)  # the query is gallery point 0: inside ball 0 (cos 1 >= cos 10°) and 10°'s
    assert r["per_query"]["balls"] == [2]


def test_normal_ci():
    ci = normal_ci([1.0, 2.0, 3.0])
    assert ci["mean"] == 2.0 and ci["std"] == 1.0
    assert ci["ci95_low"] == pytest.approx(2 - 1.96 / math.sqrt(3))
    assert normal_ci([5.0])["ci95_low"] is None


def test_reservoir_sample_is_seeded_and_uniform():
    items = list("abcdefghij")
    assert reservoir_sample(items, None) == list(enumerate(items))
    assert reservoir_sample(items, 20, seed=1) == list(enumerate(items))
    s = reservoir_sample(iter(items), 3, seed=5)
    assert s == reservoir_sample(items, 3, seed=5) and len(s) == 3
    assert [i for i, _ in s] == sorted(i for i, _ in s)
    counts = np.zeros(10)
    for seed in range(3000):
        for i, _ in reservoir_sample(items, 3, seed=seed):
            counts[i] += 1
    assert np.allclose(counts / 3000, 0.3, atol=0.04)
    with pytest.raises(ValueError):
        reservoir_sample(items, -1)


def test_subsample_rows():
    assert subsample_rows(5, None, 0).tolist() == [0, 1, 2, 3, 4]
    a = subsample_rows(100, 10, 3)
    assert a.tolist() == subsample_rows(100, 10, 3).tolist() and len(set(a.tolist())) == 10
    assert a.tolist() == np.sort(np.random.default_rng(3).choice(100, 10, replace=False)).tolist()
