"""Supported CBU per caption corrected by people (capaudit.human.corrected): PPI on the study's sample."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest

from capaudit.errors import InputError
from capaudit.human import export as ex
from capaudit.human.corrected import CORRECTED_JSON, STATUS_FEW, STATUS_OK, corrected_support
from capaudit.human.protocol import StudyConfig
from capaudit.human.simulate import fixture_study, simulate_adjudication, simulate_annotators
from capaudit.human.study import Study
from capaudit.human.demo_report import write_report_rows
from capaudit.paper.render import to_latex
from capaudit.paper.stage_tables import stage_table
from capaudit.stats.calibration import ppi_mean

CAPTION = {"caption_licensed": "yes", "atomic_visual_claim": "yes", "category_check": "correct"}
KEY = "sha256:" + hashlib.sha256(b"tiny").hexdigest()

# (question_id, surface, caption, category, unit, answers {ja, jb}, human image support by annotator 1, 2)
#   surface s: object stratum 4 claims (judge ja yes, people yes), attribute stratum 2 claims
#   (A1: ja yes, people no; A2: ja no, people no); c1 also holds a duplicate of its first object
#   (same unit and category: dropped from the pool, counted in judge_cap_all_rows).
#   surface t: T1 people agree on yes, T2 people disagree (no consensus).
#   judge jb answers yes everywhere (constant f: λ = 0).
CLAIMS: List[Tuple[str, str, str, str, str, Dict[str, str], Tuple[str, str]]] = [
    ("s:c1:u0000", "s", "s:c1", "object", "dog", {"ja": "yes", "jb": "yes"}, ("yes", "yes")),
    ("s:c1:u0001", "s", "s:c1", "object", "cat", {"ja": "yes", "jb": "yes"}, ("yes", "yes")),
    ("s:c1:u0002", "s", "s:c1", "attribute", "red dog", {"ja": "yes", "jb": "yes"}, ("no", "no")),
    ("s:c1:u0003", "s", "s:c1", "object", "Dog ", {"ja": "yes", "jb": "yes"}, ("yes", "yes")),  # duplicate
    ("s:c2:u0000", "s", "s:c2", "object", "ball", {"ja": "yes", "jb": "yes"}, ("yes", "yes")),
    ("s:c2:u0001", "s", "s:c2", "attribute", "blue ball", {"ja": "uncertain", "jb": "yes"}, ("no", "no")),
    ("s:c3:u0000", "s", "s:c3", "object", "tree", {"ja": "yes", "jb": "yes"}, ("yes", "yes")),
    ("t:d1:u0000", "t", "t:d1", "object", "car", {"ja": "yes", "jb": "yes"}, ("yes", "yes")),
    ("t:d1:u0001", "t", "t:d1", "object", "bus", {"ja": "no", "jb": "yes"}, ("yes", "no")),
]


def _judged_claims(path: Path, image: Path) -> Path:
    lines = []
    for qid, surface, cap, cat, unit, answers, _ in CLAIMS:
        lines.append(json.dumps({
            "question_id": qid, "caption_id": cap, "surface": surface, "slice": "tiny", "category": cat, "unit": unit,
            "target": unit, "span": "", "span_offsets": None, "caption_window": f"caption {cap}",
            "image_path": str(image), "image_key": KEY, "answers": answers, "judges": ["ja", "jb"],
            "backend": {"ja": "offline", "jb": "offline"}}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _tiny_study(tmp_path: Path, claims_per_stratum: int = 2) -> Tuple[Study, Path]:
    """Two people label every sampled item of the tiny claims with the labels of ``CLAIMS``."""
    image = tmp_path / "img.png"
    image.write_bytes(b"not really a png")
    jc = _judged_claims(tmp_path / "judged_claims.jsonl", image)
    st = Study.create(tmp_path / "tiny.sqlite", StudyConfig(
        study_id="tiny", claims_per_stratum=claims_per_stratum, require_all_strata=False, repeat_fraction=0,
        target_items=20, max_items=20, judges=("ja", "jb")))
    st.sample([jc])
    st.seal()
    people = st.invite(2)
    st.assign()
    st.open()
    human = {qid: labs for qid, *_, labs in CLAIMS}
    for k, p in enumerate(people):
        s = st.login(p.code)
        s.give_consent()
        for t in s.tasks():
            qid = st.item(t.item_id)["question_id"]
            if t.phase == "caption":
                s.record(t.item_id, "caption", CAPTION)
            elif t.phase == "image":
                s.record(t.item_id, "image", {"image_support": human[qid][k], "confidence": 4})
    return st, jc


def _row(rows, judge: str, surface: str):
    return next(r for r in rows if r.judge == judge and r.surface == surface)


def test_tiny_study_by_hand(tmp_path: Path) -> None:
    st, jc = _tiny_study(tmp_path)
    items = [it for it in st.items()]
    assert sorted((it["stratum"], it["weight"]) for it in items if it["surface"] == "s") == [
        ("s/attribute", 1.0), ("s/attribute", 1.0), ("s/object", 2.0), ("s/object", 2.0)]
    rows = corrected_support(st, [jc])
    assert [(r.judge, r.surface) for r in rows] == [("ja", "s"), ("ja", "t"), ("jb", "s"), ("jb", "t")]
    a = _row(rows, "ja", "s")
    # census: 6 pool claims (duplicate dropped), 3 captions; ja says yes to 5 of them
    assert (a.status, a.claims, a.captions, a.judge_yes) == (STATUS_OK, 6, 3, 5)
    assert a.judge_share == pytest.approx(5 / 6) and a.judge_cap == pytest.approx(5 / 3)
    assert a.judge_cap_all_rows == pytest.approx(6 / 3)  # the duplicate counts in the stage's supported_cap
    assert (a.sampled, a.labelled, a.labelled_yes, a.excluded, a.strata, a.strata_collapsed) == (4, 4, 2, {}, 2, 0)
    # labelled (y, f, w): object (1, 1, 2) ×2, attribute (0, 1, 1), (0, 0, 1) ["uncertain" counts as f = 0]
    # weighted LS: mean_w f = 5/6, mean_w y = 2/3, S_ff = 5/6, S_fy = 2/3 → λ = 0.8
    # d = y − 0.8 f = 0.2, 0.2, −0.8, 0 → d̂ = (0.4 + 0.4 − 0.8)/6 = 0 → θ = 0.8 · 5/6 = 2/3
    # se: stratified delete-one jackknife, λ re-estimated (JKn; the other unit of the stratum ×2):
    # object: dropping either (1, 1, 2) leaves the same sample → θ₍ᵢ₎ = 2/3 twice, no spread;
    # attribute: dropping (0, 1, 1) → {(1,1,2)×2, (0,0,2)}: λ = 1, θ = 5/6 + 0 = 5/6; dropping
    # (0, 0, 1) → {(1,1,2)×2, (0,1,2)}: f constant, λ = 0, θ = weighted mean of y = 2/3; mean 3/4 →
    # se² = (2−1)/2 · ((5/6 − 3/4)² + (2/3 − 3/4)²) = 1/144 → se = 1/12, df = 4 − 2 strata
    t = 4.302652729911275  # t_{0.975, 2}
    p = a.ppi
    assert p.lam == pytest.approx(0.8)
    assert p.share == pytest.approx(2 / 3) and p.share_se == pytest.approx(1 / 12)
    assert (p.share_lo, p.share_hi) == pytest.approx((2 / 3 - t / 12, 2 / 3 + t / 12))
    # CBU per caption = θ × 6 claims / 3 captions
    assert (p.cap, p.cap_se, p.cap_lo, p.cap_hi) == pytest.approx((4 / 3, 1 / 6, 2 * p.share_lo, 2 * p.share_hi))
    # human-only: weighted mean of y = 4/6; each stratum's labels are constant → se 0
    h = a.human_only
    assert (h.share, h.share_se, h.cap, h.lam) == pytest.approx((2 / 3, 0.0, 4 / 3, 0.0))
    # jb says yes to everything: f is constant, λ = 0, PPI = human-only; its own CBU/cap = 6/3
    b = _row(rows, "jb", "s")
    assert b.judge_cap == pytest.approx(2.0) and b.ppi.lam == 0.0
    assert (b.ppi.share, b.ppi.cap) == pytest.approx((2 / 3, 4 / 3))


def test_surface_without_enough_labels_is_marked_not_estimated(tmp_path: Path) -> None:
    st, jc = _tiny_study(tmp_path)
    rows = corrected_support(st, [jc])
    for j in ("ja", "jb"):
        r = _row(rows, j, "t")
        # T1: consensus yes; T2: the two people disagree → no consensus, left out and counted
        assert (r.status, r.labelled, r.excluded, r.claims, r.captions) == (STATUS_FEW, 1, {"no_consensus": 1}, 2, 1)
        assert r.ppi is None and r.human_only is None
        assert r.judge_cap == pytest.approx({"ja": 1.0, "jb": 2.0}[j])  # the census is still known
    written = write_report_rows([], [r.flat() for r in rows], tmp_path, simulated=False)
    tex = to_latex(stage_table(written["corrected"]))
    assert "too few labels" in tex and "SIMULATED" not in tex
    line = next(x for x in tex.splitlines() if x.startswith("ja & t"))
    assert line.count("--") == 4
    flat = _row(rows, "ja", "t").flat()
    assert flat["ppi_cap"] is None and flat["excluded"] == "no_consensus=1" and flat["excluded_total"] == 1


def test_non_substantive_consensus_is_left_out_never_zero(tmp_path: Path) -> None:
    st, jc = _tiny_study(tmp_path)
    before = _row(corrected_support(st, [jc]), "ja", "s")
    # an adjudicated "uncertain" on a labelled "no" item: that item leaves the sample, counted
    item = next(it for it in st.items() if it["question_id"] == "s:c2:u0001")
    st.adjudicate(item["item_id"], "image_support", "uncertain", "ADJ1")
    after = _row(corrected_support(st, [jc]), "ja", "s")
    assert (after.labelled, after.excluded) == (3, {"uncertain": 1})
    # the remaining attribute item is a stratum of one: it joins the smallest other stratum (object)
    assert after.strata == 1 and after.strata_collapsed == 2
    # human-only over (1, w2), (1, w2), (0, w1): 4/5, not the 4/6 of scoring "uncertain" as unsupported
    assert after.human_only.share == pytest.approx(4 / 5) and before.human_only.share == pytest.approx(2 / 3)


def test_equal_weights_reduce_to_unweighted_ppi(tmp_path: Path) -> None:
    st, _, sims = fixture_study(tmp_path, n_images=8, humans=0, simulated=3, claims_per_stratum=500,
                                target_items=400, max_items=400, repeat_fraction=0, mode="simulated")
    simulate_annotators(st, [s.code for s in sims], seed=5)
    simulate_adjudication(st, seed=5)
    items = [it for it in st.items() if it["repeat_of"] is None]
    assert {it["weight"] for it in items} == {1.0}  # every pool claim sampled
    cons = ex.consensus_rows(st)
    rows = corrected_support(st)
    ok = [r for r in rows if r.status == STATUS_OK]
    assert ok
    for r in ok:
        lab = [(cons.get((it["item_id"], "image_support")), json.loads(it["judge_answers"])[r.judge])
               for it in items if it["surface"] == r.surface]
        y = [1.0 if c == "yes" else 0.0 for c, _ in lab if c in ("yes", "no")]
        f = [1.0 if a == "yes" else 0.0 for c, a in lab if c in ("yes", "no")]
        f_all = [1.0 if a == "yes" else 0.0 for _, a in lab]  # all pool claims are sampled here
        ref = ppi_mean(y, f, f_all, population=len(f_all))
        assert r.claims == len(f_all) and r.labelled == len(y)
        assert r.ppi.share == pytest.approx(ref.estimate) and r.ppi.lam == pytest.approx(ref.lam)
        assert r.human_only.share == pytest.approx(float(np.mean(y)))
        assert r.ppi.cap == pytest.approx(ref.estimate * r.claims / r.captions)
        assert r.judge_share == pytest.approx(float(np.mean(f_all)))


def test_files_must_be_those_sampled_and_export_writes_json(tmp_path: Path) -> None:
    st, jc = _tiny_study(tmp_path)
    other = tmp_path / "other.jsonl"
    other.write_text(jc.read_text().replace('"ja": "no"', '"ja": "yes"'), encoding="utf-8")
    with pytest.raises(InputError, match="not the ones the study was sampled from"):
        corrected_support(st, [other])
    paths = ex.export_study(st, tmp_path / "export")
    doc = json.loads(paths["corrected"].read_text())
    assert paths["corrected"].name == CORRECTED_JSON and doc["simulated"] is False
    assert doc["rows_without_estimate"] == {STATUS_FEW: 2} and len(doc["rows"]) == 4
    assert "captions" in doc["definition"]
    exp = json.loads((tmp_path / "export" / ex.EXPORT_JSON).read_text())
    assert exp["corrected_support"] == CORRECTED_JSON
    # the recorded files gone: the export says why instead of writing numbers
    jc.unlink()
    exp2 = json.loads(ex.export_study(st, tmp_path / "export2")["export"].read_text())
    assert "corrected_support" not in exp2 and "not there" in exp2["corrected_support_skipped"]
    st.close()



def test_design_strata_pooling() -> None:
    from capaudit.human.corrected import POOLED_STRATUM, _design_strata

    assert _design_strata(["a", "a", "b", "b"]) == (["a", "a", "b", "b"], 0)
    P = POOLED_STRATUM
    # two singletons pool together
    assert _design_strata(["a", "a", "b", "c"]) == (["a", "a", P, P], 2)
    # one singleton joins the smallest other stratum (fewest items, then name)
    assert _design_strata(["a", "a", "a", "b", "b", "c"]) == (["a", "a", "a", P, P, P], 2)
    assert _design_strata(["b", "b", "a", "a", "c"]) == (["b", "b", P, P, P], 2)
