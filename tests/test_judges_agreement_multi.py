"""Agreement among any number of judges (``judges_agreement`` of ``capaudit judges cells``).

The hand-checked example (three judges, six joined questions) is worked out in the comments of
:func:`test_three_judges_hand_computed`; the count-table statistics are also checked against
``statsmodels``, ``krippendorff``, scikit-learn and the two-rater functions of
:mod:`capaudit.stats.agreement` on random data.
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from fractions import Fraction as F
from pathlib import Path
from typing import Dict, List, Optional

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from test_judges_core import _judge_requests, _responses

from capaudit.cli import main
from capaudit.errors import InputError
from capaudit.judges.answers import CAT_CODE
from capaudit.judges.cells import agreement_from_codes, build_cells
from capaudit.stats.agreement import (cohen_kappa, cohen_kappa_table, fleiss_kappa, fleiss_kappa_table, gwet_ac1,
                                      gwet_ac1_table, krippendorff_alpha_table, rating_table)
from capaudit.summaries.categories import UNIT_CATEGORIES
from capaudit.summaries.cells import (CellsFile, JudgesAgreement, MultiAgreement, PairAgreement, format_cells,
                                      merge_cells_files, parse_cells, read_cells)

LABELS = ["yes", "no", "uncertain"]
SURFACE = {"c1": "ours", "c2": "ours", "c3": "ref", "c4": "ref"}
SPEC = {"c1": ["object", "object", "count"], "c2": ["object", "relation"], "c3": ["attribute"], "c4": ["style"]}
# per caption, the answers of J1, J2, J3 (c4 fails for J3, so it leaves the intersection)
ANSWERS = {
    "J1": {"c1": ["yes", "yes", "no"], "c2": ["no", "yes"], "c3": ["uncertain"], "c4": ["yes"]},
    "J2": {"c1": ["yes", "no", "no"], "c2": ["no", "yes"], "c3": ["uncertain"], "c4": ["no"]},
    "J3": {"c1": ["yes", "yes", "uncertain"], "c2": ["yes", "yes"], "c3": ["uncertain"], "c4": "HTTP 500"},
}


def _slice(tmp: Path, names=("J1", "J2", "J3"), spec: Optional[Dict[str, Dict[str, List[str]]]] = None,
           answers: Optional[Dict[str, Dict[str, object]]] = None):
    """Request and response files of each judge (``spec[judge]`` overrides its questions)."""
    out = []
    for j in names:
        req = _judge_requests(tmp, j, (spec or {}).get(j, SPEC), SURFACE)
        resp = _responses(tmp / f"{j}.resp.jsonl", req, (answers or ANSWERS)[j])
        out.append((j, req, resp))
    return out


def _build(files, reps: int = 20):
    return build_cells("S", [(j, [resp]) for j, _, resp in files], [req for _, req, _ in files], reps=reps)


def _close(x: Optional[float], want: Optional[F]) -> bool:
    if want is None or x is None:
        return x is None and want is None
    return x == pytest.approx(float(want), rel=1e-12, abs=1e-12)


def test_three_judges_hand_computed(tmp_path: Path) -> None:
    cells, report = _build(_slice(tmp_path))
    assert report["__intersection__"]["captions"] == 3  # c4 failed for J3
    m = cells.judges_agreement["S"]
    assert m.judges == ("J1", "J2", "J3") and list(m.labels) == LABELS
    assert list(m.by_type) == ["__all__", "attribute", "count", "object", "relation"]  # style (c4) not joined
    # joined questions (J1, J2, J3) and their count rows (yes, no, uncertain):
    #   q1 c1 object    y y y  (3,0,0)  Σr(r-1) = 6
    #   q2 c1 object    y n y  (2,1,0)            2
    #   q3 c1 count     n n u  (0,2,1)            2
    #   q4 c2 object    n n y  (1,2,0)            2
    #   q5 c2 relation  y y y  (3,0,0)            6
    #   q6 c3 attribute u u u  (0,0,3)            6
    a = m.by_type["__all__"]
    assert (a.questions, a.exact_all, a.exact_all_rate) == (6, 3, 0.5)
    # p_a = mean(Σr(r-1)/6) = (1 + 1/3 + 1/3 + 1/3 + 1 + 1)/6 = 2/3; π = (9, 5, 4)/18
    # Fleiss p_e = 1/4 + 25/324 + 16/324 = 61/162 -> κ = (2/3 - 61/162)/(1 - 61/162) = 47/101
    assert _close(a.fleiss_kappa, F(47, 101))
    # AC1 p_e = (1/2·1/2 + 5/18·13/18 + 2/9·7/9)/2 = 101/324 -> (2/3 - 101/324)/(223/324) = 115/223
    assert _close(a.gwet_ac1, F(115, 223))
    # α: n = 18, n_c = (9, 5, 4), Σ o_cc = Σ Σr(r-1)/(m-1) = 24/2 = 12, Σ n_c² = 122
    #    α = 1 - (n-1)(n - 12)/(n² - 122) = 1 - 17·6/202 = 50/101
    assert _close(a.krippendorff_alpha, F(50, 101))
    # pairs over the same six questions; Cohen κ = (n·exact - Σ row·col)/(n² - Σ row·col):
    #   J1|J2: exact 5 (all but q2); J1 (y3 n2 u1), J2 (y2 n3 u1): Σ = 6+6+1 = 13 -> (30-13)/(36-13) = 17/23
    #   J1|J3: exact 4 (q1 q2 q5 q6); J3 (y4 n0 u2): Σ = 12+0+2 = 14 -> (24-14)/(36-14) = 5/11
    #   J2|J3: exact 3 (q1 q5 q6): Σ = 8+0+2 = 10 -> (18-10)/(36-10) = 4/13
    want = {"J1|J2": (5, F(17, 23)), "J1|J3": (4, F(5, 11)), "J2|J3": (3, F(4, 13))}
    assert list(a.pairs) == list(want)
    for k, (ex, kappa) in want.items():
        p = a.pairs[k]
        assert (p.joined, p.exact, p.exact_rate) == (6, ex, ex / 6) and _close(p.cohen_kappa, kappa), k
    # object: q1 (3,0,0), q2 (2,1,0), q4 (1,2,0): p_a = (1 + 1/3 + 1/3)/3 = 5/9, π = (2/3, 1/3, 0)
    o = m.by_type["object"]
    assert (o.questions, o.exact_all) == (3, 1)
    assert _close(o.fleiss_kappa, F(0))            # p_e = 4/9 + 1/9 = 5/9 = p_a
    assert _close(o.gwet_ac1, F(3, 7))             # p_e = (2/9 + 2/9)/2 = 2/9 -> (5/9 - 2/9)/(7/9)
    assert _close(o.krippendorff_alpha, F(1, 9))   # n = 9, n_c = (6,3,0), Σo_cc = 5: 1 - 8·4/(81-45)
    # J1|J2: y/y y/n n/n -> exact 2, Σ row·col = 2·1 + 1·2 = 4 -> (6-4)/(9-4) = 2/5
    # J1|J3: y/y y/y n/y -> exact 2, J3 all yes: Σ = 2·3 = 6 -> (6-6)/(9-6) = 0; J2|J3: exact 1, (3-3)/(9-3) = 0
    assert [(p.exact, p.cohen_kappa) for p in o.pairs.values()] == [(2, pytest.approx(0.4)), (2, 0.0), (1, 0.0)]
    # count: q3 (0,2,1): p_a = 1/3, π = (0, 2/3, 1/3): κ = (1/3 - 5/9)/(4/9) = -1/2, AC1 = (1/3 - 2/9)/(7/9) = 1/7,
    # α = 1 - 2·(3 - 1)/(9 - 5) = 0; J1|J2 both "no" on one question: chance agreement 1 -> null
    c = m.by_type["count"]
    assert (c.questions, c.exact_all) == (1, 0)
    assert _close(c.fleiss_kappa, F(-1, 2)) and _close(c.gwet_ac1, F(1, 7)) and _close(c.krippendorff_alpha, F(0))
    assert [(p.exact, p.cohen_kappa) for p in c.pairs.values()] == [(1, None), (0, 0.0), (0, 0.0)]
    # relation (all yes) and attribute (all uncertain): one label only -> κ, α, pair κ null; AC1 = 1 (p_e = 0)
    for t in ("relation", "attribute"):
        e = m.by_type[t]
        assert (e.questions, e.exact_all, e.exact_all_rate) == (1, 1, 1.0)
        assert (e.fleiss_kappa, e.krippendorff_alpha, e.gwet_ac1) == (None, None, 1.0)
        assert all(p.cohen_kappa is None and p.exact == 1 for p in e.pairs.values())
    # the reference block is unchanged: the first two judges only, over the same intersection
    two = cells.judge_agreement["S"]
    assert two.judges == ("J1", "J2")
    assert {t: (x.joined, x.exact) for t, x in two.by_type.items()} == {
        t: (x.questions, x.pairs["J1|J2"].exact) for t, x in m.by_type.items()}


def test_file_round_trip_and_json_shape(tmp_path: Path) -> None:
    cells, _ = _build(_slice(tmp_path))
    text = format_cells(cells)
    data = json.loads(text)
    assert list(data) == ["cells", "judge_agreement", "judges_agreement"]
    block = data["judges_agreement"]["S"]
    assert list(block) == ["judges", "labels", "by_type"] and block["labels"] == LABELS
    assert list(block["by_type"]["__all__"]) == ["questions", "exact_all", "exact_all_rate", "fleiss_kappa", "gwet_ac1",
                                                 "krippendorff_alpha", "pairs"]
    assert list(block["by_type"]["__all__"]["pairs"]["J1|J3"]) == ["joined", "exact", "exact_rate", "cohen_kappa"]
    assert block["by_type"]["relation"]["fleiss_kappa"] is None and "null" in text
    back = parse_cells(data, "c.json")
    assert back == cells and format_cells(back) == text  # byte for byte
    # files written before the key existed load, and print exactly as before
    old = dict(data)
    del old["judges_agreement"]
    legacy = parse_cells(old, "old.json")
    assert legacy.judges_agreement == {}
    assert format_cells(legacy) == json.dumps(old, indent=2, ensure_ascii=False)
    # merging slices keeps the block
    assert merge_cells_files([cells]).judges_agreement == cells.judges_agreement


def _mutated(data: dict, path: List[object], value: object) -> dict:
    d = json.loads(json.dumps(data))
    x = d["judges_agreement"]["S"]
    for k in path[:-1]:
        x = x[k]
    if value is KeyError:
        del x[path[-1]]
    elif callable(value):
        x[path[-1]] = value(d["judges_agreement"]["S"])
    else:
        x[path[-1]] = value
    return d


@pytest.mark.parametrize("path,value,msg", [
    (["by_type", "object", "questions"], 0, "questions"),
    (["by_type", "object", "exact_all_rate"], 0.9, "exact_all_rate"),
    (["by_type", "object", "fleiss_kappa"], float("nan"), "finite"),
    (["by_type", "object", "gwet_ac1"], 1.5, "<= 1"),
    (["by_type", "object", "krippendorff_alpha"], "0.1", "expected a number"),
    (["by_type", "object", "pairs", "J1|J3"], KeyError, "expected the pairs"),
    (["by_type", "object", "pairs", "J1|J2", "joined"], 4, "joined"),
    (["by_type", "object", "pairs", "J1|J2", "exact"], 0, "exact_all"),
    (["by_type", "object", "pairs", "J1|J2", "cohen_kappa"], KeyError, "cohen_kappa"),
    (["by_type", "object", "bogus"], 1, "unexpected field"),
    (["by_type", "__all__", "exact_all"], 2, "__all__.exact_all"),
    (["by_type", "__all__"], KeyError, "__all__"),
    (["by_type", "nope"], lambda block: block["by_type"]["object"], "unknown type"),
    (["judges"], ["J1", "J1", "J3"], "distinct"),
    (["judges"], ["J1", "J2", "J9"], "expected the pairs"),
    (["labels"], "yes", "list of strings"),
])
def test_reader_refuses_broken_blocks(tmp_path: Path, path, value, msg) -> None:
    cells, _ = _build(_slice(tmp_path))
    data = json.loads(format_cells(cells))
    with pytest.raises(ValueError, match=msg):
        parse_cells(_mutated(data, path, value), "c.json")


def test_two_judges_equal_the_two_rater_functions(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 200):
        codes = rng.integers(0, 3, size=(2, n))
        cats = rng.integers(0, len(UNIT_CATEGORIES), size=n)
        block = agreement_from_codes(codes, cats, ["A", "B"])
        for t, e in block.by_type.items():
            sel = np.ones(n, bool) if t == "__all__" else cats == CAT_CODE[t]
            a = [LABELS[x] for x in codes[0, sel]]
            b = [LABELS[x] for x in codes[1, sel]]
            assert e.questions == len(a) and e.pairs["A|B"].exact == sum(x == y for x, y in zip(a, b))
            assert _approx(e.gwet_ac1, gwet_ac1(a, b, LABELS))
            assert _approx(e.pairs["A|B"].cohen_kappa, cohen_kappa(a, b, LABELS))
            assert _approx(e.fleiss_kappa, fleiss_kappa(dict(enumerate(zip(a, b)))))  # Scott's π
            assert e.exact_all == e.pairs["A|B"].exact
        assert set(block.by_type) == {"__all__"} | {UNIT_CATEGORIES[i] for i in set(cats.tolist())}


def _approx(x: Optional[float], y: Optional[float]) -> bool:
    if x is None or y is None or np.isnan(y):
        return x is None and (y is None or np.isnan(y))
    return x == pytest.approx(y, rel=1e-9, abs=1e-12)


def test_random_data_equals_statsmodels_krippendorff_sklearn() -> None:
    sm = pytest.importorskip("statsmodels.stats.inter_rater")
    rng = np.random.default_rng(11)
    # 130 judges: more count patterns than the bincount path takes (the np.unique path)
    for m, n, p in ((3, 500, None), (4, 300, [0.7, 0.2, 0.1]), (5, 50, [0.9, 0.05, 0.05]), (3, 3, None),
                    (130, 40, [0.5, 0.3, 0.2])):
        codes = rng.choice(3, size=(m, n), p=p)
        cats = rng.integers(0, len(UNIT_CATEGORIES), size=n)
        names = [f"J{i}" for i in range(m)]
        block = agreement_from_codes(codes, cats, names)
        for t, e in block.by_type.items():
            sel = np.ones(n, bool) if t == "__all__" else cats == CAT_CODE[t]
            sub = codes[:, sel]
            table = rating_table(sub, 3)
            assert e.questions == sub.shape[1] and e.exact_all == int((sub == sub[0]).all(axis=0).sum())
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # statsmodels gives nan (with a warning) for one label
                want_f = sm.fleiss_kappa(table, method="fleiss")
            assert _approx(e.fleiss_kappa, None if np.isnan(want_f) else want_f)
            if len(np.unique(sub)) > 1:
                want_a = krippendorff.alpha(reliability_data=sub, level_of_measurement="nominal", value_domain=[0, 1, 2])
                assert _approx(e.krippendorff_alpha, want_a)
            else:
                assert e.krippendorff_alpha is None
            assert _approx(e.gwet_ac1, _ac1_loop(sub))
            assert len(e.pairs) == m * (m - 1) // 2
            for i, j in [(i, j) for i in range(min(m, 5)) for j in range(i + 1, min(m, 5))] + [(0, m - 1)]:
                pa = e.pairs[f"J{i}|J{j}"]
                assert pa.exact == int((sub[i] == sub[j]).sum())
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # scikit-learn warns, and gives nan, when κ is undefined
                    want = cohen_kappa_score(sub[i], sub[j], labels=[0, 1, 2])
                assert _approx(pa.cohen_kappa, want)


def _ac1_loop(sub: np.ndarray) -> float:
    """Gwet's AC1 for m raters, item by item in plain Python (Gwet 2008, q = 3)."""
    m, n = sub.shape
    pa = 0.0
    pi = [0.0, 0.0, 0.0]
    for i in range(n):
        col = sub[:, i].tolist()
        for k in range(3):
            r = col.count(k)
            pa += r * (r - 1) / (m * (m - 1)) / n
            pi[k] += r / m / n
    pe = sum(x * (1 - x) for x in pi) / 2
    return (pa - pe) / (1 - pe)


def test_count_tables_with_missing_ratings() -> None:
    """Items with fewer raters (and items rated once, left out) against the dict Fleiss κ and
    krippendorff's missing values."""
    rng = np.random.default_rng(5)
    codes = rng.integers(0, 3, size=(4, 120)).astype(float)
    codes[rng.random(codes.shape) < 0.3] = np.nan
    table = np.stack([(codes == k).sum(axis=0) for k in range(3)], axis=1)
    items = {i: [str(int(x)) for x in codes[:, i] if not np.isnan(x)] for i in range(codes.shape[1])}
    assert _approx(fleiss_kappa_table(table), fleiss_kappa(items))
    assert _approx(krippendorff_alpha_table(table),
                   krippendorff.alpha(reliability_data=codes, level_of_measurement="nominal", value_domain=[0, 1, 2]))
    with pytest.raises(ValueError, match="two or more ratings"):
        fleiss_kappa_table(np.array([[1, 0, 0], [0, 0, 1]]))
    # the distinct rows weighted by their multiplicity give the full table's values
    rows, counts = np.unique(table, axis=0, return_counts=True)
    for fn in (fleiss_kappa_table, gwet_ac1_table, krippendorff_alpha_table):
        assert _approx(fn(rows, counts), fn(table)), fn.__name__
    with pytest.raises(ValueError, match="weights"):
        gwet_ac1_table(rows, -counts)


def test_undefined_is_null_never_a_number() -> None:
    one = np.array([[0, 0, 0], [0, 0, 0]])
    block = agreement_from_codes(one, np.full(3, CAT_CODE["object"]), ["A", "B"])
    e = block.by_type["object"]
    assert (e.fleiss_kappa, e.krippendorff_alpha, e.pairs["A|B"].cohen_kappa, e.gwet_ac1) == (None, None, None, 1.0)
    assert cohen_kappa_table(np.zeros((3, 3), dtype=int)) is None
    # no joined question at all: no entry (not even __all__)
    empty = agreement_from_codes(np.zeros((3, 0), dtype=np.uint8), np.zeros(0, dtype=np.uint8), ["A", "B", "C"])
    assert empty.by_type == {}
    with pytest.raises(ValueError, match="two or more"):
        agreement_from_codes(np.zeros((1, 2), dtype=np.uint8), np.zeros(2, dtype=np.uint8), ["A"])
    assert gwet_ac1_table(np.array([[2, 0, 0], [0, 2, 0]])) == pytest.approx(gwet_ac1(["yes", "no"], ["yes", "no"], LABELS))


def test_category_with_no_joined_question_is_left_out(tmp_path: Path) -> None:
    """J3's request of c1 lacks the style question: style is joined by J1 and J2 (judge_agreement)
    but not by every judge, so judges_agreement leaves it out; the object question still joins
    on its unit index (the per-caption path)."""
    spec = {"c1": ["object", "style"], "c2": ["object"]}
    surface = {"c1": "ours", "c2": "ours"}
    j3 = {"c1": ["object"], "c2": ["object"]}
    answers = {"J1": {"c1": ["yes", "no"], "c2": ["yes"]}, "J2": {"c1": ["yes", "yes"], "c2": ["no"]},
               "J3": {"c1": ["no"], "c2": ["no"]}}
    files = []
    for j in ("J1", "J2", "J3"):
        req = _judge_requests(tmp_path, j, j3 if j == "J3" else spec, surface)
        files.append((j, req, _responses(tmp_path / f"{j}.resp.jsonl", req, answers[j])))
    cells, _ = build_cells("S", [(j, [r]) for j, _, r in files], [q for _, q, _ in files], reps=10)
    m = cells.judges_agreement["S"]
    assert list(m.by_type) == ["__all__", "object"]
    o = m.by_type["object"]
    # c1 u0000 (y, y, n), c2 u0000 (y, n, n)
    assert (o.questions, o.exact_all, [p.exact for p in o.pairs.values()]) == (2, 0, [1, 0, 1])
    assert set(cells.judge_agreement["S"].by_type) == {"__all__", "object", "style"}
    assert cells.judge_agreement["S"].by_type["__all__"].joined == 3


def test_judge_names_with_colliding_pair_keys_are_refused(tmp_path: Path) -> None:
    codes = np.zeros((4, 2), dtype=np.uint8)
    with pytest.raises(InputError, match="colliding"):
        agreement_from_codes(codes, np.zeros(2, dtype=np.uint8), ["a|b", "c", "a", "b|c"])


def test_cli_three_judges_end_to_end(tmp_path: Path, capsys) -> None:
    files = _slice(tmp_path)
    out = tmp_path / "cells.json"
    argv = ["judges", "cells", "--slice", "S", "--reps", "20", "--out", str(out)]
    for j, req, resp in files:
        argv += ["--judge", f"{j}={resp}", "--requests", str(req)]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "3 captions answered by all 3 judge(s)" in err
    assert "agreement: κ=0.465, AC1=0.516, α=0.495 (3 judges, 6 questions)" in err
    data = json.loads(out.read_text())
    assert set(data) == {"cells", "judge_agreement", "judges_agreement"}
    assert data["judges_agreement"]["S"]["judges"] == ["J1", "J2", "J3"]
    assert data["judges_agreement"]["S"]["by_type"]["__all__"]["pairs"]["J2|J3"]["exact"] == 3
    back = read_cells(out)
    assert format_cells(back) == out.read_text()
    assert len(back.cells) == 3 * 2  # three judges × two surfaces
    # one judge: no agreement block at all, and no agreement in the line
    assert main(["judges", "cells", "--slice", "S", "--reps", "20", "--out", str(tmp_path / "one.json"),
                 "--judge", f"J1={files[0][2]}", "--requests", str(files[0][1])]) == 0
    assert "agreement:" not in capsys.readouterr().err
    one = json.loads((tmp_path / "one.json").read_text())
    assert "judges_agreement" not in one and "judge_agreement" not in one


def test_hand_built_block_validates() -> None:
    """A block built by hand goes through CellsFile like the builder's (no cells needed)."""
    pair = PairAgreement(2, 1, 0.5, None)
    e = MultiAgreement(2, 1, 0.5, None, 0.2, None, {"A|B": pair})
    f = CellsFile(cells=[], judges_agreement={"S": JudgesAgreement(("A", "B"), {"__all__": e, "object": e})})
    assert parse_cells(json.loads(format_cells(f))) == f
    bad = dataclasses.replace(f, judges_agreement={"S": JudgesAgreement(("A", "B"), {"object": e})})
    with pytest.raises(ValueError, match="__all__"):
        format_cells(bad)


def test_vectorised_on_a_million_questions() -> None:
    rng = np.random.default_rng(0)
    codes = rng.choice(3, size=(3, 1_000_000), p=[0.6, 0.3, 0.1]).astype(np.uint8)
    cats = rng.integers(0, len(UNIT_CATEGORIES), size=codes.shape[1]).astype(np.uint8)
    t0 = time.perf_counter()
    block = agreement_from_codes(codes, cats, ["A", "B", "C"])
    assert time.perf_counter() - t0 < 20
    assert block.by_type["__all__"].questions == 1_000_000 and len(block.by_type) == 9
