"""Judge calibration with human labels (PPI / PPI++): ppi_py equality, finite-population mode,
weighted form, the coverage study, and the TIFA160 acceptance check (DSG data)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from capaudit.stats import calibration as cal
from capaudit.stats.calibration import (
    Interval,
    coverage_study,
    human_only_mean,
    judge_only_mean,
    ppi_mean,
    weighted_ppi_mean,
)

import ppi_py  # noqa: E402  (test extra: make test installs it)
from ppi_py.baselines import classical_mean_ci  # noqa: E402


def _data_dir() -> Path:
    env = os.environ.get("CAPAUDIT_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _likert_like(seed: int, n: int, n_unl: int):
    """Likert-mean human labels (1..5, 5 raters) and a yes-share judge score correlated with them."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n + n_unl)
    f = np.round(np.clip(1 / (1 + np.exp(-(1.8 + z + 0.7 * rng.normal(size=z.size)))), 0, 1) * 6) / 6
    y = np.clip(np.round(3.9 + 0.6 * z[:, None] + 0.8 * rng.normal(size=(z.size, 5))), 1, 5).mean(axis=1)
    return y[:n], f[:n], f[n:]


def _cases():
    rng = np.random.default_rng(11)
    out = [("likert", *_likert_like(3, 40, 120)), ("likert-small", *_likert_like(4, 12, 300))]
    for k in range(3):  # random data, same scale so that tuned λ is interior
        n, nu = int(rng.integers(5, 200)), int(rng.integers(5, 2000))
        x = rng.normal(size=n + nu)
        f = x + rng.normal(scale=rng.uniform(0.2, 3), size=x.size)
        y = 0.5 + x * rng.uniform(0.2, 2) + rng.normal(size=x.size)
        out.append((f"random{k}", y[:n], f[:n], f[n:]))
    return out


# ------------------------------------------------------------------------------ ppi_py equality


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.37])
@pytest.mark.parametrize("level", [0.95, 0.9])
def test_infinite_mode_equals_ppi_py(case, lam, level):
    _, y, f, fu = case
    ours = ppi_mean(y, f, fu, level=level, lam=lam)
    est = float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, fu, lam=lam)))
    lo, hi = (float(np.squeeze(v)) for v in ppi_py.ppi_mean_ci(y, f, fu, alpha=1 - level, lam=lam))
    assert ours.estimate == pytest.approx(est, abs=1e-10)
    assert ours.lo == pytest.approx(lo, abs=1e-10)
    assert ours.hi == pytest.approx(hi, abs=1e-10)
    assert ours.population is None and ours.n == len(y)
    if lam is not None:
        assert ours.lam == lam
    else:
        assert 0.0 <= ours.lam <= 1.0


def test_infinite_mode_tuned_lam_is_interior_on_random_data():
    # The equality above is not only the clipped corners: a same-scale case has 0 < λ̂ < 1.
    lams = [ppi_mean(y, f, fu).lam for name, y, f, fu in _cases() if name.startswith("random")]
    assert any(0.05 < v < 0.95 for v in lams), lams


def test_human_only_infinite_equals_classical_and_lam0():
    _, y, f, fu = _cases()[0]
    h = human_only_mean(y, level=0.9)
    lo, hi = classical_mean_ci(y, alpha=0.1)
    assert (h.lo, h.hi) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))
    p0 = ppi_mean(y, f, fu, level=0.9, lam=0.0)
    assert (p0.estimate, p0.se) == (pytest.approx(h.estimate, abs=1e-12), pytest.approx(h.se, abs=1e-12))


# -------------------------------------------------------------------------------- finite population


def _population(seed: int = 5, big_n: int = 160, n: int = 30):
    y, f, _ = _likert_like(seed, big_n, 0)
    idx = np.random.default_rng(seed).choice(big_n, size=n, replace=False)
    return y, f, idx


def test_finite_mode_fixed_lambda_formula():
    y_all, f_all, idx = _population()
    y, f, n, big_n = y_all[idx], f_all[idx], idx.size, y_all.size
    r = ppi_mean(y, f, f_all, population=big_n, lam=2.0)
    d = y - 2.0 * f
    se = np.sqrt((1 - n / big_n) * d.var(ddof=1) / n)
    q = scipy_stats.t.ppf(0.975, n - 1)
    assert r.estimate == pytest.approx(2.0 * f_all.mean() + d.mean(), abs=1e-12)
    assert r.se == pytest.approx(se, abs=1e-12)
    assert (r.lo, r.hi) == (pytest.approx(r.estimate - q * se), pytest.approx(r.estimate + q * se))
    assert r.population == big_n and r.lam == 2.0


def test_finite_mode_lam0_is_human_only_and_tuned_lam_is_ols_slope():
    y_all, f_all, idx = _population()
    y, f = y_all[idx], f_all[idx]
    h = human_only_mean(y, population=y_all.size)
    p0 = ppi_mean(y, f, f_all, population=y_all.size, lam=0.0)
    assert p0.to_dict() == pytest.approx(h.to_dict(), abs=1e-12)
    tuned = ppi_mean(y, f, f_all, population=y_all.size)
    assert tuned.lam == pytest.approx(np.polyfit(f, y, 1)[0], rel=1e-9)
    assert tuned.lam > 1.0  # not clipped: judge in [0, 1], humans in [1, 5]
    plug = ppi_mean(y, f, f_all, population=y_all.size, se_method="plugin")
    assert plug.estimate == tuned.estimate
    assert plug.se == pytest.approx(ppi_mean(y, f, f_all, population=y_all.size, lam=tuned.lam).se, abs=1e-12)


def test_jackknife_closed_form_matches_brute_force():
    y_all, f_all, idx = _population(seed=8, n=25)
    y, f, n, big_n = y_all[idx], f_all[idx], idx.size, y_all.size
    loo = []
    for i in range(n):
        keep = np.arange(n) != i
        lam_i = np.polyfit(f[keep], y[keep], 1)[0]
        loo.append(lam_i * f_all.mean() + np.mean(y[keep] - lam_i * f[keep]))
    loo = np.asarray(loo)
    se = np.sqrt((1 - n / big_n) * (n - 1) / n * np.sum((loo - loo.mean()) ** 2))
    assert ppi_mean(y, f, f_all, population=big_n).se == pytest.approx(se, rel=1e-9)
    # With a fixed λ the jackknife is the plug-in se exactly.
    jk = cal._jackknife_se(y, f, float(f_all.mean()), big_n, 1.7)
    assert float(jk) == pytest.approx(ppi_mean(y, f, f_all, population=big_n, lam=1.7).se, rel=1e-10)


def test_finite_mode_census_and_constant_judge():
    y_all, f_all, _ = _population()
    full = ppi_mean(y_all, f_all, f_all, population=y_all.size)
    assert full.estimate == pytest.approx(y_all.mean(), abs=1e-12) and full.se == pytest.approx(0.0, abs=1e-12)
    y = y_all[:20]
    const = ppi_mean(y, np.ones(20), np.r_[np.ones(20), f_all[20:]], population=y_all.size)
    assert const.lam == 0.0 and const.se == pytest.approx(human_only_mean(y, population=y_all.size).se)


def test_validation():
    y_all, f_all, idx = _population()
    with pytest.raises(ValueError, match="population"):
        ppi_mean(y_all[idx], f_all[idx], f_all, population=200)
    with pytest.raises(ValueError, match="f_labelled"):
        ppi_mean(y_all[idx], f_all[idx][:-1], f_all)
    with pytest.raises(ValueError, match="level"):
        human_only_mean(y_all, level=95)
    with pytest.raises(ValueError, match="se_method"):
        ppi_mean(y_all[idx], f_all[idx], f_all, population=160, se_method="boot")


def test_judge_only_and_interval():
    j = judge_only_mean([0.5, 1.0, 0.75], scale=(1, 5))
    assert j.estimate == pytest.approx(4.0) and j.lo == j.hi == j.estimate and j.se == 0.0
    assert j.to_dict() == {"estimate": 4.0, "lo": 4.0, "hi": 4.0, "se": 0.0}
    assert judge_only_mean([0.25, 0.75]).estimate == pytest.approx(0.5)
    with pytest.raises(Exception):
        j.estimate = 1.0  # frozen
    assert set(cal.__all__) >= {"Interval", "ppi_mean", "human_only_mean", "judge_only_mean", "coverage_study",
                                "weighted_ppi_mean"}
    assert isinstance(j, Interval)


# ------------------------------------------------------------------------------------- weighted


def test_weighted_equal_weights_matches_ppi_mean():
    y_all, f_all, idx = _population(n=40)
    y, f, n, big_n = y_all[idx], f_all[idx], idx.size, y_all.size
    for lam in (0.0, 1.0, 2.3):
        w = weighted_ppi_mean(y, f, f_all, np.full(n, big_n / n), lam=lam)
        inf = ppi_mean(y, f, f_all, lam=lam)  # f_all as the "unlabelled" set
        d = y - lam * f
        assert w.estimate == pytest.approx(inf.estimate, abs=1e-12)
        assert w.se ** 2 == pytest.approx(d.var(ddof=1) / n, rel=1e-10)
        assert inf.se ** 2 == pytest.approx(lam ** 2 * f_all.var() / big_n + d.var() / n, rel=1e-10)
    tuned = weighted_ppi_mean(y, f, f_all, np.ones(n))
    assert tuned.lam == pytest.approx(ppi_mean(y, f, f_all, population=big_n).lam, rel=1e-10)
    # weights are scale-free
    assert weighted_ppi_mean(y, f, f_all, np.full(n, 7.0)).to_dict() == pytest.approx(tuned.to_dict())


def test_weighted_stratified_simulation_coverage():
    rng = np.random.default_rng(2024)
    sizes, takes = np.array([1200, 600, 200]), np.array([30, 30, 30])  # unequal sampling fractions
    stratum = np.repeat(np.arange(3), sizes)
    z = rng.normal(size=stratum.size) + np.array([-0.8, 0.0, 1.0])[stratum]
    f_all = 1 / (1 + np.exp(-(1.0 + z + 0.8 * rng.normal(size=z.size))))
    y_all = np.clip(3.5 + 0.7 * z + 0.6 * rng.normal(size=z.size) + np.array([0.3, 0.0, -0.5])[stratum], 1, 5)
    truth = y_all.mean()
    hits, hits_nostrata, reps = 0, 0, 600
    for _ in range(reps):
        idx = np.concatenate([rng.choice(np.nonzero(stratum == h)[0], size=k, replace=False)
                              for h, k in enumerate(takes)])
        w = (sizes / takes)[stratum[idx]]
        r = weighted_ppi_mean(y_all[idx], f_all[idx], f_all, w, strata=stratum[idx])
        r1 = weighted_ppi_mean(y_all[idx], f_all[idx], f_all, w)
        hits += r.lo <= truth <= r.hi
        hits_nostrata += r1.lo <= truth <= r1.hi
    assert hits / reps >= 0.93 and hits_nostrata / reps >= 0.93, (hits / reps, hits_nostrata / reps)


# --------------------------------------------------------------------------------- coverage study


def test_coverage_study_follows_documented_draws_and_scalar_functions():
    y_all, f_all, _ = _population(seed=9)
    rows = coverage_study(y_all, f_all, ns=(20, 40), subsets=60, seed=3)
    rng = np.random.default_rng(3)
    truth = y_all.mean()
    for row, n in zip(rows, (20, 40)):
        idx = np.argsort(rng.random((60, y_all.size)), axis=1, kind="stable")[:, :n]
        ppi = [ppi_mean(y_all[i], f_all[i], f_all, population=y_all.size) for i in idx]
        hum = [human_only_mean(y_all[i], population=y_all.size) for i in idx]
        assert row.n == n and row.subsets == 60 and row.truth == pytest.approx(truth)
        assert row.ppi_coverage == pytest.approx(np.mean([r.lo <= truth <= r.hi for r in ppi]))
        assert row.human_coverage == pytest.approx(np.mean([r.lo <= truth <= r.hi for r in hum]))
        assert row.ppi_width == pytest.approx(np.mean([r.width for r in ppi]), rel=1e-10)
        assert row.human_width == pytest.approx(np.mean([r.width for r in hum]), rel=1e-10)
        assert row.relative_width == pytest.approx(row.ppi_width / row.human_width)
        assert row.judge_estimate == pytest.approx(1 + 4 * f_all.mean()) and row.judge_coverage == 0.0
    assert coverage_study(y_all, f_all, ns=(20, 40), subsets=60, seed=3) == rows


def test_coverage_study_is_fast():
    y_all, f_all, _ = _population(seed=10)
    t0 = time.perf_counter()
    for _ in range(5):
        coverage_study(y_all, f_all)
    assert time.perf_counter() - t0 < 3.0


# ------------------------------------------------------------------------ acceptance: TIFA160 data


def _tifa160():
    pd = pytest.importorskip("pandas")
    root = _data_dir() / "dsg"
    likert = root / "data" / "tifa160-likert-anns.csv"
    vqa = root / "vqa_answers_release" / "pali17b_dsg.csv"
    if not (likert.is_file() and vqa.is_file()):
        pytest.skip(f"DSG data not found under {root} (set CAPAUDIT_DATA_DIR)")
    lk = pd.read_csv(likert, keep_default_na=False)
    y = lk.groupby(["t2i_model", "item_id"])["answer"].mean().rename("y")
    va = pd.read_csv(vqa, keep_default_na=False)
    f = (va["answer"] == "yes").groupby([va["t2i_model"], va["item_id"]]).mean().rename("f")
    df = y.to_frame().join(f, how="left")
    missing = df.index[df["f"].isna()]
    df["f"] = df["f"].fillna(0.0)
    return df, missing


def test_tifa160_ppi_coverage_and_width(capsys):
    df, missing = _tifa160()
    assert len(df) == 800 and sorted({i for _, i in missing}) == ["tifa160_134"]
    lines, failures = [], []
    for model, g in df.groupby(level=0):
        assert len(g) == 160
        for r in coverage_study(g["y"].to_numpy(), g["f"].to_numpy(), ns=(20, 50, 100), subsets=1000, seed=0):
            lines.append(f"{model:13s} n={r.n:3d} truth={r.truth:.3f} judge={r.judge_estimate:.3f} "
                         f"ppi cov={r.ppi_coverage:.3f} w={r.ppi_width:.3f} | plugin cov={r.plugin_coverage:.3f} "
                         f"| human cov={r.human_coverage:.3f} w={r.human_width:.3f} | rel={r.relative_width:.3f}")
            if not (0.93 <= r.ppi_coverage <= 0.98 and r.ppi_width < r.human_width):
                failures.append(lines[-1])
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert not failures, failures


def test_weighted_jackknife_covers_with_few_labels_per_stratum():
    """With 6 labelled items per stratum the sandwich ignores λ̂'s error; the stratified jackknife
    (the default with tuned λ) keeps 95 % intervals honest."""
    rng = np.random.default_rng(11)
    sizes = (900, 400, 150)
    stratum = np.repeat(np.arange(3), sizes)
    f_all = np.clip(rng.normal(0.6 + 0.1 * stratum, 0.25), 0, 1)
    y_all = np.clip(1 + 3.5 * f_all + rng.normal(0, 0.6, f_all.size) + 0.3 * stratum, 1, 5)
    truth = y_all.mean()
    hits = {"jackknife": 0, "linearised": 0}
    sims = 600
    for _ in range(sims):
        idx = np.concatenate([rng.choice(np.flatnonzero(stratum == h), 6, replace=False) for h in range(3)])
        w = np.array([sizes[h] / 6 for h in stratum[idx]])
        for m in hits:
            r = weighted_ppi_mean(y_all[idx], f_all[idx], f_all, w, strata=stratum[idx], se_method=m)
            hits[m] += r.lo <= truth <= r.hi
    assert hits["jackknife"] / sims >= 0.93, hits
    assert hits["jackknife"] >= hits["linearised"], hits
