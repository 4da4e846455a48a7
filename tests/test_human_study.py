"""Study lifecycle, assignment, annotator API, consensus, readiness and export (reference-spec §7)."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from capaudit.errors import InputError
from capaudit.human import export as ex
from capaudit.human.protocol import StudyConfig
from capaudit.human.simulate import fixture_study, run_simulated_session, synthetic_judged_claims
from capaudit.human.study import AccessError, StaleJudgmentError, Study
from capaudit.summaries.agreement import parse_agreement

CAPTION = {"caption_licensed": "yes", "atomic_visual_claim": "yes", "category_check": "correct"}


def test_lifecycle_order_is_enforced(tmp_path: Path) -> None:
    jc = synthetic_judged_claims(tmp_path / "jc.jsonl", n_images=10)
    st = Study.create(tmp_path / "s.sqlite", StudyConfig(study_id="s", claims_per_stratum=2, require_all_strata=False))
    with pytest.raises(InputError, match="already exists"):
        Study.create(tmp_path / "s.sqlite", StudyConfig(study_id="s"))
    with pytest.raises(InputError, match="cannot seal"):
        st.seal()
    st.sample([jc])
    first = [r["item_id"] for r in st.items()]
    st.sample([jc])  # re-sampling before sealing is allowed and reproducible
    assert [r["item_id"] for r in st.items()] == first
    with pytest.raises(InputError, match="cannot assign"):
        st.assign()
    st.seal()
    with pytest.raises(InputError, match="sealed study cannot be re-sampled"):
        st.sample([jc])
    with pytest.raises(InputError, match="no annotators"):
        st.assign()
    st.invite(2)
    with pytest.raises(InputError, match="no assignments"):
        st.open()
    st.assign()
    st.open()
    assert st.status == "open"
    st.close_study()
    assert st.status == "closed"
    st.close()


def test_assignment_two_labels_overlap_first_and_repeats_to_holders(tmp_path: Path) -> None:
    st, people, _ = fixture_study(tmp_path, n_images=40, humans=4, claims_per_stratum=6, overlap_per_stratum=2,
                                  repeat_fraction=0.1, target_items=200, max_items=210)
    items = {r["item_id"]: r for r in st.items()}
    rows = st.store.read("SELECT participant_id, item_id, phase, position, tier FROM assignments")
    cap = [r for r in rows if r["phase"] == "caption"]
    holders = Counter(r["item_id"] for r in cap)
    for iid, it in items.items():
        if it["repeat_of"] is None:
            assert holders[iid] == 2, iid  # two labels per item from distinct annotators
        else:
            assert holders[iid] == 1
            holder = next(r["participant_id"] for r in cap if r["item_id"] == iid)
            assert (holder, it["repeat_of"]) in {(r["participant_id"], r["item_id"]) for r in cap}
    assert len({(r["participant_id"], r["item_id"]) for r in cap}) == len(cap)
    # every task exists in all three phases; repeats come after their originals in the caption block
    assert Counter(r["phase"] for r in rows) == {"caption": len(cap), "image": len(cap), "pair": len(cap)}
    pos = {(r["participant_id"], r["item_id"]): r["position"] for r in cap}
    for (p, iid), k in pos.items():
        if items[iid]["repeat_of"]:
            assert k > pos[(p, items[iid]["repeat_of"])]
    # overlap items are tier 0 (first in each block)
    for r in cap:
        assert (r["tier"] == 0) == bool(items[r["item_id"]]["overlap"])
    # balanced load
    load = Counter(r["participant_id"] for r in cap)
    assert max(load.values()) - min(load.values()) <= 2
    # re-running adds nothing
    assert st.assign()["new_items"] == 0
    st.close()


def test_caps_and_extension_batches(tmp_path: Path) -> None:
    st, people, _ = fixture_study(tmp_path, n_images=30, humans=2, claims_per_stratum=4, target_items=10, max_items=17,
                                  extension_batch=5, repeat_fraction=0)
    rep = st.assign()
    assert rep["items_per_participant"] == {"P001": 10, "P002": 10} and rep["open_label_slots"] > 0
    rep = st.assign(extend=["P001"])
    assert rep["items_per_participant"]["P001"] == 15 and rep["new_items"] == 5
    rep = st.assign(extend=["P001"])
    assert rep["items_per_participant"]["P001"] == 17  # capped at max_items
    with pytest.raises(AccessError, match="P999"):
        st.assign(extend=["P999"])
    # appended tasks never reorder earlier positions
    s = st.login(people[0].code)
    positions = [t.position for t in s.tasks() if t.phase == "caption"]
    assert positions == list(range(17))
    st.close()


def test_login_invites_and_sessions(tmp_path: Path) -> None:
    st, people, _ = fixture_study(tmp_path, humans=1)
    with pytest.raises(AccessError, match="not invited"):
        st.login("AAAA-BBBB-CCCC-DDDD")
    with pytest.raises(AccessError, match="invite code"):
        st.login("  ")
    s = st.login(people[0].code.lower().replace("-", " "))  # normalized
    assert st.session(s.token).participant_id == s.participant_id
    with pytest.raises(AccessError, match="expired"):
        st.session("not-a-token")
    t = s.tasks()[0]
    with pytest.raises(AccessError, match="consent"):
        s.record(t.item_id, "caption", CAPTION)
    s.give_consent()
    assert not s.needs_consent()
    # a session past its expiry is refused
    st.store.write(lambda c: c.execute("UPDATE bearer_sessions SET expires_at = '2000-01-01T00:00:00.000000Z'"))
    with pytest.raises(AccessError, match="expired"):
        s.record(t.item_id, "caption", CAPTION)
    s = st.login(people[0].code)
    s.record(t.item_id, "caption", CAPTION)
    st.withdraw("P001")
    with pytest.raises(AccessError, match="withdrawn"):
        st.login(people[0].code)
    with pytest.raises(AccessError, match="withdrawn"):
        s.record(s.tasks()[1].item_id, "caption", CAPTION)
    st.close()


def test_record_rules_revisions_duplicates_and_blinding(tmp_path: Path) -> None:
    st, people, _ = fixture_study(tmp_path, humans=2, labels_per_item=1)
    s = st.login(people[0].code)
    s.give_consent()
    t = s.tasks()[0]
    other = st.login(people[1].code)
    other.give_consent()
    with pytest.raises(AccessError, match="not assigned"):
        other.record(t.item_id, "caption", CAPTION)
    with pytest.raises(InputError, match="follows its caption phase"):
        s.record(t.item_id, "image", {"image_support": "yes"})
    r1 = s.record(t.item_id, "caption", CAPTION, expected_revision=0, elapsed_ms=1500)
    assert (r1.revision, r1.duplicate) == (1, False)
    r2 = s.record(t.item_id, "caption", CAPTION, expected_revision=0)  # double click: same screen, same values
    assert (r2.annotation_id, r2.duplicate) == (r1.annotation_id, True)
    with pytest.raises(StaleJudgmentError):
        s.record(t.item_id, "caption", {**CAPTION, "caption_licensed": "no"}, expected_revision=0)
    r3 = s.record(t.item_id, "caption", {**CAPTION, "caption_licensed": "no"}, expected_revision=1)
    assert (r3.revision, r3.duplicate) == (2, False)
    assert s.saved(t.item_id, "caption").values["caption_licensed"] == "no"
    assert st.store.one("SELECT COUNT(*) AS k FROM annotations")["k"] == 2  # history kept
    with pytest.raises(InputError, match="'note'"):
        s.record(t.item_id, "image", {"image_support": "yes", "note": "write to a@b.com"})
    # blinding: caption phase has no image, image phase no caption; never a surface or judge answer
    v_cap, v_img = s.view(t.item_id, "caption"), s.view(t.item_id, "image")
    assert v_cap.caption_window and v_cap.image_path is None
    assert v_img.caption_window is None and v_img.image_path and v_img.category is None
    for v in (v_cap, v_img, s.view(t.item_id, "pair")):
        text = json.dumps(v.__dict__)
        assert "judge_a" not in text and "coco_caption" not in text
    assert s.first_unanswered() == 1
    st.close()


def _run_simulated(st: Study, sims, seed: int = 7) -> None:
    for inv in sims:
        run_simulated_session(st.login(inv.code), seed=seed)


def test_consensus_disagreements_adjudication_and_agreement(tmp_path: Path) -> None:
    st, _, sims = fixture_study(tmp_path, n_images=30, humans=0, simulated=3, mode="simulated", claims_per_stratum=3)
    _run_simulated(st, sims)
    dis = ex.disagreements(st)
    assert dis and all(len(set(d.labels)) > 1 for d in dis)
    d = next(x for x in dis if x.field == "image_support")
    st.adjudicate(d.item_id, "image_support", d.labels[0], "ADJ1")
    assert ex.consensus_rows(st)[(d.item_id, "image_support")] == d.labels[0]
    assert (d.item_id, "image", "image_support") not in {(x.item_id, x.phase, x.field) for x in ex.disagreements(st)}
    with pytest.raises(InputError, match="adjudicator"):
        st.adjudicate(d.item_id, "image_support", "yes", "Jane Doe <jane@x.org>")
    with pytest.raises(InputError, match="not one of"):
        st.adjudicate(d.item_id, "image_support", "maybe", "ADJ1")
    recs = ex.judge_human_records(st)
    items = {r["item_id"]: r for r in st.items()}
    assert recs and all(items[r.item_id]["repeat_of"] is None for r in recs)
    agreement = ex.agreement_summary(st, n_resamples=300)
    assert sorted(agreement) == ["judge_a", "judge_b"]
    # the point estimate is the weighted exact agreement, by hand
    for j, a in agreement.items():
        num = sum(r.weight for r in recs if r.human == r.judges[j])
        assert a.overall.estimate == pytest.approx(num / sum(r.weight for r in recs))
        assert sum(g.n_records for g in a.by_surface) == a.overall.n_records == len(recs)
    st.close()


def test_status_readiness_and_export(tmp_path: Path) -> None:
    st, _, sims = fixture_study(tmp_path, n_images=30, humans=0, simulated=2, mode="simulated", claims_per_stratum=3,
                                readiness={"min_substantive": 1, "min_per_type": 1, "min_per_stratum": 0})
    rep = ex.status_report(st)
    assert rep["db"] == str(st.path) and rep["progress"]["by_phase"]["caption"]["done"] == 0
    assert not rep["readiness"]["ready"]
    _run_simulated(st, sims)
    rep = ex.status_report(st)
    assert rep["progress"]["by_phase"]["pair"]["done"] == rep["progress"]["by_phase"]["pair"]["assigned"]
    checks = {c["name"]: c for c in rep["readiness"]["checks"]}
    assert checks["judge_coverage"]["met"] and checks["bootstrap"]["met"]
    assert checks["open_disagreements"]["met"] == (rep["open_disagreements"] == 0)
    paths = ex.export_study(st, tmp_path / "out", include_public_rows=True, n_resamples=200)
    payload = json.loads(paths["export"].read_text())
    assert payload["simulated"] is True and payload["mode"] == "simulated"
    parse_agreement(json.loads(paths["agreement"].read_text()))  # the schema the paper reads
    rows = list(csv.DictReader(open(paths["public_rows"], encoding="utf-8")))
    assert rows and list(rows[0]) == list(ex.PUBLIC_COLUMNS)
    text = paths["public_rows"].read_text()
    for forbidden in ("coco_caption", "judge_a", "surface", "created_at", st.items()[0]["item_id"]):
        assert forbidden not in text
    # aggregate-only by default
    paths2 = ex.export_study(st, tmp_path / "out2", n_resamples=200)
    assert "public_rows" not in paths2 and not (tmp_path / "out2" / ex.PUBLIC_CSV).exists()
    st.close()


def test_export_of_a_real_study_refuses_simulated_judgments(tmp_path: Path) -> None:
    st, people, sims = fixture_study(tmp_path, humans=1, simulated=1)  # mode real
    ex.export_study(st, tmp_path / "ok", n_resamples=50)  # nothing simulated yet: fine
    run_simulated_session(st.login(sims[0].code), seed=1, limit=2)
    assert st.store.one("SELECT COUNT(*) AS k FROM annotations WHERE simulated = 1")["k"] == 2
    with pytest.raises(InputError, match="refusing to export real study"):
        ex.export_study(st, tmp_path / "no")
    with pytest.raises(InputError, match="simulated adjudication is refused"):
        st.adjudicate(st.items()[0]["item_id"], "image_support", "yes", "SIM", simulated=True)
    st.close()


def test_missing_image_offers_image_unavailable(tmp_path: Path) -> None:
    st, _, sims = fixture_study(tmp_path, n_images=12, humans=0, simulated=1, missing_images=12, mode="simulated")
    assert {r["asset_status"] for r in st.items()} == {"missing"}
    s = st.login(sims[0].code)
    run_simulated_session(s, seed=1)
    img = {a["image_support"] for a in st.latest_annotations() if a["phase"] == "image"}
    pair = {a["image_unavailable"] for a in st.latest_annotations() if a["phase"] == "pair"}
    assert img == {"image_unavailable"} and pair == {1}
    st.close()


def test_hidden_repeats_stay_blind_in_batches(tmp_path: Path) -> None:
    """A repeat's caption step comes before its original's image step (the image would unblind it)."""
    from capaudit.human.simulate import fixture_study

    st, people, _ = fixture_study(tmp_path / "rep", n_images=12, humans=1, labels_per_item=1, claims_per_stratum=2,
                                  repeat_fraction=0.5, batch_size=3, target_items=100, max_items=100)
    tasks = st.login(people[0].code).tasks()
    idx = {(t.item_id, t.phase): t.index for t in tasks}
    repeats = [(it["item_id"], it["repeat_of"]) for it in st.items() if it["repeat_of"] is not None]
    mine = [(r, o) for r, o in repeats if (r, "caption") in idx]
    assert mine
    for r, o in mine:
        assert idx[(r, "caption")] < idx[(o, "image")]
        assert next(t.batch for t in tasks if t.item_id == r) == next(t.batch for t in tasks if t.item_id == o)
    # a study frozen before batches existed keeps its phase-block order
    import json

    st.store.write(lambda c: c.execute("UPDATE studies SET config_json = ?", (json.dumps(
        {k: v for k, v in st.config.to_dict().items() if k != "batch_size"}),)))
    from capaudit.human.study import Study

    old = Study.load(st.path)
    assert old.config.batch_size == 0
    phases = [t.phase for t in old.login(people[0].code).tasks()]
    assert phases == sorted(phases, key=("caption", "image", "pair").index)
    old.close()
    st.close()


def test_synthetic_claims_name_their_source(tmp_path: Path) -> None:
    """Template units say they come from no model; extractor units are asked of the served extractor
    through capaudit serve and the client, and the manifest names it by its recorded card."""
    import json

    jc = synthetic_judged_claims(tmp_path / "t" / "jc.jsonl", n_images=2)
    man = json.loads((tmp_path / "t" / "jc.manifest.json").read_text())
    assert man["synthetic"] and man["claims"] == "templates" and "no model" in man["claims_source"]
    pytest.importorskip("spacy")
    jc = synthetic_judged_claims(tmp_path / "e" / "jc.jsonl", n_images=3, claims="extractor")
    man = json.loads((tmp_path / "e" / "jc.manifest.json").read_text())
    assert [c["model"] for c in man["answered_by"]] == ["capaudit-heuristic-extractor"]
    assert man["claims_source"] == man["answered_by"][0]["label"] and "heuristic" in man["claims_source"]
    assert man["offline_extractor"] is True
    rows = [json.loads(x) for x in jc.read_text().splitlines()]
    assert rows and all(r["span"] and r["caption_window"][r["span_offsets"][0]:r["span_offsets"][1]] == r["span"]
                        for r in rows if r["span_offsets"])
    assert (tmp_path / "e" / "jc.claims" / "responses.jsonl").is_file()
