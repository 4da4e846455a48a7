"""Agreement statistics (reference-spec §7) against hand-computed values and scikit-learn."""

from __future__ import annotations

import dataclasses
import random

import pytest
from sklearn.metrics import cohen_kappa_score

from capaudit.stats.agreement import (
    JudgeHumanRecord,
    binary_agreement,
    cohen_kappa,
    confusion_matrix,
    consensus,
    exact_agreement,
    fixed_rater_pairs,
    fleiss_kappa,
    gwet_ac1,
    judge_human_agreement,
    nominal_agreement,
    symmetrized_pairs,
    two_rater_report,
)
from capaudit.stats.bootstrap import agreement_statistic, cluster_bootstrap


def _table(a: int, b: int, c: int, d: int):
    """Pairs for a 2x2 table: a both yes, b (A yes, B no), c (A no, B yes), d both no."""
    x = ["yes"] * a + ["yes"] * b + ["no"] * c + ["no"] * d
    y = ["yes"] * a + ["no"] * b + ["yes"] * c + ["no"] * d
    return x, y


def test_two_by_two_hand_computed() -> None:
    x, y = _table(20, 5, 10, 15)  # n = 50
    # p_o = 35/50 = 0.7; A yes 25/50, B yes 30/50; p_e = .5*.6 + .5*.4 = 0.5; kappa = 0.2/0.5 = 0.4
    assert exact_agreement(x, y) == pytest.approx(0.7)
    assert cohen_kappa(x, y) == pytest.approx(0.4)
    # AC1: pi_yes = 0.55, pi_no = 0.45; p_e = 2 * 0.55 * 0.45 / (2 - 1) = 0.495; (0.7 - 0.495) / 0.505
    assert gwet_ac1(x, y, ("yes", "no")) == pytest.approx(0.205 / 0.505)
    b = binary_agreement(x, y)
    assert b.positive_agreement == pytest.approx(40 / 55)  # 2a / (2a + b + c)
    assert b.negative_agreement == pytest.approx(30 / 45)  # 2d / (2d + b + c)
    assert (b.n, b.abstentions, b.table) == (50, 0, (20, 5, 10, 15))


def test_three_label_hand_computed_and_q_is_the_label_set_size() -> None:
    a = ["yes", "yes", "no", "no", "uncertain", "yes"]
    b = ["yes", "no", "no", "uncertain", "uncertain", "yes"]
    # p_o = 4/6; marginals A (3 yes, 2 no, 1 unc), B (2 yes, 2 no, 2 unc)
    pe_k = (3 * 2 + 2 * 2 + 1 * 2) / 36  # = 1/3
    assert cohen_kappa(a, b) == pytest.approx((4 / 6 - pe_k) / (1 - pe_k))  # = 0.5
    assert cohen_kappa(a, b) == pytest.approx(0.5)
    # AC1, q = 3: pi = (5/12, 4/12, 3/12); p_e = sum pi(1-pi) / 2
    pi = [5 / 12, 4 / 12, 3 / 12]
    pe = sum(p * (1 - p) for p in pi) / 2
    assert gwet_ac1(a, b, ("yes", "no", "uncertain")) == pytest.approx((4 / 6 - pe) / (1 - pe))
    # q counts the label set, not the labels seen: a fourth, unused label changes AC1
    pe4 = sum(p * (1 - p) for p in pi) / 3
    assert gwet_ac1(a, b, ("yes", "no", "uncertain", "x")) == pytest.approx((4 / 6 - pe4) / (1 - pe4))
    nom = nominal_agreement(a, b)
    assert (nom.n, nom.exact) == (6, pytest.approx(4 / 6))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_kappa_matches_scikit_learn(seed: int) -> None:
    r = random.Random(seed)
    labels = ["yes", "no", "uncertain"]
    a = [r.choice(labels) for _ in range(200)]
    b = [x if r.random() < 0.6 else r.choice(labels) for x in a]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    x, y = _table(7, 3, 2, 9)
    assert cohen_kappa(x, y) == pytest.approx(cohen_kappa_score(x, y), abs=1e-12)


def test_kappa_undefined_when_chance_agreement_is_one() -> None:
    assert cohen_kappa(["yes"] * 4, ["yes"] * 4) is None
    assert gwet_ac1(["yes"] * 4, ["yes"] * 4, ("yes", "no")) == pytest.approx(1.0)


def test_binary_abstention_accounting() -> None:
    a = ["yes", "uncertain", "no", "uncertain", "yes", "no"]
    b = ["yes", "yes", "uncertain", "uncertain", "no", "no"]
    r = binary_agreement(a, b, abstain=("uncertain",))
    assert (r.n, r.abstentions, r.abstentions_a, r.abstentions_b, r.abstentions_both) == (3, 3, 1, 1, 1)
    assert r.exact == pytest.approx(2 / 3)
    assert r.table == (1, 1, 0, 1)
    assert r.positive_agreement == pytest.approx(2 / 3) and r.negative_agreement == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="pair 0"):
        binary_agreement(["maybe"], ["yes"])
    empty = binary_agreement(["uncertain"], ["yes"], abstain=("uncertain",))
    assert (empty.n, empty.exact, empty.positive_agreement, empty.abstentions) == (0, None, None, 1)
    only_yes = binary_agreement(["yes", "yes"], ["yes", "yes"])
    assert only_yes.negative_agreement is None and only_yes.positive_agreement == 1.0


def test_two_rater_report_keys() -> None:
    rep = two_rater_report(["yes", "no", "uncertain", "yes"], ["yes", "yes", "uncertain", "yes"])
    assert list(rep) == ["nominal", "binary"]
    assert list(rep["nominal"]) == ["n", "exact", "cohen_kappa", "gwet_ac1"]
    assert list(rep["binary"]) == ["n", "exact", "cohen_kappa", "gwet_ac1", "positive_agreement",
                                   "negative_agreement", "abstentions"]
    assert rep["nominal"]["n"] == 4 and rep["binary"]["n"] == 3 and rep["binary"]["abstentions"] == 1


def test_confusion_and_weights() -> None:
    assert confusion_matrix(["yes", "no", "no"], ["no", "no", "yes"], ("yes", "no")) == [[0, 1], [1, 1]]
    assert exact_agreement(["a", "b"], ["a", "c"], [3.0, 1.0]) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="pair 0"):
        confusion_matrix(["x"], ["yes"], ("yes", "no"))


def test_consensus_rules() -> None:
    assert consensus(["yes", "yes"]) == "yes"
    assert consensus(["yes", "no"]) is None
    assert consensus(["uncertain", "uncertain"]) == "uncertain"  # unanimous uncertain kept
    assert consensus(["yes"]) is None  # one rater is no consensus
    assert consensus(["yes", "yes", "no"]) == "yes"
    assert consensus(["yes", "no", "uncertain"]) is None
    assert consensus(["yes", "no"], adjudicated="no") == "no"
    assert consensus([], adjudicated="yes") == "yes"


def test_symmetrized_pairs() -> None:
    a, b = symmetrized_pairs({"i1": ["yes", "no"], "i2": ["yes", "yes", "no"], "i3": ["no"]})
    assert len(a) == 2 * (1 + 3)
    assert sorted(zip(a, b)) == sorted([("yes", "no"), ("no", "yes"), ("yes", "yes"), ("yes", "yes"),
                                        ("yes", "no"), ("no", "yes"), ("yes", "no"), ("no", "yes")])
    assert sorted(a) == sorted(b)  # equal marginals


def test_fleiss_kappa_worked_example() -> None:
    # Fleiss (1971)-style table of the Wikipedia worked example: 10 items, 14 raters each, 5 categories
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    ratings = {i: [str(k) for k, c in enumerate(row) for _ in range(c)] for i, row in enumerate(table)}
    n, m = len(table), 14
    p_bar = sum(sum(c * (c - 1) for c in row) / (m * (m - 1)) for row in table) / n
    pe = sum((sum(row[k] for row in table) / (n * m)) ** 2 for k in range(5))
    assert p_bar == pytest.approx(0.378, abs=5e-4) and pe == pytest.approx(0.213, abs=5e-4)
    assert fleiss_kappa(ratings) == pytest.approx((p_bar - pe) / (1 - pe))
    assert fleiss_kappa(ratings) == pytest.approx(0.210, abs=5e-4)


def test_fleiss_kappa_is_scotts_pi_with_two_raters_and_not_cohens_kappa() -> None:
    a = ["yes", "yes", "no", "no", "uncertain", "yes", "no", "yes"]
    b = ["yes", "no", "no", "uncertain", "uncertain", "yes", "yes", "yes"]
    ratings = {i: [x, y] for i, (x, y) in enumerate(zip(a, b))}
    po = sum(x == y for x, y in zip(a, b)) / len(a)
    pooled = [(a.count(k) + b.count(k)) / (2 * len(a)) for k in ("yes", "no", "uncertain")]
    pe = sum(p * p for p in pooled)
    scott = (po - pe) / (1 - pe)
    assert fleiss_kappa(ratings) == pytest.approx(scott)
    assert cohen_kappa(*symmetrized_pairs(ratings)) == pytest.approx(scott)  # the pooled-pairs κ is Scott's π
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b))
    assert abs(cohen_kappa(a, b) - scott) > 1e-3  # two different statistics
    # varying rater counts: mean per-item pair agreement, mean per-item label shares (Gwet 2014)
    var = {"i1": ["yes", "yes", "no"], "i2": ["no", "no"], "i3": ["yes", "no"], "i4": ["yes"]}
    po = (1 / 3 + 1 + 0) / 3
    pi_yes = (2 / 3 + 0 + 1 / 2) / 3
    pe = pi_yes ** 2 + (1 - pi_yes) ** 2
    assert fleiss_kappa(var) == pytest.approx((po - pe) / (1 - pe))
    assert fleiss_kappa({"i": ["yes", "yes"], "j": ["yes", "yes"]}) is None
    with pytest.raises(ValueError, match="no item has two"):
        fleiss_kappa({"i": ["yes"]})
    with pytest.raises(ValueError, match="'maybe'"):
        fleiss_kappa({"i": ["yes", "maybe"]}, ("yes", "no"))


def test_fixed_rater_pairs() -> None:
    got = fixed_rater_pairs({"i1": {"bob": "no", "amy": "yes"}, "i2": {"amy": "no", "bob": "no"}, "i3": {"amy": "x"}})
    assert got == (("amy", "bob"), ["yes", "no"], ["no", "no"])
    assert fixed_rater_pairs({"i1": {"amy": "yes", "bob": "no"}, "i2": {"amy": "no", "cat": "no"}}) is None
    assert fixed_rater_pairs({"i1": {"amy": "yes", "bob": "no", "cat": "no"}}) is None
    assert fixed_rater_pairs({"i1": {"amy": "yes"}}) is None


def _records(n: int, seed: int):
    r = random.Random(seed)
    out = []
    for i in range(n):
        h = r.choice(["yes", "no", "uncertain", "not_visual"])
        out.append(JudgeHumanRecord(item_id=f"i{i}", human=h,
                                    judges={"qwen": h if r.random() < 0.8 else "no", "gemma": r.choice(["yes", "no"])},
                                    weight=r.choice([1.0, 2.5, 4.0]), cluster=f"img{i // 2}",
                                    surface_group="ours" if i % 3 else "reference"))
    return out


def test_judge_human_agreement_equals_cluster_bootstrap_of_records() -> None:
    recs = _records(40, 3)
    got = judge_human_agreement(recs, ["qwen", "gemma"], n_resamples=500, seed=1477)
    for j in ("qwen", "gemma"):
        ref = cluster_bootstrap([(r.human, r.judges[j], r.weight) for r in recs], [r.cluster for r in recs],
                                agreement_statistic, n_resamples=500, seed=1477)
        assert dataclasses.asdict(got[j]["overall"]) == pytest.approx(dataclasses.asdict(ref), rel=1e-12)
        groups = dict(got[j]["by_surface"])
        assert sorted(groups) == ["ours", "reference"]
        sub = [r for r in recs if r.surface_group == "ours"]
        ref_g = cluster_bootstrap([(r.human, r.judges[j], r.weight) for r in sub], [r.cluster for r in sub],
                                  agreement_statistic, n_resamples=500, seed=1477)
        assert groups["ours"].estimate == pytest.approx(ref_g.estimate)
        assert groups["ours"].lower == pytest.approx(ref_g.lower)
        assert groups["ours"].n_records == len(sub)


def test_judge_human_agreement_point_estimate_by_hand() -> None:
    recs = [JudgeHumanRecord("a", "yes", {"j": "yes"}, 2.0, "c1", "ours"),
            JudgeHumanRecord("b", "no", {"j": "yes"}, 1.0, "c1", "ours"),
            JudgeHumanRecord("c", "not_visual", {"j": "no"}, 1.0, "c2", "reference")]
    got = judge_human_agreement(recs, ["j"], n_resamples=200, seed=1477)["j"]["overall"]
    assert got.estimate == pytest.approx(2.0 / 4.0)  # weighted: (2 * 1 + 1 * 0 + 1 * 0) / 4
    assert (got.n_records, got.n_clusters, got.n_resamples, got.seed) == (3, 2, 200, 1477)
    with pytest.raises(ValueError, match="no answer from judge"):
        judge_human_agreement(recs, ["other"], n_resamples=10)
    with pytest.raises(ValueError, match="human label"):
        judge_human_agreement([JudgeHumanRecord("x", "maybe", {"j": "yes"}, 1.0, "c", "g")], ["j"], n_resamples=10)


def test_judge_human_output_has_the_reference_layout(reference_dir) -> None:
    """§14 G12: the private export is not released, so check layout against the golden file."""
    import json

    from capaudit.summaries.agreement import AgreementInterval, JudgeAgreement, format_agreement, parse_agreement

    path = reference_dir / "results" / "human_cbu" / "judge_human_agreement_bootstrap.json"
    ref = json.loads(path.read_text())
    golden = parse_agreement(ref, path)
    assert golden["qwen"].overall.estimate == pytest.approx(0.84825, abs=5e-6)
    assert (golden["qwen"].overall.n_records, golden["qwen"].overall.n_resamples, golden["qwen"].overall.seed) == (
        57, 10_000, 1477)
    assert [g.n_records for g in golden["gemma"].by_surface] == [26, 31]
    recs = [JudgeHumanRecord(f"i{i}", "yes" if i % 4 else "no", {"qwen": "yes", "gemma": "yes" if i % 3 else "no"},
                             1.0 + i % 3, f"c{i}", "ours" if i < 26 else "reference") for i in range(57)]
    res = judge_human_agreement(recs, ["qwen", "gemma"], n_resamples=200)
    ours = {j: JudgeAgreement(AgreementInterval(**b["overall"].as_dict()),
                              [AgreementInterval(**cb.as_dict(), surface_group=g) for g, cb in b["by_surface"]])
            for j, b in res.items()}
    mine = json.loads(format_agreement(ours))
    for j in ("qwen", "gemma"):
        assert list(mine[j]) == list(ref[j]) == ["overall", "by_surface"]
        assert list(mine[j]["overall"]) == list(ref[j]["overall"])
        assert [list(g) for g in mine[j]["by_surface"]] == [list(g) for g in ref[j]["by_surface"]]
        assert [g["surface_group"] for g in mine[j]["by_surface"]] == ["ours", "reference"]
        assert mine[j]["overall"]["n_records"] == 57 and mine[j]["overall"]["n_clusters"] == 57
