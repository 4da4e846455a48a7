"""Every ``human``, ``embed`` and ``encoder-truncation`` command fails loudly and cleanly (issue 19).

Bad inputs through the real CLI (:mod:`_battery`): exit status != 0, exactly one stderr line
starting ``capaudit `` that names the file (and line or field) or the option, no traceback, and
nothing in the scratch folder created, changed or removed. The scratch folder holds a small sealed
and open study database (built once, in-process) beside the bad files. ``human serve`` is only
given inputs it must refuse before starting a server. ``embed`` cases that need a model use the
random tiny CLIP (no download) and are kept few; the rest fail before any model is loaded.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from _battery import Case, assert_fails_cleanly, run_cases
from _battery import jsonl as _jsonl

CAPTIONS = [{"id": i, "caption": f"A photo of {n} red buses parked near the old station."}
            for i, n in enumerate(["one", "two", "three", "four", "five", "six"])]
LABELS_HEADER = "item_id,rater,label\n"


def _study(root: Path) -> None:
    """``study.sqlite``: sampled from synthetic judged claims, sealed, one invite, assigned, open;
    ``fresh.sqlite``: a study just created (what ``human sample`` is run on); ``sealed.sqlite``: items sealed and
    assigned, not valid for launch (images not materialised); ``noimg.sqlite``: sampled, no image found."""
    from capaudit.human.protocol import StudyConfig
    from capaudit.human.simulate import synthetic_judged_claims
    from capaudit.human.study import Study

    jc = synthetic_judged_claims(root / "in" / "judged_claims.jsonl", n_images=6)
    conf = StudyConfig(study_id="battery", claims_per_stratum=1, require_all_strata=False, target_items=10,
                       max_items=20)
    with Study.create(root / "study.sqlite", conf) as st:
        st.sample([jc])
        st.seal()
        st.invite(1)
        st.assign()
        st.open()
    Study.create(root / "fresh.sqlite", conf).close()  # created, not sampled yet
    with Study.create(root / "sealed.sqlite", conf) as st:  # items sealed, assigned, images not materialised
        st.sample([jc])
        st.seal()
        st.invite(1)
        st.assign()
    nojc = synthetic_judged_claims(root / "in" / "noimg" / "judged_claims.jsonl", n_images=2, missing_images=2)
    with Study.create(root / "noimg.sqlite", conf) as st:  # every image path is gone
        st.sample([nojc])


def make_inputs(root: Path) -> None:
    i = root / "in"
    i.mkdir()
    _study(root)
    good_claim = (root / "in" / "judged_claims.jsonl").read_text().splitlines()[0]
    (i / "claims_malformed.jsonl").write_text(good_claim + "\n{\"question_id\": oops}\n")
    (i / "claims_truncated.jsonl").write_text(good_claim + "\n" + good_claim[:40])
    (i / "claims_latin1.jsonl").write_bytes(good_claim.encode() + b"\n{\"question_id\": \"caf\xe9\"}\n")
    (i / "claims_missing_field.jsonl").write_text(good_claim + "\n" + _jsonl([{"question_id": "q:u0001"}]))
    (i / "empty.jsonl").write_text("")
    (i / "empty.yaml").write_text("")
    (i / "latin1.yaml").write_bytes(b"study_id: x\n# caf\xe9\n")
    (i / "badkey.yaml").write_text("study_id: x\nclaims_per_stratun: 3\n")
    (i / "badbatch.yaml").write_text("study_id: x\nbatch_size: -2\n")
    (i / "badsampling.yaml").write_text("study_id: x\nsampling: disagreements\n")
    (i / "badshare.yaml").write_text("study_id: x\nsampling: disagreement_first\ndisagreement_share: 1.5\n")
    (i / "params_latin1.yaml").write_bytes(b"run: x\nhuman:\n  study_id: caf\xe9\n")
    (i / "good.jsonl").write_text(_jsonl(CAPTIONS))
    (i / "one.jsonl").write_text(_jsonl(CAPTIONS[:1]))
    (i / "malformed.jsonl").write_text('{"caption": "ok"}\n{"caption": oops}\n')
    (i / "truncated.jsonl").write_text('{"caption": "ok"}\n{"caption": "cut sho')
    (i / "latin1.jsonl").write_bytes(b'{"caption": "ok"}\n{"caption": "caf\xe9"}\n')
    (i / "prompts_latin1.jsonl").write_bytes(b'{"prompt": "a red bus"}\n{"prompt": "caf\xe9"}\n')
    (i / "prompts_blank.jsonl").write_text(_jsonl([{"prompt": " "}, {"prompt": ""}]))
    (i / "pairs_no_image.jsonl").write_text(_jsonl([{"image_path": "x.jpg", "caption": "a"}, {"caption": "b"}]))
    (i / "pairs_truncated.jsonl").write_text('{"image_path": "x.jpg", "caption": "a"}\n{"image_path": "x.j')
    (i / "pairs_latin1.jsonl").write_bytes(b'{"image_path": "x.jpg", "caption": "a"}\n'
                                           b'{"image_path": "x.jpg", "caption": "caf\xe9"}\n')
    (i / "pairs_missing_image.jsonl").write_text(_jsonl([{"image_path": "in/nope.jpg", "caption": "a dog"},
                                                         {"image_path": "in/nope2.jpg", "caption": "a cat"}]))
    (i / "labels_latin1.csv").write_bytes((LABELS_HEADER + "i1,a,yes\ni1,b,no\n").encode() + b"i2,caf\xe9,yes\n")
    (i / "labels_empty.csv").write_text("")
    (i / "not_sqlite.sqlite").write_text("this is not a database\n")
    con = sqlite3.connect(i / "other.sqlite")  # a SQLite file that is not a study
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()
    o = root / "out"
    o.mkdir()
    (o / "existing.csv").write_text("keep\n")
    (o / "adir").mkdir()
    (o / "afile").write_text("x\n")


D = ["--db", "study.sqlite"]
F = ["--db", "fresh.sqlite"]
TINY = ["--model", "capaudit-random-tiny-clip"]

CASES = [
    # --- human init
    Case("init-config-latin1", ["human", "init", "--db", "out/new.sqlite", "--config", "in/latin1.yaml"],
         ["in/latin1.yaml:2", "UTF-8"]),
    Case("init-config-empty", ["human", "init", "--db", "out/new.sqlite", "--config", "in/empty.yaml"],
         ["in/empty.yaml", "empty"]),
    Case("init-config-missing", ["human", "init", "--db", "out/new.sqlite", "--config", "in/nope.yaml"],
         ["in/nope.yaml", "not found"]),
    Case("init-config-unknown-key", ["human", "init", "--db", "out/new.sqlite", "--config", "in/badkey.yaml"],
         ["in/badkey.yaml", "claims_per_stratun"]),
    Case("init-config-negative-batch", ["human", "init", "--db", "out/new.sqlite", "--config", "in/badbatch.yaml"],
         ["in/badbatch.yaml", "batch_size", ">= 0"]),
    Case("init-config-bad-sampling", ["human", "init", "--db", "out/new.sqlite", "--config", "in/badsampling.yaml"],
         ["in/badsampling.yaml", "'sampling'", "disagreement_first"]),
    Case("init-config-bad-disagreement-share", ["human", "init", "--db", "out/new.sqlite", "--config",
                                                "in/badshare.yaml"], ["in/badshare.yaml", "'disagreement_share'"]),
    Case("init-params-latin1", ["human", "init", "--db", "out/new.sqlite", "--params", "in/params_latin1.yaml"],
         ["in/params_latin1.yaml:3", "UTF-8"]),
    Case("init-db-exists", ["human", "init", *D, "--study-id", "x"],
         ["study.sqlite", "already exists"]),
    Case("init-db-is-directory", ["human", "init", "--db", "out/adir", "--study-id", "x"], ["out/adir", "directory"]),
    Case("init-db-under-a-file", ["human", "init", "--db", "out/afile/s.sqlite", "--study-id", "x"],
         ["out/afile", "file"]),
    # --- human sample
    Case("sample-claims-missing", ["human", "sample", *F, "--judged-claims", "in/nope.jsonl"],
         ["in/nope.jsonl", "not found"]),
    Case("sample-claims-empty", ["human", "sample", *F, "--judged-claims", "in/empty.jsonl"],
         ["in/empty.jsonl", "empty"]),
    Case("sample-claims-latin1", ["human", "sample", *F, "--judged-claims", "in/claims_latin1.jsonl"],
         ["in/claims_latin1.jsonl:2", "UTF-8"]),
    Case("sample-claims-malformed", ["human", "sample", *F, "--judged-claims", "in/claims_malformed.jsonl"],
         ["in/claims_malformed.jsonl:2", "JSON"]),
    Case("sample-claims-truncated", ["human", "sample", *F, "--judged-claims", "in/claims_truncated.jsonl"],
         ["in/claims_truncated.jsonl:2", "JSON"]),
    Case("sample-claims-missing-field", ["human", "sample", *F, "--judged-claims", "in/claims_missing_field.jsonl"],
         ["in/claims_missing_field.jsonl:2", "field"]),
    Case("sample-db-not-sqlite", ["human", "sample", "--db", "in/not_sqlite.sqlite", "--judged-claims",
                                  "in/judged_claims.jsonl"], ["in/not_sqlite.sqlite", "not a SQLite"]),
    # --- lifecycle commands on a file that is not a study
    Case("seal-foreign-sqlite", ["human", "seal", "--db", "in/other.sqlite"], ["in/other.sqlite", "not a capaudit"]),
    Case("open-db-missing", ["human", "open", "--db", "in/nope.sqlite"], ["in/nope.sqlite", "no study database"]),
    Case("close-db-is-directory", ["human", "close", "--db", "out/adir"], ["out/adir", "directory"]),
    Case("assign-foreign-sqlite", ["human", "assign", "--db", "in/other.sqlite"], ["in/other.sqlite", "not a capaudit"]),
    Case("status-not-sqlite", ["human", "status", "--db", "in/not_sqlite.sqlite"], ["in/not_sqlite.sqlite"]),
    # --- human invite
    Case("invite-count-zero", ["human", "invite", *D, "--count", "0"], ["--count", "positive"]),
    Case("invite-count-negative", ["human", "invite", *D, "--count", "-1"], ["--count", "positive"]),
    Case("invite-out-exists", ["human", "invite", *D, "--count", "1", "--out", "out/existing.csv"],
         ["out/existing.csv", "exists"]),
    Case("invite-out-under-a-file", ["human", "invite", *D, "--count", "1", "--out", "out/afile/i.csv"],
         ["out/afile", "file"]),
    # --- human export, backup, adjudicate, withdraw
    Case("export-n-resamples-zero", ["human", "export", *D, "--out", "out/exp", "--n-resamples", "0"],
         ["--n-resamples", "positive"]),
    Case("export-n-resamples-negative", ["human", "export", *D, "--out", "out/exp", "--n-resamples", "-5"],
         ["--n-resamples", "positive"]),
    Case("export-out-is-a-file", ["human", "export", *D, "--out", "out/afile"], ["out/afile", "file"]),
    Case("export-foreign-sqlite", ["human", "export", "--db", "in/other.sqlite", "--out", "out/exp"],
         ["in/other.sqlite", "not a capaudit"]),
    Case("backup-out-is-directory", ["human", "backup", *D, "--out", "out/adir"], ["out/adir", "directory"]),
    Case("backup-out-under-a-file", ["human", "backup", *D, "--out", "out/afile/b.sqlite"], ["out/afile", "file"]),
    Case("adjudicate-list-out-is-directory", ["human", "adjudicate", *D, "--list", "--out", "out/adir"],
         ["out/adir", "directory"]),
    Case("adjudicate-unknown-item", ["human", "adjudicate", *D, "--item", "nope", "--field", "image_support",
                                     "--value", "yes", "--adjudicator", "ADJ1"],
         ["study.sqlite", "'item_id'", "'nope'"]),
    Case("withdraw-unknown-pseudonym", ["human", "withdraw", *D, "--pseudonym", "P999"],
         ["study.sqlite", "'pseudonym'", "P999"]),
    # --- human validate, materialize, seal (launch), participant-test
    Case("validate-db-missing", ["human", "validate", "--db", "in/nope.sqlite"], ["in/nope.sqlite", "no study database"]),
    Case("validate-foreign-sqlite", ["human", "validate", "--db", "in/other.sqlite"], ["in/other.sqlite", "not a capaudit"]),
    Case("validate-no-items", ["human", "validate", *F], ["fresh.sqlite", "no items yet"]),
    Case("materialize-no-items", ["human", "materialize", *F], ["fresh.sqlite", "no items yet"]),
    Case("materialize-max-side-zero", ["human", "materialize", *D, "--max-side", "0"], ["--max-side", "positive"]),
    Case("materialize-not-sqlite", ["human", "materialize", "--db", "in/not_sqlite.sqlite"],
         ["in/not_sqlite.sqlite", "not a SQLite"]),
    Case("materialize-no-image-found", ["human", "materialize", "--db", "noimg.sqlite"], ["missing_", "none of the 2"]),
    Case("seal-ethics-without-info", ["human", "seal", *D, "--ethics-id", "IRB-1"], ["--participant-info", "both"]),
    Case("seal-info-without-ethics", ["human", "seal", *D, "--participant-info", "in/good.jsonl"],
         ["--ethics-id", "both"]),
    Case("seal-ethics-blank", ["human", "seal", *D, "--ethics-id", " ", "--participant-info", "in/good.jsonl"],
         ["--ethics-id", "printable"]),
    Case("seal-info-missing", ["human", "seal", *D, "--ethics-id", "IRB-1", "--participant-info", "in/nope.pdf"],
         ["in/nope.pdf", "not found"]),
    Case("seal-info-empty", ["human", "seal", *D, "--ethics-id", "IRB-1", "--participant-info", "in/empty.yaml"],
         ["in/empty.yaml", "empty"]),
    Case("seal-info-is-directory", ["human", "seal", *D, "--ethics-id", "IRB-1", "--participant-info", "out/adir"],
         ["out/adir", "not a file"]),
    Case("seal-launch-before-items-sealed", ["human", "seal", *F, "--ethics-id", "IRB-1", "--participant-info",
                                             "in/good.jsonl"], ["fresh.sqlite", "seal its items first"]),
    Case("seal-launch-validation-fails", ["human", "seal", "--db", "sealed.sqlite", "--ethics-id", "IRB-1",
                                          "--participant-info", "in/good.jsonl"],
         ["sealed.sqlite", "refusing to seal", "images_not_materialised", "capaudit human validate"]),
    Case("seal-launch-after-open", ["human", "seal", *D, "--ethics-id", "IRB-1", "--participant-info", "in/good.jsonl"],
         ["study.sqlite", "before it opens"]),
    Case("participant-test-no-items", ["human", "participant-test", *F, "--no-serve"], ["fresh.sqlite", "no items yet"]),
    Case("participant-test-foreign-sqlite", ["human", "participant-test", "--db", "in/other.sqlite", "--no-serve"],
         ["in/other.sqlite", "not a capaudit"]),
    Case("participant-test-port-zero", ["human", "participant-test", *D, "--port", "0"], ["--port", "1-65535"]),
    # --- human serve: refusals only (no server is started)
    Case("serve-real-study-not-sealed-for-launch", ["human", "serve", "--db", "sealed.sqlite", "--dry-run"],
         ["sealed.sqlite", "not sealed for launch", "--allow-unsealed"]),
    Case("serve-port-zero", ["human", "serve", *D, "--port", "0", "--dry-run"], ["--port", "1-65535"]),
    Case("serve-port-too-large", ["human", "serve", *D, "--port", "70000", "--dry-run"], ["--port", "1-65535"]),
    Case("serve-foreign-sqlite", ["human", "serve", "--db", "in/other.sqlite", "--dry-run"],
         ["in/other.sqlite", "not a capaudit"]),
    Case("serve-dashboard-foreign-sqlite", ["human", "serve", "--dashboard", "--db", "in/other.sqlite", "--dry-run"],
         ["in/other.sqlite", "not a capaudit"]),
    # --- human demo, agreement
    Case("demo-params-missing", ["human", "demo", "--params", "in/nope.yaml"], ["in/nope.yaml", "not found"]),
    Case("demo-params-latin1", ["human", "demo", "--params", "in/params_latin1.yaml"],
         ["in/params_latin1.yaml:3", "UTF-8"]),
    Case("agreement-labels-latin1", ["human", "agreement", "--labels", "in/labels_latin1.csv", "--out", "out/a.json"],
         ["in/labels_latin1.csv:4", "UTF-8"]),
    Case("agreement-labels-empty", ["human", "agreement", "--labels", "in/labels_empty.csv", "--out", "out/a.json"],
         ["in/labels_empty.csv", "empty"]),
    Case("agreement-out-is-directory", ["human", "agreement", "--labels", "in/labels_latin1.csv", "--out", "out/adir"],
         ["out/adir", "directory"]),
    # --- embed probe (all fail before a model is loaded)
    Case("probe-surface-missing", ["embed", "probe", "--surface", "a=in/nope.jsonl"], ["in/nope.jsonl", "not found"]),
    Case("probe-surface-empty", ["embed", "probe", "--surface", "a=in/empty.jsonl"], ["in/empty.jsonl", "empty"]),
    Case("probe-surface-latin1", ["embed", "probe", "--surface", "a=in/latin1.jsonl"], ["in/latin1.jsonl:2", "UTF-8"]),
    Case("probe-surface-malformed", ["embed", "probe", "--surface", "a=in/malformed.jsonl"],
         ["in/malformed.jsonl", "line 2"]),
    Case("probe-surface-one-caption", ["embed", "probe", "--surface", "a=in/one.jsonl"], ["in/one.jsonl", "2"]),
    Case("probe-pool-latin1", ["embed", "probe", "--surface", "a=in/good.jsonl", "--pool", "p=in/prompts_latin1.jsonl"],
         ["in/prompts_latin1.jsonl:2", "UTF-8"]),
    Case("probe-pool-blank", ["embed", "probe", "--surface", "a=in/good.jsonl", "--pool", "p=in/prompts_blank.jsonl"],
         ["in/prompts_blank.jsonl", "no non-empty"]),
    Case("probe-gallery-smaller-than-k", ["embed", "probe", "--surface", "a=in/good.jsonl", "--pool",
                                          "p=in/good.jsonl", "--pool-field", "caption", "--k", "6"], ["in/good.jsonl", "--k"]),
    Case("probe-k-zero", ["embed", "probe", "--surface", "a=in/good.jsonl", "--k", "0"], ["--k", "positive"]),
    Case("probe-thresholds-empty", ["embed", "probe", "--surface", "a=in/good.jsonl", "--thresholds", ","],
         ["--thresholds"]),
    Case("probe-thresholds-out-of-range", ["embed", "probe", "--surface", "a=in/good.jsonl", "--thresholds", "0.5,2"],
         ["--thresholds", "-1"]),
    Case("probe-out-is-directory", ["embed", "probe", "--surface", "a=in/good.jsonl", "--out", "out/adir"],
         ["out/adir", "directory"]),
    # --- embed retrieval
    Case("retrieval-reps-zero", ["embed", "retrieval", *TINY, "--coco-mini", "a=0", "--reps", "0"],
         ["--reps", "positive"]),
    Case("retrieval-reps-negative", ["embed", "retrieval", *TINY, "--coco-mini", "a=0", "--reps", "-1"],
         ["--reps", "positive"]),
    Case("retrieval-coco-rank-out-of-range", ["embed", "retrieval", *TINY, "--coco-mini", "a=9"],
         ["--coco-mini", "0-4"]),
    Case("retrieval-surface-missing-field", ["embed", "retrieval", *TINY, "--surface", "a=in/pairs_no_image.jsonl"],
         ["in/pairs_no_image.jsonl:2", "image_path"]),
    Case("retrieval-surface-latin1", ["embed", "retrieval", *TINY, "--surface", "a=in/pairs_latin1.jsonl"],
         ["in/pairs_latin1.jsonl:2", "UTF-8"]),
    Case("retrieval-surface-truncated", ["embed", "retrieval", *TINY, "--surface", "a=in/pairs_truncated.jsonl"],
         ["in/pairs_truncated.jsonl", "line 2"]),
    Case("retrieval-image-missing", ["embed", "retrieval", *TINY, "--surface", "a=in/pairs_missing_image.jsonl"],
         ["in/pairs_missing_image.jsonl:1", "image_path", "in/nope.jpg"]),
    Case("retrieval-one-row", ["embed", "retrieval", *TINY, "--surface", "a=in/empty.jsonl"],
         ["in/empty.jsonl", "empty"]),
    Case("retrieval-out-under-a-file", ["embed", "retrieval", *TINY, "--coco-mini", "a=0", "--out", "out/afile/r.json"],
         ["out/afile", "file"]),
    Case("retrieval-model-missing", ["embed", "retrieval", "--model", "in/nomodel", "--coco-mini", "a=0"],
         ["in/nomodel"]),
    # --- encoder-truncation
    Case("trunc-missing", ["encoder-truncation", "in/nope.jsonl"], ["in/nope.jsonl", "not found"]),
    Case("trunc-empty", ["encoder-truncation", "in/empty.jsonl"], ["in/empty.jsonl", "empty"]),
    Case("trunc-latin1", ["encoder-truncation", "in/latin1.jsonl"], ["in/latin1.jsonl:2", "UTF-8"]),
    Case("trunc-truncated", ["encoder-truncation", "in/truncated.jsonl"], ["in/truncated.jsonl", "line 2"]),
    Case("trunc-mistyped-field", ["encoder-truncation", "in/good.jsonl", "--caption-field", "captoin"],
         ["in/good.jsonl", "captoin"]),
    Case("trunc-max-records-zero", ["encoder-truncation", "in/good.jsonl", "--max-records", "0"],
         ["--max-records", "positive"]),
    Case("trunc-workers-zero", ["encoder-truncation", "in/good.jsonl", "--workers", "0"], ["--workers", "positive"]),
    Case("trunc-shards-negative", ["encoder-truncation", "in/good.jsonl", "--shards", "-2"], ["--shards", "positive"]),
    Case("trunc-budgets-negative", ["encoder-truncation", "in/good.jsonl", "--budgets", "16,-4"],
         ["--budgets", "positive"]),
    Case("trunc-max-length-zero", ["encoder-truncation", "in/good.jsonl", "--max-length", "clip77=0"],
         ["--max-length", "positive"]),
    Case("trunc-unknown-encoder", ["encoder-truncation", "in/good.jsonl", "--encoder", "nope"], ["nope", "clip77"]),
    Case("trunc-tokenizer-missing", ["encoder-truncation", "in/good.jsonl", "--encoder", "mine", "--tokenizer-path",
                                     "mine=in/notok", "--max-length", "mine=64"], ["in/notok"]),
    Case("trunc-out-is-directory", ["encoder-truncation", "in/good.jsonl", "--out", "out/adir"],
         ["out/adir", "directory"]),
    Case("trunc-clean-unknown", ["encoder-truncation", "in/good.jsonl", "--clean", "ftfy"],
         ["--clean", "ftfy", "open_clip"]),
    Case("trunc-empty-unknown", ["encoder-truncation", "in/good.jsonl", "--empty", "drop"],
         ["--empty", "drop", "skip"]),
]


@pytest.fixture(scope="module")
def battery(tmp_path_factory):
    return run_cases(CASES, tmp_path_factory.mktemp("battery_human"), make_inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fails_loudly_and_cleanly(case: Case, battery):
    assert_fails_cleanly(case, battery[case.id])
