"""The study database (reference-spec §7): WAL, STRICT, append-only triggers, schema versions, concurrency."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from capaudit.errors import InputError
from capaudit.human import store as store_mod
from capaudit.human.simulate import fixture_study
from capaudit.human.store import APPEND_ONLY, SchemaVersionError, StudyStore
from capaudit.human.study import Study

CAPTION = {"caption_licensed": "yes", "atomic_visual_claim": "yes", "category_check": "correct"}


@pytest.fixture()
def open_study(tmp_path: Path):
    study, people, sims = fixture_study(tmp_path, n_images=12, humans=2, labels_per_item=1)
    yield study, people
    study.close()


def test_wal_strict_and_schema_version(open_study) -> None:
    study, _ = open_study
    c = study.store.conn
    assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert c.execute("PRAGMA user_version").fetchone()[0] == store_mod.SCHEMA_VERSION
    assert study.store.meta("schema_version") == str(store_mod.SCHEMA_VERSION)
    strict = {r[0]: r[1] for r in c.execute("SELECT name, strict FROM pragma_table_list WHERE schema = 'main' "
                                             "AND name NOT LIKE 'sqlite_%'")}
    assert strict and all(strict.values()), strict
    with pytest.raises(sqlite3.Error):  # STRICT: an integer column refuses text
        c.execute("INSERT INTO consent_events (participant_id, consent, consent_version, created_at) "
                  "VALUES ('p', 'given', 'v1', 5)")


def _annotate_one(study: Study, code: str):
    s = study.login(code)
    s.give_consent()
    t = s.tasks()[0]
    return s, t, s.record(t.item_id, "caption", CAPTION, expected_revision=0)


@pytest.mark.parametrize("table", APPEND_ONLY)
def test_append_only_tables_refuse_update_and_delete(open_study, table: str) -> None:
    study, people = open_study
    s, t, res = _annotate_one(study, people[0].code)
    study.adjudicate(t.item_id, "caption_licensed", "no", "ADJ1")
    c = study.store.conn
    assert c.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] >= 1
    col = {"annotations": "note", "annotation_events": "event", "consent_events": "consent",
           "adjudications": "value", "adjudication_events": "packet_sha256"}[table]
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        c.execute(f"UPDATE {table} SET {col} = {col}")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        c.execute(f"DELETE FROM {table}")
    assert c.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] >= 1


def test_items_frozen_after_seal_and_annotations_need_open_study(open_study) -> None:
    study, people = open_study
    c = study.store.conn
    with pytest.raises(sqlite3.IntegrityError, match="sealed"):
        c.execute("UPDATE items SET weight = 99")
    with pytest.raises(sqlite3.IntegrityError, match="sealed"):
        c.execute("DELETE FROM items")
    with pytest.raises(InputError, match="sealed study cannot be re-sampled"):
        study.sample([study.path.parent / "judged_claims.jsonl"])
    study.close_study()
    with pytest.raises(sqlite3.IntegrityError, match="not open"):
        c.execute("INSERT INTO annotations (participant_id, item_id, phase, revision, image_support, "
                  "image_unavailable, simulated, created_at) SELECT participant_id, item_id, 'image', 1, 'yes', 0, 0, "
                  "'t' FROM assignments LIMIT 1")


def test_phase_check_constraints(open_study) -> None:
    study, people = open_study
    s, t, _ = _annotate_one(study, people[0].code)
    c = study.store.conn
    base = (s.participant_id, t.item_id)
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # image phase without image_support
        c.execute("INSERT INTO annotations (participant_id, item_id, phase, revision, image_unavailable, simulated, "
                  "created_at) VALUES (?, ?, 'image', 1, 0, 0, 't')", base)
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # caption field in the image phase
        c.execute("INSERT INTO annotations (participant_id, item_id, phase, revision, image_support, caption_licensed, "
                  "image_unavailable, simulated, created_at) VALUES (?, ?, 'image', 1, 'yes', 'yes', 0, 0, 't')", base)
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # value outside the allowed set
        c.execute("INSERT INTO annotations (participant_id, item_id, phase, revision, image_support, "
                  "image_unavailable, simulated, created_at) VALUES (?, ?, 'image', 1, 'maybe', 0, 0, 't')", base)


def test_secrets_are_stored_only_as_digests(open_study) -> None:
    study, people = open_study
    s, _, _ = _annotate_one(study, people[0].code)
    study.close()
    raw = Path(study.path).read_bytes() + (Path(str(study.path) + "-wal").read_bytes()
                                           if Path(str(study.path) + "-wal").exists() else b"")
    for secret in (people[0].code, people[0].code.replace("-", ""), s.token):
        assert secret.encode() not in raw
    re = Study.load(study.path)
    digests = [r[0] for r in re.store.read("SELECT invite_digest FROM participant_invites")]
    assert all(len(d) == 64 for d in digests)
    cols = {r[1] for t in ("participants", "bearer_sessions", "annotation_events")
            for r in re.store.read(f"PRAGMA table_info({t})")}
    assert not cols & {"name", "email", "ip", "ip_address", "user_agent"}
    re.close()


def test_other_schema_versions(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "s.sqlite"
    st = StudyStore(db, create=True)
    st.write(lambda c: c.execute("UPDATE schema_metadata SET value = '99' WHERE key = 'schema_version'"))
    st.close()
    with pytest.raises(SchemaVersionError, match="schema version 99, newer"):
        StudyStore(db)
    # an older version with a migration path is migrated (after a backup copy)
    st = sqlite3.connect(db)
    st.execute("UPDATE schema_metadata SET value = '1' WHERE key = 'schema_version'")
    st.commit()
    st.close()
    calls = []

    def v1_to_v2(conn: sqlite3.Connection) -> None:
        calls.append(1)
        conn.execute("CREATE TABLE study_notes (note TEXT NOT NULL) STRICT")

    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(store_mod.MIGRATIONS, 1, v1_to_v2)
    st = StudyStore(db)
    assert calls == [1] and st.meta("schema_version") == "2"
    assert st.conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert (tmp_path / "s.sqlite.v1.bak").is_file()
    st.close()
    # an older version without a migration path is refused
    monkeypatch.setattr(store_mod, "SCHEMA_VERSION", 3)
    with pytest.raises(SchemaVersionError, match="no migration from version 2"):
        StudyStore(db)


def test_foreign_and_missing_databases(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    c = sqlite3.connect(other)
    c.execute("CREATE TABLE schema_metadata (key TEXT, value TEXT)")
    c.execute("INSERT INTO schema_metadata VALUES ('schema_version', '3')")  # e.g. the reference's store
    c.commit()
    c.close()
    with pytest.raises(SchemaVersionError, match="not a capaudit human-study database"):
        Study.load(other)
    (tmp_path / "text.sqlite").write_text("hello", encoding="utf-8")
    with pytest.raises(InputError, match="not a SQLite database"):
        Study.load(tmp_path / "text.sqlite")
    with pytest.raises(InputError, match="no study database"):
        Study.load(tmp_path / "nope.sqlite")


_WRITER = textwrap.dedent("""
    import json, sys, time
    from capaudit.human.study import Study
    db, code, start, n = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    st = Study.load(db)
    s = st.login(code)
    if s.needs_consent():
        s.give_consent()
    tasks = [t for t in s.tasks() if t.phase == "caption"][:n]
    while time.time() < start:
        time.sleep(0.001)
    dup = 0
    for t in tasks:
        r = s.record(t.item_id, "caption", {"caption_licensed": "yes", "atomic_visual_claim": "yes",
                                           "category_check": "correct"}, expected_revision=0)
        dup += r.duplicate
    print(json.dumps({"written": len(tasks), "duplicates": dup}))
""")


def _run_writers(db: Path, codes, n: int):
    start = time.time() + 2.0
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(db), code, str(start), str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for code in codes]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    return outs


def test_concurrent_writers_from_several_processes_lose_nothing(tmp_path: Path) -> None:
    study, people, _ = fixture_study(tmp_path, n_images=40, humans=4, labels_per_item=2, claims_per_stratum=4,
                                     target_items=40)
    per = {p.participant_id: len([t for t in study.login(p.code).tasks() if t.phase == "caption"]) for p in people}
    n = min(per.values())
    assert n >= 20
    outs = _run_writers(study.path, [p.code for p in people], n)
    assert [o["written"] for o in outs] == [n] * 4 and sum(o["duplicates"] for o in outs) == 0
    rows = study.store.read("SELECT participant_id, item_id, COUNT(*) AS k FROM annotations GROUP BY 1, 2")
    assert len(rows) == 4 * n and all(r["k"] == 1 for r in rows)
    study.close()


def test_same_judgment_from_two_processes_is_recorded_once(tmp_path: Path) -> None:
    study, people, _ = fixture_study(tmp_path, n_images=12, humans=1, labels_per_item=1)
    n = 10
    outs = _run_writers(study.path, [people[0].code, people[0].code], n)
    assert sum(o["duplicates"] for o in outs) == n  # every screen answered twice, stored once
    assert study.store.one("SELECT COUNT(*) AS k FROM annotations")["k"] == n
    events = {r["event"]: r["k"] for r in study.store.read("SELECT event, COUNT(*) AS k FROM annotation_events GROUP BY 1")}
    assert events["saved"] == n and events["duplicate_ignored"] == n
    study.close()


def test_backup_is_a_consistent_copy(open_study, tmp_path: Path) -> None:
    study, people = open_study
    _annotate_one(study, people[0].code)
    out = study.backup(tmp_path / "bk" / "copy.sqlite")
    copy = Study.load(out)
    assert copy.store.one("SELECT COUNT(*) AS k FROM annotations")["k"] == 1
    assert json.loads(copy.store.one("SELECT config_json FROM studies")["config_json"])["study_id"] == "fixture-study"
    copy.close()
    with pytest.raises(InputError, match="itself"):
        study.backup(study.path)
