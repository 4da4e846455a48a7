"""``capaudit judges import|item-scores|correlate|calibrate`` fail loudly and cleanly (issue 20).

Same contract as the other batteries (:mod:`_battery`): non-zero exit, one stderr line naming the
file (row, field) or option, no traceback, no file created, changed or removed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest

from _battery import Case, assert_fails_cleanly, run_cases, with_options

ANSWERS_HEAD = "dsg_prompt_split,qg_model,t2i_model,item_id,question,question_id,dependency_id,answer\n"
ANSWERS = ANSWERS_HEAD + (
    "tifa160,dsg,m1,tifa160_0,Is there a dog?,1,0,yes\n"
    "tifa160,dsg,m1,tifa160_0,Is the dog brown?,2,1,no\n"
    "tifa160,dsg,m1,tifa160_1,Is there a cat?,1,0,stat stat\n"
    "tifa160,dsg,m2,tifa160_0,Is there a dog?,1,0,yes\n"
    "tifa160,dsg,m2,tifa160_0,Is the dog brown?,2,1,yes\n"
    "tifa160,dsg,m2,tifa160_1,Is there a cat?,1,0,no\n"
    "tifa160,dsg,m1,tifa160_2,Is there a cup?,1,0,yes\n"
    "tifa160,dsg,m2,tifa160_2,Is there a cup?,1,0,no\n")
QUESTIONS = ("item_id,text,keywords,proposition_id,dependency,category_broad,category_detailed,tuple,"
             "question_natural_language\n"
             "tifa160_0,a brown dog,dog,1,0,entity,whole,entity - whole (dog),Is there a dog?\n"
             "tifa160_0,a brown dog,dog,2,1,attribute,color,\"attribute - color (dog, brown)\",Is the dog brown?\n"
             "tifa160_1,a cat,cat,1,0,entity,whole,entity - whole (cat),Is there a cat?\n"
             "tifa160_2,a cup,cup,1,0,entity,whole,entity - whole (cup),Is there a cup?\n")
LIKERT = "t2i_model,item_id,answer\n" + "".join(f"{m},tifa160_{i},{r}\n" for m in ("m1", "m2") for i in (0, 1, 2)
                                              for r in (3, 4))


def make_inputs(root: Path) -> None:
    i = root / "in"
    i.mkdir()
    (i / "answers.csv").write_text(ANSWERS)
    (i / "questions.csv").write_text(QUESTIONS)
    (i / "likert.csv").write_text(LIKERT)
    (i / "questions_other_split.csv").write_text(QUESTIONS.replace("tifa160_", "coco_"))
    (i / "nul_answer.csv").write_text(ANSWERS + "tifa160,dsg,m1,tifa160_2,Is it red?,2,1,ye\x00s\n")
    (i / "empty.csv").write_text("")
    (i / "header_only.csv").write_text(ANSWERS_HEAD)
    (i / "no_answer_col.csv").write_text(ANSWERS.replace(",answer\n", ",reply\n", 1))
    (i / "bad_qid.csv").write_text(ANSWERS_HEAD + "tifa160,dsg,m1,tifa160_0,Is there a dog?,one,0,yes\n")
    (i / "dup_qid.csv").write_text(ANSWERS_HEAD + "tifa160,dsg,m1,tifa160_0,Q?,1,0,yes\ntifa160,dsg,m1,tifa160_0,Q?,1,0,no\n")
    (i / "latin1.csv").write_bytes(ANSWERS.encode() + b"tifa160,dsg,m1,tifa160_2,caf\xe9?,1,0,yes\n")
    (i / "bad_category.csv").write_text(QUESTIONS + "tifa160_1,a cat,cat,2,1,wibble,x,t,Is it?\n")
    (i / "likert_range.csv").write_text(LIKERT + "m1,tifa160_0,6\n")
    (i / "likert_other.csv").write_text("t2i_model,item_id,answer\nzz,x1,3\nzz,x2,4\nzz,x3,5\n")
    (i / "tifa_bad.json").write_text('{"tifa_average": 1}')
    (i / "not_a_store").mkdir()
    (i / "store_noresp").mkdir()
    (i / "store_noresp" / "requests.jsonl").write_text("")
    o = root / "out"
    o.mkdir()
    (o / "adir").mkdir()
    (o / "afile").write_text("x\n")
    (o / "full").mkdir()
    (o / "full" / "keep.txt").write_text("someone's file\n")
    # a valid store, imported once, for the scoring commands
    from capaudit.judges.releases import import_release

    import_release("dsg", i / "answers.csv", "J", root / "store", questions=i / "questions.csv")


IMPORT = ["judges", "import", "--format", "dsg", "--answers", "in/answers.csv", "--questions", "in/questions.csv",
          "--judge", "J", "--out", "out/new"]
SCORES = ["judges", "item-scores", "--store", "store", "--dependency", "on", "--out", "out/s.jsonl"]
CORR = ["judges", "correlate", "--store", "store", "--human", "in/likert.csv", "--dependency", "on", "--missing",
        "zero", "--reps", "10", "--out", "out/c.json"]
CAL = ["judges", "calibrate", "--store", "store", "--human", "in/likert.csv", "--dependency", "off",
       "--labelled", "2", "--seed", "0", "--out", "out/cal.json"]


_with = with_options


CASES = [
    # --- judges import
    Case("import-missing-answers", _with(IMPORT, answers="in/nope.csv"), ["in/nope.csv", "not found"]),
    Case("import-empty-answers", _with(IMPORT, answers="in/empty.csv"), ["in/empty.csv", "missing column"]),
    Case("import-header-only", _with(IMPORT, answers="in/header_only.csv"), ["in/header_only.csv", "no answer rows"]),
    Case("import-no-answer-column", _with(IMPORT, answers="in/no_answer_col.csv"),
         ["in/no_answer_col.csv:1", "'answer'"]),
    Case("import-question-id-not-a-number", _with(IMPORT, answers="in/bad_qid.csv"),
         ["in/bad_qid.csv:2", "'question_id'", "'one'"]),
    Case("import-repeated-question", _with(IMPORT, answers="in/dup_qid.csv"), ["in/dup_qid.csv:3", "repeats question 1"]),
    Case("import-latin1", _with(IMPORT, answers="in/latin1.csv"), ["in/latin1.csv", "UTF-8"]),
    Case("import-unknown-category", _with(IMPORT, questions="in/bad_category.csv"), ["'wibble'", "release_vqa.yaml"]),
    Case("import-questions-of-another-split", _with(IMPORT, questions="in/questions_other_split.csv"),
         ["in/answers.csv", "'item_id'", "no answered item is in the questions file", "'coco_0'", "'tifa160_0'"]),
    Case("import-answer-with-nul-byte", _with(IMPORT, answers="in/nul_answer.csv"),
         ["in/nul_answer.csv:10", "'answer'", "NUL"]),
    Case("import-missing-questions", _with(IMPORT, questions="in/nope.csv"), ["in/nope.csv", "not found"]),
    Case("import-tifa-not-a-result", _with(IMPORT, format="tifa", answers="in/tifa_bad.json", questions=None),
         ["in/tifa_bad.json", "question_details"]),
    Case("import-tifa-with-questions", _with(IMPORT, format="tifa", answers="in/tifa_bad.json"), ["--questions"]),
    Case("import-bad-format", _with(IMPORT, format="parti"), ["--format", "parti"]),
    Case("import-empty-judge", _with(IMPORT, judge=" "), ["--judge"]),
    Case("import-out-not-empty", _with(IMPORT, out="out/full"), ["out/full", "not empty"]),
    Case("import-out-is-a-file", _with(IMPORT, out="out/afile"), ["out/afile", "file"]),
    Case("import-out-under-a-file", _with(IMPORT, out="out/afile/x"), ["out/afile", "is a file"]),
    # --- judges item-scores
    Case("scores-store-missing", _with(SCORES, store="in/nope"), ["in/nope", "not a judge store folder"]),
    Case("scores-store-without-files", _with(SCORES, store="in/not_a_store"), ["in/not_a_store", "requests.jsonl"]),
    Case("scores-store-without-responses", _with(SCORES, store="in/store_noresp"), ["in/store_noresp", "responses.jsonl"]),
    Case("scores-bad-dependency", _with(SCORES, dependency="maybe"), ["--dependency", "maybe"]),
    Case("scores-quirks-without-dependency", _with(SCORES, dependency="off", dsg_script_quirks=True),
         ["--dsg-script-quirks", "--dependency on"]),
    Case("scores-out-is-directory", _with(SCORES, out="out/adir"), ["out/adir", "directory"]),
    # --- judges correlate
    Case("correlate-human-missing", _with(CORR, human="in/nope.csv"), ["in/nope.csv", "not found"]),
    Case("correlate-human-out-of-range", _with(CORR, human="in/likert_range.csv"),
         ["in/likert_range.csv:14", "'answer'", "outside 1..5"]),
    Case("correlate-nothing-in-common", _with(CORR, human="in/likert_other.csv"), ["only 0 image"]),
    Case("correlate-bad-missing", _with(CORR, missing="mean"), ["--missing", "mean"]),
    Case("correlate-reps-one", _with(CORR, reps=1), ["--reps", ">= 2"]),
    Case("correlate-seed-negative", _with(CORR, seed=-1), ["--seed"]),
    Case("correlate-out-under-a-file", _with(CORR, out="out/afile/c.json"), ["out/afile", "is a file"]),
    # --- judges calibrate
    Case("calibrate-human-missing", _with(CAL, human="in/nope.csv"), ["in/nope.csv", "not found"]),
    Case("calibrate-labelled-zero", _with(CAL, labelled=0), ["--labelled"]),
    Case("calibrate-labelled-one", _with(CAL, labelled=1), ["--labelled 1", "2 <= N"]),
    Case("calibrate-labelled-too-many", _with(CAL, labelled=5), ["--labelled 5", "images"]),
    Case("calibrate-level-out-of-range", _with(CAL, level=1.5), ["--level"]),
    Case("calibrate-store-missing", _with(CAL, store="in/nope"), ["in/nope", "not a judge store folder"]),
    Case("calibrate-out-is-directory", _with(CAL, out="out/adir"), ["out/adir", "directory"]),
]


def _prepare(case: Case, work: Path) -> Path:
    return work


@pytest.fixture(scope="module")
def battery(tmp_path_factory) -> Dict[str, Any]:
    return run_cases(CASES, tmp_path_factory.mktemp("battery_releases"), make_inputs, _prepare)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fails_loudly_and_cleanly(case: Case, battery) -> None:
    assert_fails_cleanly(case, battery[case.id])


def test_the_battery_base_commands_succeed(tmp_path: Path) -> None:
    """Each case changes one thing of a command that works: the bases themselves exit 0."""
    from _battery import run_cli

    make_inputs(tmp_path)
    for base in (IMPORT, SCORES, CORR, CAL):
        p = run_cli(base, tmp_path)
        assert p.returncode == 0, (base, p.stderr)
