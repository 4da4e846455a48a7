"""Disagreement-first sampling (issue 21): sub-strata, inclusion probabilities, unbiased weighted estimates."""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from capaudit.errors import InputError
from capaudit.human import export as ex
from capaudit.human.corrected import STATUS_OK, corrected_support
from capaudit.human.protocol import StudyConfig
from capaudit.human.sampling import Claim, allocate, base_stratum, judges_disagree, sample_items
from capaudit.human.simulate import fixture_study, simulate_adjudication, simulate_annotators

KEY = "sha256:" + "ab" * 32
JUDGES = ("ja", "jb")


def _claim(qid: str, surface: str, category: str, answers: Dict[str, str]) -> Claim:
    return Claim(question_id=qid, caption_id=qid.rsplit(":u", 1)[0], surface=surface, slice="s", category=category,
                 unit=f"unit {qid}", target="", span="", span_offsets=None, caption_window="w", image_path=None,
                 image_key=KEY, answers=dict(answers), source="synthetic", line=0)


#: (surface, category) → (pool size, disagreement claims) of the synthetic population
SHAPE = {("a", "object"): (150, 15), ("a", "count"): (120, 30), ("b", "object"): (160, 40), ("b", "count"): (90, 9)}


def _population() -> Tuple[List[Claim], Dict[str, int]]:
    """A fixed synthetic population; ``truth`` (qid → 0/1) is supported 30 % of the time among judge
    disagreements and 85 % among agreements, so disagreement-first sampling biases an unweighted mean."""
    claims, truth = [], {}
    r = random.Random(11)
    for (surface, cat), (n, n_dis) in SHAPE.items():
        for i in range(n):
            qid = f"{surface}-{cat}:{i}:u0000"
            if i < n_dis:
                answers = r.choice([{"ja": "yes", "jb": "no"}, {"ja": "no", "jb": "uncertain"},
                                    {"ja": "uncertain", "jb": "uncertain"}])
                truth[qid] = int(i % 10 < 3)
            else:
                answers = r.choice([{"ja": "yes", "jb": "yes"}, {"ja": "no", "jb": "no"}])
                truth[qid] = int(i % 20 < 17)
            claims.append(_claim(qid, surface, cat, answers))
    return claims, truth


def _conf(**kw) -> StudyConfig:
    base = dict(study_id="d", claims_per_stratum=20, repeat_fraction=0.05, require_all_strata=False,
                sampling="disagreement_first", disagreement_share=0.5)
    base.update(kw)
    return StudyConfig(**base)


# -- configuration ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting, field", [
    ({"sampling": "disagreement"}, "sampling"),
    ({"sampling": ""}, "sampling"),
    ({"disagreement_share": 0}, "disagreement_share"),
    ({"disagreement_share": 1.0}, "disagreement_share"),
    ({"disagreement_share": -0.2}, "disagreement_share"),
    ({"disagreement_share": "half"}, "disagreement_share"),
    ({"disagreement_share": True}, "disagreement_share"),
    ({"sampling": "disagreement_first", "claims_per_stratum": 1}, "claims_per_stratum"),
])
def test_bad_design_options_name_the_field(setting, field: str) -> None:
    with pytest.raises(InputError) as exc:
        StudyConfig.from_mapping({"study_id": "s", **setting}, source="p.yaml")
    assert exc.value.field == field and "\n" not in str(exc.value)


def test_design_options_round_trip() -> None:
    c = StudyConfig.from_mapping({"study_id": "s", "sampling": "disagreement_first", "disagreement_share": 0.7})
    assert (c.sampling, c.disagreement_share) == ("disagreement_first", 0.7)
    assert StudyConfig(**{**c.to_dict()}) == c
    d = StudyConfig(study_id="s")
    assert (d.sampling, d.disagreement_share) == ("reference", 0.5)


# -- design ------------------------------------------------------------------------------------------------
def test_disagreement_rule() -> None:
    mk = lambda a, b: _claim("c:0:u0000", "a", "object", {"ja": a, "jb": b})  # noqa: E731
    assert judges_disagree(mk("yes", "no"), JUDGES) and judges_disagree(mk("yes", "uncertain"), JUDGES)
    assert judges_disagree(mk("uncertain", "uncertain"), JUDGES)
    assert not judges_disagree(mk("no", "no"), JUDGES) and not judges_disagree(mk("yes", "yes"), JUDGES)


@pytest.mark.parametrize("k, sizes, share, want", [
    (20, {"disagree": 15, "agree": 135}, 0.5, {"disagree": 10, "agree": 10}),
    (20, {"disagree": 4, "agree": 135}, 0.5, {"disagree": 4, "agree": 16}),    # short sub-pool: rest to the other
    (20, {"disagree": 50, "agree": 3}, 0.5, {"disagree": 19, "agree": 1}),   # never below proportional (18.9)
    (8, {"disagree": 61, "agree": 19}, 0.5, {"disagree": 7, "agree": 1}),    # a demo-like pool: 76 % disagree
    (20, {"disagree": 50, "agree": 100}, 0.99, {"disagree": 19, "agree": 1}),  # never an empty sub-sample
    (2, {"disagree": 50, "agree": 100}, 0.01, {"disagree": 1, "agree": 1}),
    (5, {"disagree": 2, "agree": 3}, 0.5, {"disagree": 2, "agree": 3}),         # census
    (20, {"disagree": 7}, 0.5, {"disagree": 7}),
])
def test_allocation(k: int, sizes, share: float, want) -> None:
    assert allocate(k, sizes, share) == want


def test_inclusion_probabilities_and_weights() -> None:
    claims, _ = _population()
    items, rep = sample_items(claims, _conf())
    base = [i for i in items if i.repeat_index == 0]
    dis = {c.question_id: judges_disagree(c, JUDGES) for c in claims}
    by_sub: Dict[str, List] = defaultdict(list)
    for it in base:
        by_sub[it.stratum].append(it)
        assert it.stratum.endswith("/disagree" if dis[it.claim.question_id] else "/agree")
    assert len(by_sub) == 8
    for (surface, cat), (n, n_dis) in SHAPE.items():
        for sub, big_n in (("disagree", n_dis), ("agree", n - n_dis)):
            got = by_sub[f"{surface}/{cat}/{sub}"]
            n_s = len(got)
            assert {(i.population_size, i.sample_size) for i in got} == {(big_n, n_s)}
            assert all(i.sample_probability == pytest.approx(n_s / big_n) for i in got)
            assert all(i.weight == pytest.approx(big_n / n_s) for i in got)
            assert sum(i.weight for i in got) == pytest.approx(big_n)  # weights of a sub-stratum sum to its pool
            assert rep.design["substrata"][f"{surface}/{cat}/{sub}"] == {"pool": big_n, "sample": n_s,
                                                                          "probability": pytest.approx(n_s / big_n)}
        stratum_items = [i for i in base if base_stratum(i.stratum) == f"{surface}/{cat}"]
        assert sum(i.weight for i in stratum_items) == pytest.approx(n)  # ... and a stratum's to its pool
        assert rep.pools[f"{surface}/{cat}"] == n and rep.samples[f"{surface}/{cat}"] == len(stratum_items) == 20
    assert rep.design["sampling"] == "disagreement_first" and rep.design["disagreement_share"] == 0.5
    assert len({i.claim.question_id for i in base}) == len(base)  # without replacement
    reps = [i for i in items if i.repeat_index == 1]
    assert len(reps) == round(len(base) * 0.05) and all(r.weight == 0 for r in reps)
    assert all(r.stratum == next(b.stratum for b in base if b.item_id == r.repeat_of) for r in reps)
    # overlap items alternate between the sub-samples of a stratum
    for h in {base_stratum(i.stratum) for i in base}:
        ov = Counter(i.stratum.rsplit("/", 1)[1] for i in base if i.overlap and base_stratum(i.stratum) == h)
        assert ov == {"disagree": 3, "agree": 2}
    json.dumps(rep.to_dict())  # storable


def test_empirical_inclusion_frequency_matches_recorded_probability() -> None:
    claims, _ = _population()
    runs = 300
    hits: Counter = Counter()
    prob: Dict[str, float] = {}
    for seed in range(runs):
        items, _ = sample_items(claims, _conf(seed=seed, repeat_fraction=0))
        for it in items:
            hits[it.claim.question_id] += 1
            prob[it.claim.question_id] = it.sample_probability
    assert set(prob) == {c.question_id for c in claims}  # every claim can be drawn
    for q, p in prob.items():
        sd = math.sqrt(p * (1 - p) / runs) if p < 1 else 1e-9
        assert abs(hits[q] / runs - p) <= 5 * sd + 1e-12, q


def test_weighted_estimate_unbiased_unweighted_biased() -> None:
    """Monte Carlo over seeds: the Horvitz–Thompson share with the recorded weights centres on the
    population share; the plain sample mean over-represents disagreements and is biased low."""
    claims, truth = _population()
    true_share = sum(truth.values()) / len(truth)
    runs = 400
    weighted, plain = [], []
    for seed in range(runs):
        items, _ = sample_items(claims, _conf(seed=seed, repeat_fraction=0))
        w = [it.weight for it in items]
        y = [truth[it.claim.question_id] for it in items]
        weighted.append(sum(a * b for a, b in zip(w, y)) / len(claims))
        plain.append(sum(y) / len(y))

    def mean_se(xs):
        m = sum(xs) / len(xs)
        return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs))

    mw, sw = mean_se(weighted)
    mp, sp = mean_se(plain)
    assert abs(mw - true_share) < 4 * sw, (mw, true_share, sw)
    assert true_share - mp > 20 * sp and true_share - mp > 0.15, (mp, true_share, sp)


def test_disagreements_over_represented_and_reference_unchanged() -> None:
    claims, _ = _population()
    pool_share = sum(judges_disagree(c, JUDGES) for c in claims) / len(claims)
    ref_items, ref_rep = sample_items(claims, _conf(sampling="reference"))
    dis_items, _ = sample_items(claims, _conf())
    share = lambda its: sum(judges_disagree(i.claim, JUDGES) for i in its if i.repeat_index == 0) / sum(  # noqa: E731
        i.repeat_index == 0 for i in its)
    # 10 of 20 per stratum, all 9 where the disagreement sub-pool holds only 9
    assert share(dis_items) == pytest.approx(sum(min(10, d) for _, d in SHAPE.values()) / 80)
    assert share(dis_items) > 2 * pool_share and abs(share(ref_items) - pool_share) < 0.15
    # the reference design is untouched: same items as a config that never names the option
    plain = StudyConfig(study_id="d", claims_per_stratum=20, repeat_fraction=0.05, require_all_strata=False)
    items0, rep0 = sample_items(claims, plain)
    assert [(i.item_id, i.stratum, i.weight, i.overlap, i.sample_order) for i in items0] == \
        [(i.item_id, i.stratum, i.weight, i.overlap, i.sample_order) for i in ref_items]
    assert rep0.design == {"sampling": "reference"} and all(i.stratum.count("/") == 1 for i in items0)


# -- a study end to end --------------------------------------------------------------------------------------
def test_study_under_disagreement_first_gives_weighted_estimates(tmp_path: Path) -> None:
    st, _, sims = fixture_study(tmp_path, n_images=12, humans=0, simulated=3, claims_per_stratum=6,
                                target_items=200, max_items=200, mode="simulated",
                                sampling="disagreement_first", disagreement_share=0.5)
    simulate_annotators(st, [s.code for s in sims], seed=3)
    simulate_adjudication(st, seed=3)
    rep = st.sample_report()
    assert rep["design"]["sampling"] == "disagreement_first"
    items = [it for it in st.items() if it["repeat_of"] is None]
    assert items and all(it["stratum"].rsplit("/", 1)[1] in ("disagree", "agree") for it in items)
    for h, v in rep["design"]["substrata"].items():
        mine = [it for it in items if it["stratum"] == h]
        assert len(mine) == v["sample"] and sum(it["weight"] for it in mine) == pytest.approx(v["pool"])
    assert sum(v["pool"] for v in rep["design"]["substrata"].values()) == sum(rep["pools"].values())
    # judge-calibrated (PPI) and human-only estimates of supported claims from the study's labels
    cons = ex.consensus_rows(st)
    rows = [r for r in corrected_support(st) if r.status == STATUS_OK]
    assert rows
    for r in rows:
        lab = [(it, cons.get((it["item_id"], "image_support"))) for it in items if it["surface"] == r.surface]
        sub = [(float(it["weight"]), 1.0 if c == "yes" else 0.0) for it, c in lab if c in ("yes", "no")]
        hajek = sum(w * y for w, y in sub) / sum(w for w, _ in sub)
        assert r.human_only.share == pytest.approx(hajek)  # the recorded 1/pi weights, not equal weights
        assert r.ppi is not None and math.isfinite(r.ppi.share) and r.ppi.share_lo <= r.ppi.share <= r.ppi.share_hi
        design_strata = {it["stratum"] for it, c in lab if c in ("yes", "no")}  # sub-strata are the design strata
        assert r.strata - (1 if r.strata_collapsed else 0) + r.strata_collapsed == len(design_strata)
    # weighted judge-human agreement uses the same recorded weights
    recs = ex.judge_human_records(st)
    w = {it["item_id"]: float(it["weight"]) for it in items}
    assert recs and all(x.weight == w[x.item_id] for x in recs)
    # the export carries the design and the corrected estimate under it
    paths = ex.export_study(st, tmp_path / "export")
    doc = json.loads(paths["export"].read_text())
    assert doc["population"] == rep["pools"] and doc["sampling_design"] == rep["design"]
    corr = json.loads(paths["corrected"].read_text())
    assert any(r["status"] == STATUS_OK for r in corr["rows"])
    # readiness counts per §7 stratum (surface group × claim type), not per design sub-stratum
    per_stratum = next(c for c in ex.readiness(st)["checks"] if c["name"] == "substantive_per_stratum")["value"]
    assert set(per_stratum) == {it["stratum"].rsplit("/", 1)[0] for it in items}
    st.close()


def test_allocation_never_favours_agreement_and_fills_the_stratum() -> None:
    for d in range(1, 31):
        for a in range(1, 31):
            for k in range(2, min(20, d + a) + 1):
                for share in (0.1, 0.5, 0.9):
                    got = allocate(k, {"disagree": d, "agree": a}, share)
                    n_d, n_a = got["disagree"], got["agree"]
                    assert n_d + n_a == k and 1 <= n_d <= d and 1 <= n_a <= a, (d, a, k, share, got)
                    # a disagreement claim is at least as likely to be drawn as an agreement claim,
                    # unless the agree sub-stratum holds only its one guaranteed item (then every
                    # other slot went to disagreements) or every disagreement claim is drawn
                    assert n_d / d >= n_a / a or n_a == 1 or n_d == d, (d, a, k, share, got)
