"""Bootstrap routines (reference-spec §5.4 caption-level, §7 image-cluster)."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from capaudit.stats.bootstrap import (
    agreement_statistic,
    caption_bootstrap,
    cluster_bootstrap,
    merge_counts,
    percentile,
    weighted_nominal_agreement,
)


def _synthetic_triples(n: int, seed: int) -> list:
    r = random.Random(seed)
    out = []
    for _ in range(n):
        q = r.randint(0, 20)
        y = r.randint(0, q)
        no = r.randint(0, q - y)
        out.append((y, no, q))
    return out


def _independent(triples: list, reps: int, seed: int) -> tuple:
    """Plain-Python restatement of §5.4: fresh default_rng(seed), integers(0, n, size=n) per rep."""
    rng = np.random.default_rng(seed)
    n = len(triples)
    sups, risks = [], []
    for _ in range(reps):
        idx = [int(i) for i in rng.integers(0, n, size=n)]
        ys = sum(triples[i][0] for i in idx)
        ns = sum(triples[i][1] for i in idx)
        qs = sum(triples[i][2] for i in idx)
        sups.append(ys / n)
        risks.append(ns / qs)
    return statistics.stdev(sups), statistics.stdev(risks)


def test_caption_bootstrap_matches_independent_computation() -> None:
    triples = _synthetic_triples(300, seed=5)
    got = caption_bootstrap(triples, reps=400, seed=0)
    sup, risk = _independent(triples, reps=400, seed=0)
    assert got.supported_cap_std == pytest.approx(sup, rel=1e-12)
    assert got.risk_std == pytest.approx(risk, rel=1e-12)
    assert (got.reps, got.seed, got.n) == (400, 0, 300)


def test_caption_bootstrap_is_fresh_per_call_and_seeded() -> None:
    triples = _synthetic_triples(50, seed=1)
    a = caption_bootstrap(triples, reps=200)
    b = caption_bootstrap(triples, reps=200)
    c = caption_bootstrap(triples, reps=200, seed=1)
    assert a == b  # no hidden generator state between cells
    assert a.supported_cap_std != c.supported_cap_std


def test_caption_bootstrap_hand_values() -> None:
    # Identical captions: every replicate equals the point estimate, std 0.
    same = caption_bootstrap([(3, 1, 5)] * 10, reps=50)
    assert same.supported_cap_std == pytest.approx(0.0, abs=1e-15) and same.risk_std == pytest.approx(0.0, abs=1e-15)
    # Two captions (yes 0 or 2; q=2, no=0): supported = 2k/2 = k with k ~ Binomial(2, 1/2);
    # its std is sqrt(0.5) ≈ 0.707 for large reps.
    two = caption_bootstrap([(0, 0, 2), (2, 0, 2)], reps=2000)
    assert two.supported_cap_std == pytest.approx(0.5 ** 0.5, abs=0.03)
    assert two.risk_std == 0.0


def test_caption_bootstrap_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="row 1: yes \\+ no exceeds questions"):
        caption_bootstrap([(1, 0, 1), (2, 2, 3)])
    with pytest.raises(ValueError, match="triples"):
        caption_bootstrap([(1, 2)])
    with pytest.raises(ValueError, match="no captions"):
        caption_bootstrap(np.zeros((0, 3)))


def test_percentile_linear_interpolation() -> None:
    v = [1.0, 2.0, 4.0, 8.0]
    assert percentile(v, 0.0) == 1.0 and percentile(v, 1.0) == 8.0
    assert percentile(v, 0.5) == 3.0  # position 1.5 between 2 and 4
    assert percentile(v, 0.25) == pytest.approx(1.75)  # position 0.75
    assert percentile(v, 0.975) == pytest.approx(float(np.percentile(v, 97.5)))


def test_weighted_nominal_agreement_hand_value() -> None:
    # agree, disagree, agree with weights 2, 1, 1 -> (2 + 1) / 4
    assert weighted_nominal_agreement(["yes", "no", "uncertain"], ["yes", "yes", "uncertain"], [2, 1, 1]) == 0.75
    with pytest.raises(ValueError, match="record 1: label 'maybe'"):
        weighted_nominal_agreement(["yes", "maybe"], ["yes", "no"], categories=["yes", "no"])


def test_cluster_bootstrap_resamples_whole_clusters() -> None:
    # Cluster A: two agreeing records; cluster B: one disagreeing record. Each replicate draws two
    # whole clusters: AA (agreement 1.0), AB or BA (2/3), BB (0.0).
    records = [("yes", "yes", 1.0), ("no", "no", 1.0), ("yes", "no", 1.0)]
    res = cluster_bootstrap(records, ["A", "A", "B"], agreement_statistic, n_resamples=2000, seed=1477)
    assert res.estimate == pytest.approx(2 / 3)
    assert (res.n_records, res.n_clusters, res.n_resamples, res.seed) == (3, 2, 2000, 1477)
    assert res.lower == 0.0 and res.upper == 1.0
    # E[replicate] = 1/4·1 + 1/2·2/3 + 1/4·0 = 7/12
    assert res.bootstrap_mean == pytest.approx(7 / 12, abs=0.02)


def test_cluster_bootstrap_matches_independent_restatement() -> None:
    r = random.Random(3)
    labels = ["yes", "no", "uncertain"]
    records = [(r.choice(labels), r.choice(labels), r.choice([1.0, 2.0, 0.5])) for _ in range(40)]
    clusters = [i // 3 for i in range(40)]
    got = cluster_bootstrap(records, clusters, agreement_statistic, n_resamples=500, seed=1477)
    # Independent: clusters in first-seen order, Random(1477).randrange per draw.
    groups: dict = {}
    for rec, c in zip(records, clusters):
        groups.setdefault(c, []).append(rec)
    members = list(groups.values())
    rng = random.Random(1477)
    reps = []
    for _ in range(500):
        sample = [rec for _ in members for rec in members[rng.randrange(len(members))]]
        reps.append(sum(w for h, j, w in sample if h == j) / sum(w for _, _, w in sample))
    reps_sorted = sorted(reps)
    assert got.bootstrap_mean == pytest.approx(statistics.mean(reps))
    assert got.bootstrap_std == pytest.approx(statistics.stdev(reps))
    assert got.lower == pytest.approx(float(np.percentile(reps_sorted, 2.5)))
    assert got.upper == pytest.approx(float(np.percentile(reps_sorted, 97.5)))


def test_merge_counts_is_associative() -> None:
    a, b, c = {"yes": 1, "no": 2}, {"no": 3, "uncertain": 1}, {"yes": 5}
    assert merge_counts(merge_counts(a, b), c) == merge_counts(a, merge_counts(b, c)) == {"yes": 6, "no": 5, "uncertain": 1}
