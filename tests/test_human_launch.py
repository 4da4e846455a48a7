"""Pre-launch operations of a human study: materialize, validate, the launch seal, the launch gate of
``human serve``, and the rehearsal (``participant-test``) whose answers never count. Real COCO-MINI
images throughout (:func:`capaudit.human.simulate.fixture_study`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from capaudit.cli import main
from capaudit.errors import InputError
from capaudit.human import render
from capaudit.human.export import export_study, status_report
from capaudit.human.launch import require_launchable, seal_for_launch
from capaudit.human.study import resolve_study_db
from capaudit.human.materialize import materialize
from capaudit.human.rehearsal import build_rehearsal, rehearsal_path
from capaudit.human.protocol import PHASES
from capaudit.human.simulate import fixture_study, simulated_values
from capaudit.human.study import Study
from capaudit.human.validate import design_digest, validate_study
from capaudit.io.manifest import sha256_of

CONF = dict(participants=3, target_items=30, max_items=40, overlap_per_stratum=1)


def _study(tmp_path: Path, **kw):
    """Sealed items, three annotators assigned, not open; images not yet materialised."""
    st, people, _ = fixture_study(tmp_path, n_images=6, humans=3, open_study=False, **{**CONF, **kw})
    return st, people


def _answer(session, seed: int) -> int:
    """Answer a participant's whole queue as a person would, through the annotator API."""
    import random

    if session.needs_consent():
        session.give_consent()
    rng = random.Random(seed)
    n = 0
    for t in sorted(session.tasks(refresh=True), key=lambda t: (PHASES.index(t.phase), t.position)):
        item = session.study.item(t.item_id)
        session.record(t.item_id, t.phase, simulated_values(t.phase, item, rng, 0.8), expected_revision=0,
                       elapsed_ms=3000)
        n += 1
    return n


def _info(tmp_path: Path) -> Path:
    p = tmp_path / "participant_information.md"
    p.write_text("# Participant information\nYou will judge short claims about images.\n", encoding="utf-8")
    return p


def test_materialize_is_content_addressed_and_resumable(tmp_path: Path) -> None:
    st, _ = _study(tmp_path)
    rep = materialize(st, max_side=320)
    n = len({it["image_key"] for it in st.items()})
    assert (rep.images, rep.written, rep.kept, rep.problems) == (n, n, 0, 0)
    assets = st.assets()
    for key, a in assets.items():
        f = st.folder / a["file"]
        assert a["file"] == f"images/{a['sha256']}.jpg" and sha256_of(f) == a["sha256"]
        assert max(a["width"], a["height"]) <= 320 and key == "sha256:" + a["source_sha256"]
    # the notebook now shows the study folder's copy, not the source path
    it = st.items()[0]
    assert st.item_view(it["item_id"], "image").image_path == str(st.folder / assets[it["image_key"]]["file"])
    # resumable: a second run keeps everything; a lost or damaged copy is written again
    assert (materialize(st, max_side=320).kept, materialize(st, max_side=320).written) == (n, 0)
    first, second = list(assets.values())[:2]
    (st.folder / first["file"]).unlink()
    (st.folder / second["file"]).write_bytes(b"damaged")
    rep = materialize(st, max_side=320)
    assert (rep.rewritten, rep.kept) == (2, n - 2) and sha256_of(st.folder / second["file"]) == second["sha256"]
    st.close()


def test_materialize_reports_missing_and_refuses_when_nothing_is_found(tmp_path: Path) -> None:
    st, _, _ = fixture_study(tmp_path / "a", n_images=4, humans=1, missing_images=1, open_study=False)
    rep = materialize(st)
    assert len(rep.missing) == 1 and rep.written == 3 and "source missing" in rep.summary()
    st.close()
    st, _, _ = fixture_study(tmp_path / "b", n_images=2, humans=1, missing_images=2, open_study=False)
    with pytest.raises(InputError, match="none of the 2 images"):
        materialize(st)
    assert not st.folder.exists()  # nothing left behind
    st.close()


def test_validate_passes_a_ready_study_and_names_each_problem(tmp_path: Path, capsys, monkeypatch) -> None:
    st, _ = _study(tmp_path)
    rep = validate_study(st)
    assert not rep.ok and set(rep.problems) == {"images_not_materialised"}
    materialize(st)
    rep = validate_study(st)
    assert rep.ok, rep.lines()
    assert rep.checked["items"] == len(st.items()) and rep.design_sha256 == design_digest(st)
    d = ["--db", str(st.path)]
    assert main(["human", "validate", *d]) == 0
    err = capsys.readouterr().err
    assert "valid: " in err and str(st.folder / "validation.json") in err
    assert json.loads((st.folder / "validation.json").read_text())["ok"] is True
    # a damaged copy: changed and undecodable
    a = next(iter(st.assets().values()))
    (st.folder / a["file"]).write_bytes(b"not a jpeg")
    # a rendering path that truncates long claims (what validate must catch)
    monkeypatch.setattr("capaudit.human.validate.claim_html", lambda c: render.claim_html(c[:8]))
    assert main(["human", "validate", *d]) == 1
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("capaudit human validate: ")]
    classes = [ln.split(": ")[1] for ln in lines[1:-1]]
    assert classes == ["images_undecodable", "assets_changed", "claims_rendering"]
    assert lines[1].startswith("capaudit human validate: images_undecodable: 1 (first: item ")
    assert "NOT valid" in lines[-1]
    report = json.loads((st.folder / "validation.json").read_text())
    assert report["ok"] is False and report["problems"]["images_undecodable"]["count"] == 1
    st.close()


def test_validate_catches_claims_changed_after_sampling_and_incomplete_assignments(tmp_path: Path) -> None:
    from capaudit.human.simulate import synthetic_judged_claims
    from capaudit.human.protocol import StudyConfig

    jc = synthetic_judged_claims(tmp_path / "jc.jsonl", n_images=6)
    st = Study.create(tmp_path / "s.sqlite", StudyConfig(study_id="v", claims_per_stratum=2,
                                                          require_all_strata=False, **CONF))
    st.sample([jc])
    victim = st.items()[0]
    st.store.write(lambda c: c.execute("UPDATE items SET unit = ?, caption_window = ? WHERE item_id = ?",
                                       (victim["unit"][:3], victim["caption_window"] + " x", victim["item_id"])))
    st.seal()
    st.invite(2)  # the design has three participants
    st.assign()
    st.invite(1)  # invited after assignment: an empty batch
    materialize(st)
    rep = validate_study(st)
    assert any(e.startswith(f"item {victim['item_id'][:10]}: unit, caption_window")
               for e in rep.problems["claims_differ_from_source"])
    assert rep.problems["empty_batches"] == ["P003 has no items"]
    # the repeat of the tampered item, if any, and every item keep two labels from P001 and P002
    assert "labels_incomplete" not in rep.problems
    st.close()


def test_launch_seal_needs_validation_records_ethics_and_freezes_the_design(tmp_path: Path, capsys) -> None:
    st, _ = _study(tmp_path)
    info = _info(tmp_path)
    with pytest.raises(InputError, match=r"refusing to seal: validation finds 6 problems \(images_not_materialised\)"):
        seal_for_launch(st, "IRB-2026-042", info)
    assert st.launch_seal() is None and not (st.folder / "manifest.json").exists()
    materialize(st)
    d = ["--db", str(st.path)]
    st.close()
    assert main(["human", "serve", *d, "--dry-run"]) == 1
    assert "not sealed for launch" in capsys.readouterr().err
    assert main(["human", "seal", *d, "--ethics-id", "IRB-2026-042", "--participant-info", str(info)]) == 0
    assert "sealed for launch: ethics id 'IRB-2026-042'" in capsys.readouterr().err
    st = Study.load(tmp_path / "study.sqlite")
    seal = st.launch_seal()
    man = json.loads((st.folder / "manifest.json").read_text())
    assert seal["ethics_id"] == man["ethics_id"] == "IRB-2026-042"
    copy = st.folder / seal["participant_info_file"]
    assert copy.read_bytes() == info.read_bytes() and seal["participant_info_sha256"] == sha256_of(info)
    assert man["participant_info"]["name"] == "participant_information.md"
    assert seal["validation_sha256"] == sha256_of(st.folder / "validation.sealed.json")
    assert man["validation"]["file"] == "validation.sealed.json"
    assert main(["human", "validate", *d]) == 0  # a later validation does not touch the sealed report
    assert seal["validation_sha256"] == sha256_of(st.folder / "validation.sealed.json")
    assert seal["design_sha256"] == man["design_sha256"] == design_digest(st)
    assert status_report(st)["launch_seal"]["ethics_id"] == "IRB-2026-042"
    # the design is frozen
    with pytest.raises(InputError, match="already sealed for launch"):
        seal_for_launch(st, "other", info)
    with pytest.raises(InputError, match="no annotator can be added"):
        st.invite(1)
    with pytest.raises(InputError, match="assignments are frozen"):
        st.assign()
    with pytest.raises(InputError, match="images are frozen"):
        materialize(st)
    for sql in ("DELETE FROM assets", "UPDATE assignments SET position = position + 100",
                "DELETE FROM assignments", "UPDATE launch_seal SET ethics_id = 'x'", "DELETE FROM launch_seal",
                "INSERT INTO participants (participant_id, pseudonym, kind, role, status, target_items, created_at) "
                "VALUES ('x', 'P999', 'human', 'annotator', 'invited', 5, 'now')"):
        with pytest.raises(sqlite3.DatabaseError, match="sealed for launch|append-only"):
            st.store.write(lambda c, sql=sql: c.execute(sql))
    st.invite(1, role="adjudicator")  # adjudicators are not part of the design
    assert st.assign(extend=["P001"])["new_items"] >= 0  # designed extension batches stay possible
    require_launchable(st)
    st.open()
    payload = json.loads(export_study(st, tmp_path / "exp", n_resamples=20)["export"].read_text())
    assert payload["launch_seal"]["ethics_id"] == "IRB-2026-042"
    st.close()
    assert main(["human", "serve", *d, "--dry-run"]) == 0


def test_study_option_takes_the_database_or_its_folder(tmp_path: Path, capsys) -> None:
    st, _ = _study(tmp_path)
    materialize(st)
    st.close()
    assert resolve_study_db(st.folder) == st.path == resolve_study_db(tmp_path)
    assert main(["human", "validate", "--study", str(st.folder)]) == 0
    assert f"study database: {st.path}" in capsys.readouterr().err


def test_launch_seal_refusals(tmp_path: Path) -> None:
    from capaudit.human.protocol import StudyConfig
    from capaudit.human.simulate import synthetic_judged_claims

    info = _info(tmp_path)
    st = Study.create(tmp_path / "s.sqlite", StudyConfig(study_id="r", claims_per_stratum=1, require_all_strata=False))
    st.sample([synthetic_judged_claims(tmp_path / "jc.jsonl", n_images=2)])
    with pytest.raises(InputError, match="seal its items first"):
        seal_for_launch(st, "IRB-1", info)
    with pytest.raises(InputError, match="--ethics-id"):
        seal_for_launch(st, "  ", info)
    with pytest.raises(InputError, match="not found"):
        seal_for_launch(st, "IRB-1", tmp_path / "nope.pdf")
    (tmp_path / "empty.pdf").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        seal_for_launch(st, "IRB-1", tmp_path / "empty.pdf")
    assert not st.folder.exists()
    st.close()


def test_serve_gate_spares_simulated_studies_and_rehearsals(tmp_path: Path) -> None:
    st, _, _ = fixture_study(tmp_path / "sim", n_images=2, humans=0, simulated=2, mode="simulated")
    require_launchable(st)  # the demo and tests: no ethics seal needed
    st.close()
    st, _ = _study(tmp_path / "real")
    with pytest.raises(InputError, match="not sealed for launch"):
        require_launchable(st)
    require_launchable(st, allow_unsealed=True)
    st.close()
    with Study.load(build_rehearsal(st.path).db) as reh:
        require_launchable(reh)


def _numbers(st: Study, out: Path) -> dict:
    from capaudit.human.dashboard import study_dashboard

    paths = export_study(st, out, n_resamples=50)
    exported = {k: Path(v).read_text() for k, v in paths.items()}
    rep = status_report(st)
    return {"latest": st.latest_annotations(), "status": rep, "export": exported,
            "dashboard": study_dashboard(st), "participants": [tuple(p) for p in st.participants()]}


def test_participant_test_answers_are_stored_apart_and_never_count(tmp_path: Path, capsys) -> None:
    st, people = _study(tmp_path)
    materialize(st)
    st.open()
    _answer(st.login(people[0].code), seed=1)  # a real participant's answers
    before = _numbers(st, tmp_path / "exp1")
    st.close()
    d = ["--db", str(tmp_path / "study.sqlite")]
    assert main(["human", "participant-test", *d, "--dry-run", "--port", "8871"]) == 0
    out = capsys.readouterr()
    assert "REHEARSAL copy" in out.err and "never count" in out.err and "--port=8871" in out.out
    code = out.out.splitlines()[0].split("invite code: ")[1]
    reh_db = rehearsal_path(tmp_path / "study.sqlite")
    assert str(reh_db.parent / f"{reh_db.stem}_human_verification_serve") in out.out
    reh = Study.load(reh_db)
    assert reh.rehearsal_of == "fixture-study" and reh.study_id == "fixture-study--rehearsal"
    session = reh.login(code)
    assert session.pseudonym == "REHEARSAL001"
    n = _answer(session, seed=2)
    assert n > 0 and len(reh.latest_annotations()) == n
    assert {a["pseudonym"] for a in reh.latest_annotations()} == {"REHEARSAL001"}
    # the rehearsal shows the study's materialised images
    it = reh.items()[0]
    with Study.load(tmp_path / "study.sqlite", read_only=True) as main_st:
        assert reh.item_view(it["item_id"], "image").image_path == main_st.item_view(it["item_id"], "image").image_path
        assert main_st.image_file(it).startswith(str(main_st.folder / "images"))
    # labelled as rehearsal in every reader, and never exported
    assert status_report(reh)["rehearsal_of"] == "fixture-study"
    with pytest.raises(InputError, match="rehearsal copy"):
        export_study(reh, tmp_path / "exp_reh")
    from capaudit.human.dashboard import render_dashboard, study_dashboard

    assert "REHEARSAL copy of study fixture-study" in render_dashboard(study_dashboard(reh))
    from capaudit.human.widgets import AnnotationApp

    app = AnnotationApp(reh, invite_code=code)
    assert "REHEARSAL" in app.title.value and "REHEARSAL (participant test)" in app.root.children[1].value
    reh.close()
    assert main(["human", "status", "--db", str(reh_db)]) == 0
    assert capsys.readouterr().out.startswith("REHEARSAL copy of study fixture-study")
    # the study itself: every number as before
    st = Study.load(tmp_path / "study.sqlite")
    after = _numbers(st, tmp_path / "exp2")
    for k in ("latest", "participants", "dashboard"):
        assert after[k] == before[k], k
    assert after["export"].keys() == before["export"].keys()
    for k in before["export"]:
        b, a = json.loads(before["export"][k]), json.loads(after["export"][k])
        for doc in (a, b):
            doc.pop("exported_at", None)
        assert a == b, k
    assert after["status"] == before["status"]
    # a new rehearsal starts afresh
    st.close()
    again = build_rehearsal(tmp_path / "study.sqlite")
    with Study.load(again.db) as reh:
        assert reh.latest_annotations() == [] and again.invite_code != code


def test_rehearsal_refusals(tmp_path: Path) -> None:
    from capaudit.human.protocol import StudyConfig

    Study.create(tmp_path / "s.sqlite", StudyConfig(study_id="e")).close()
    with pytest.raises(InputError, match="no items yet"):
        build_rehearsal(tmp_path / "s.sqlite")
    st, _ = _study(tmp_path / "x")
    st.close()
    r = build_rehearsal(st.path)
    with pytest.raises(InputError, match="already a rehearsal"):
        build_rehearsal(r.db)


def test_a_schema_1_study_is_migrated_and_keeps_working(tmp_path: Path) -> None:
    st, _ = _study(tmp_path)
    st.close()
    con = sqlite3.connect(tmp_path / "study.sqlite")  # back to what schema 1 wrote
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND "
                               "(tbl_name IN ('assets', 'launch_seal') OR name IN ('annotators_frozen', "
                               "'assignments_frozen_update', 'assignments_frozen_delete'))").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("DROP TABLE assets")
    con.execute("DROP TABLE launch_seal")
    con.execute("UPDATE schema_metadata SET value = '1' WHERE key = 'schema_version'")
    con.execute("PRAGMA user_version = 1")
    con.commit()
    con.close()
    st = Study.load(tmp_path / "study.sqlite")
    assert st.store.meta("schema_version") == "2" and (tmp_path / "study.sqlite.v1.bak").is_file()
    assert materialize(st).written > 0 and validate_study(st).ok
    st.close()
