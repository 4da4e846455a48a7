"""``judges import`` / ``item-scores`` / ``correlate`` on the DSG and TIFA releases (issue 20).

The DSG checks recompute each image's score straight from the release CSVs with DSG's scoring
rules written out here (``_dsg_item_score``), independently of the store path, and compare.
"""

from __future__ import annotations

import csv
import json
from collections import OrderedDict
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import pytest

from capaudit.cli import main
from capaudit.errors import InputError
from capaudit.judges.correlate import correlate, pair_up, read_human_ratings
from capaudit.judges.dependency import DependencyCounts, apply_to_codes
from capaudit.judges.item_scores import item_scores, read_item_scores
from capaudit.judges.releases import (dsg_category, import_release, normalise_answer, release_rules, store_paths,
                                      tifa_category)
from capaudit.summaries.categories import UNIT_CATEGORIES


# --- normalisation and the reviewed data file ------------------------------------------------
@pytest.mark.parametrize("raw,want", [
    ("yes", ("yes", "ok")), (" Yes. ", ("yes", "ok")), ("NO", ("no", "ok")), ("no!", ("no", "ok")),
    ("unanswerable", ("uncertain", "ok")), ("", ("uncertain", "empty")), ("   ", ("uncertain", "empty")),
    (None, ("uncertain", "missing")), ("unsuitable", ("uncertain", "unrecognised")),
    ("stat stat", ("uncertain", "unrecognised")), ("no bus", ("uncertain", "unrecognised")),
    ("yes 1000", ("uncertain", "unrecognised")), ("red", ("uncertain", "unrecognised")),
])
def test_normalise_answer(raw, want):
    assert normalise_answer(raw) == want


def test_lexicon_labels_are_the_three_answers_and_yaml_booleans_are_not_keys():
    assert set(release_rules()["answers"]) == {"yes", "no", "uncertain"}
    assert release_rules()["uncategorised"] in UNIT_CATEGORIES


def test_every_dsg_category_of_the_questions_file_maps(dsg_release: Path):
    with open(dsg_release / "data" / "dsg-1k-anns.csv", newline="", encoding="utf-8") as fh:
        pairs = {(r["category_broad"], r["category_detailed"]) for r in csv.DictReader(fh)}
    got = {p: dsg_category(*p) for p in pairs}
    assert set(got.values()) <= set(UNIT_CATEGORIES)
    assert got[("entity", "whole")] == "object" and got[("relation", "spatial")] == "relation"
    assert got[("other", "count")] == "count" and got[("other", "text rendering")] == "text_rendering"
    assert got[("global", "-")] == "style"
    with pytest.raises(InputError, match="no capaudit category"):
        dsg_category("nonsense", "x")


def test_dsg_categories_agree_with_the_extractor_evaluation(dsg_release: Path):
    """One reading of DSG's categories: ours, collapsed as dsg_eval collapses style/camera/lighting
    into "global", equals dsg_eval's type wherever dsg_eval keeps the proposition."""
    from capaudit.claims.dsg_eval import eval_type

    collapse = {"style": "global", "camera": "global", "lighting": "global"}
    with open(dsg_release / "data" / "dsg-1k-anns.csv", newline="", encoding="utf-8") as fh:
        pairs = {(r["category_broad"], r["category_detailed"]) for r in csv.DictReader(fh)}
    for b, d in sorted(pairs):
        theirs = eval_type(b, d)
        if theirs is not None:
            ours = dsg_category(b, d)
            assert collapse.get(ours, ours) == theirs, (b, d, ours, theirs)


def test_every_tifa_element_type_maps():
    types = ["object", "animal/human", "attribute", "activity", "spatial", "location", "color", "counting", "food",
             "material", "shape", "other"]  # TIFA's 12 element types (PROVENANCE)
    assert {tifa_category(t) for t in types} <= set(UNIT_CATEGORIES)
    assert tifa_category("counting") == "count"


def test_normalised_yes_is_dsgs_literal_yes_on_every_release_answer(dsg_release: Path):
    """DSG's scripts score ``answer == 'yes'``; our normaliser is case/space-insensitive. On the
    whole release the two agree, so the stores reproduce the scripts without a literal-match option."""
    n = 0
    for f in sorted((dsg_release / "vqa_answers_release").glob("*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                assert (normalise_answer(r["answer"])[0] == "yes") == (r["answer"] == "yes"), (f, r)
                n += 1
    assert n == 11858 * 3 + 7896 * 3 + 3178 * 3


# --- import -----------------------------------------------------------------------------------
def test_import_counts_and_names_what_is_not_an_answer(pali_dsg_store: Path):
    m = json.loads((pali_dsg_store / "import.json").read_text())
    assert m["images"] == 1700 and m["answered_images"] == 1695
    assert m["missing_images"] == [{"group": g, "item_id": "tifa160_134"}
                                   for g in ("mini-dalle", "vq-diffusion", "sd1dot1", "sd1dot5", "sd2dot1")]
    assert m["answer_status"] == {"empty": 77, "ok": 11777, "unrecognised": 4}
    assert m["answers"] == {"no": 2023, "uncertain": 82, "yes": 9753}
    assert {x["raw_answer"]: x["count"] for x in m["not_yes_no_uncertain"]} == {"": 77, "unsuitable": 3, "stat stat": 1}
    assert m["reader"]["malformed_dependency_cells"] == 14
    # every raw answer kept verbatim beside its normalised answer
    rows = [json.loads(x) for x in (pali_dsg_store / "responses.jsonl").read_text().splitlines()]
    results = [q for r in rows for q in r["parsed"]["question_results"]]
    assert len(results) == 11858
    assert sum(q["raw_answer"] == "stat stat" and q["answer"] == "uncertain" for q in results) == 1


def test_import_keeps_the_release_ids_dependencies_and_categories(pali_dsg_store: Path, dsg_release: Path):
    rq, _ = store_paths(pali_dsg_store)
    row = next(json.loads(x) for x in rq.read_text().splitlines()
               if json.loads(x)["input"]["caption_id"] == "tifa160_0" and json.loads(x)["input"]["surface"] == "mini-dalle")
    qs = row["input"]["questions"]
    assert [q["question_id"] for q in qs] == [f"tifa160_0:u{i:04d}" for i in range(1, len(qs) + 1)]
    assert qs[0]["question"] == "Is there a Christmas tree?"
    assert row["meta"]["parents"][3] == [1, 2]  # "Are the lights on the Christmas tree?" depends on 1,2
    assert row["meta"]["release_categories"][0] == "entity/whole" and qs[0]["category"] == "object"


def test_import_is_deterministic_and_refuses_a_folder_holding_something_else(pali_dsg_store: Path, dsg_release: Path, tmp_path: Path):
    again = tmp_path / "again"
    import_release("dsg", dsg_release / "vqa_answers_release" / "pali17b_dsg.csv", "pali-17b", again,
                   questions=dsg_release / "data" / "dsg-1k-anns.csv")
    for name in ("requests.jsonl", "responses.jsonl", "requests.index.jsonl"):
        assert (again / name).read_bytes() == (pali_dsg_store / name).read_bytes()
    # the same import into the same folder is allowed (same bytes); another judge's is refused
    import_release("dsg", dsg_release / "vqa_answers_release" / "pali17b_dsg.csv", "pali-17b", again,
                   questions=dsg_release / "data" / "dsg-1k-anns.csv")
    before = {p.name: p.read_bytes() for p in again.iterdir()}
    with pytest.raises(InputError, match="not empty"):
        import_release("dsg", dsg_release / "vqa_answers_release" / "mplug_dsg.csv", "mplug", again)
    assert {p.name: p.read_bytes() for p in again.iterdir()} == before


def test_summarize_and_cells_read_imports_unchanged(dsg_release: Path, tmp_path: Path, capsys):
    stores = {}
    for v in ("pali17b", "mplug", "instructblip"):
        stores[v] = tmp_path / v
        import_release("dsg", dsg_release / "vqa_answers_release" / f"{v}_dsg.csv", v, stores[v],
                       questions=dsg_release / "data" / "dsg-1k-anns.csv")
    assert main(["judges", "summarize", "--responses", str(stores["mplug"] / "responses.jsonl"), "--requests",
                 str(stores["mplug"] / "requests.jsonl"), "--out", str(tmp_path / "sum.json")]) == 0
    s = json.loads((tmp_path / "sum.json").read_text())
    assert sorted(s["surfaces"]) == sorted(["mini-dalle", "vq-diffusion", "sd1dot1", "sd1dot5", "sd2dot1"])
    args = ["judges", "cells", "--slice", "dsg", "--reps", "20"]
    for v, p in stores.items():
        args += ["--judge", f"{v}={p / 'responses.jsonl'}", "--requests", str(p / "requests.jsonl")]
    for dep in ("off", "on"):
        assert main(args + ["--dependency", dep, "--out", str(tmp_path / f"cells_{dep}.json")]) == 0
    off = json.loads((tmp_path / "cells_off.json").read_text())
    on = json.loads((tmp_path / "cells_on.json").read_text())
    assert off["judge_agreement"]["dsg"]["by_type"]["__all__"]["joined"] == 11858
    # dependency on turns answers of questions with a not-yes parent into "no": fewer yes, more no
    y_off = sum(c["all_types"]["yes"] if "all_types" in c else 0 for c in off["cells"])
    y_on = sum(c["all_types"]["yes"] if "all_types" in c else 0 for c in on["cells"])
    assert y_on <= y_off


# --- dependency scoring ----------------------------------------------------------------------
def _codes(s: str) -> np.ndarray:
    return np.array([{"y": 0, "n": 1, "u": 2}[c] for c in s], dtype=np.uint8)


def test_dependency_hand_example():
    # questions 1..5: 2 depends on 1, 3 on 2 (chain), 4 on 1 and 9 (9 unknown), 5 on 3
    parents = [(), (1,), (2,), (1, 9), (3,)]
    c = DependencyCounts()
    out = apply_to_codes(_codes("nyyyu"), [1, 2, 3, 4, 5], parents, c)
    # 2: parent 1 is no -> no; 3: parent 2's OWN answer is yes -> stays yes (no cascade, as DSG's code);
    # 4: parent 1 no -> no (stops at the first failing parent, 9 never looked up); 5: parent 3 yes -> u stays
    assert out.tolist() == _codes("nnyny").tolist()[:4] + [2]
    assert c.zeroed == 2 and c.unknown_parents == 0
    c2 = DependencyCounts()
    out2 = apply_to_codes(_codes("yuy"), [1, 2, 3], [(), (7,), (2,)], c2)
    assert out2.tolist() == _codes("yun").tolist()  # an uncertain parent zeroes too (score 0 in DSG)
    assert c2.unknown_parents == 1 and c2.zeroed == 1


def _read(path: Path) -> List[Dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _dsg_item_score(answers: Dict[int, str], deps: Dict[int, List[int]]) -> float:
    """DSG's ``calc_vqa_score``'s rule, written out: score 1 iff the answer is 'yes'; with
    dependencies, a question with a parent whose own score is 0 scores 0; mean over questions."""
    score = {q: float(a == "yes") for q, a in answers.items()}
    final = dict(score)
    for q, ps in deps.items():
        if any(p != 0 and score[p] == 0 for p in ps):
            final[q] = 0.0
    return sum(final.values()) / len(score)


def _dsg_dependencies(dsg_release: Path) -> Dict[str, Dict[int, List[int]]]:
    """dsg-1k-anns.csv's dependencies as the scripts load them: an item with a cell that is not all
    numbers gets none at all."""
    out: Dict[str, Dict[int, List[int]]] = OrderedDict()
    bad = set()
    for r in _read(dsg_release / "data" / "dsg-1k-anns.csv"):
        try:
            out.setdefault(r["item_id"], {})[int(r["proposition_id"])] = [int(x.strip()) for x in r["dependency"].split(",")]
        except ValueError:
            bad.add(r["item_id"])
    return {k: ({} if k in bad else v) for k, v in out.items()}


@pytest.mark.parametrize("vqa", ["pali17b", "mplug", "instructblip"])
def test_item_scores_equal_dsgs_rule_on_every_image(dsg_release: Path, tmp_path: Path, vqa: str):
    store = tmp_path / vqa
    import_release("dsg", dsg_release / "vqa_answers_release" / f"{vqa}_dsg.csv", vqa, store,
                   questions=dsg_release / "data" / "dsg-1k-anns.csv")
    deps = _dsg_dependencies(dsg_release)
    by_image: Dict[Tuple[str, str], Dict[int, str]] = OrderedDict()
    for r in _read(dsg_release / "vqa_answers_release" / f"{vqa}_dsg.csv"):
        by_image.setdefault((r["t2i_model"], r["item_id"]), {})[int(r["question_id"])] = r["answer"]
    rq, rs = store_paths(store)
    on = item_scores([rq], [rs], dependency=True, dsg_script_quirks=True).by_key()
    off = item_scores([rq], [rs], dependency=False).by_key()
    for key, answers in by_image.items():
        assert on[key].score == pytest.approx(_dsg_item_score(answers, deps[key[1]]), abs=1e-12), key
        assert off[key].score == pytest.approx(_dsg_item_score(answers, {}), abs=1e-12), key
    missing = [k for k, s in on.items() if not s.answered]
    assert missing and all(item == "tifa160_134" for _, item in missing) and on[missing[0]].score is None


def test_dsg_script_quirk_is_only_for_dependency_scoring(pali_dsg_store: Path):
    rq, rs = store_paths(pali_dsg_store)
    with pytest.raises(InputError, match="--dependency on"):
        item_scores([rq], [rs], dependency=False, dsg_script_quirks=True)
    plain = item_scores([rq], [rs], dependency=True).by_key()
    quirk = item_scores([rq], [rs], dependency=True, dsg_script_quirks=True)
    assert quirk.dependency.images_without_dependencies == 12  # 8 items x the groups they were answered for
    changed = {k for k, s in quirk.by_key().items() if s.score != plain[k].score}
    assert changed and {item for _, item in changed} <= {"posescript_69", "posescript_41", "posescript_55",
                                                         "posescript_19", "stanford_paragraph_54",
                                                         "stanford_paragraph_55", "stanford_paragraph_72", "tifa160_67"}


# --- TIFA --------------------------------------------------------------------------------------
def test_tifa_results_import_reproduces_tifas_caption_scores(data_dir: Path, tmp_path: Path):
    f = data_dir / "tifa" / "sample" / "sample_evaluation_result.json"
    if not f.is_file():
        pytest.skip("TIFA sample not in the data folder")
    published = json.loads(f.read_text())
    import_release("tifa", f, "mplug-large", tmp_path / "t", group="sample")
    rq, rs = store_paths(tmp_path / "t")
    scores = item_scores([rq], [rs], dependency=False)
    got = {r.item_id: r.score for r in scores.rows}
    assert got == pytest.approx(published["caption_scores"], abs=1e-12)
    assert float(np.mean(list(got.values()))) == pytest.approx(published["tifa_average"], abs=1e-12)
    assert {r.group for r in scores.rows} == {"sample"}


# --- correlate ------------------------------------------------------------------------------
def test_read_human_ratings_dsg_csv_and_tifa_json(dsg_release: Path, data_dir: Path):
    h = read_human_ratings(dsg_release / "data" / "tifa160-likert-anns.csv")
    assert len(h) == 800 and sum(len(r.ratings) for r in h) == 3995  # 3,995 ratings: a few images have three or four
    assert sorted({len(r.ratings) for r in h}) == [3, 4, 5]
    t = data_dir / "tifa" / "human_annotations" / "human_annotations.json"
    if t.is_file():
        th = read_human_ratings(t)
        raw = json.loads(t.read_text())
        assert len(th) == 800
        one = next(r for r in th if r.item_id == "coco_669925" and r.group == "mini_dalle")
        assert one.mean == raw["coco_669925_mini_dalle"]["human_avg"]


def test_correlate_missing_zero_and_skip(pali_dsg_store: Path, dsg_release: Path):
    from scipy import stats

    rq, rs = store_paths(pali_dsg_store)
    s = item_scores([rq], [rs], dependency=False).rows
    h = read_human_ratings(dsg_release / "data" / "tifa160-likert-anns.csv")
    z = correlate(s, h, missing="zero", reps=50, seed=1)
    k = correlate(s, h, missing="skip", reps=50, seed=1)
    assert (z["n"], z["missing"]["count"], k["n"], k["missing"]["count"]) == (800, 5, 795, 5)
    p = pair_up(s, h, "skip")
    ref = stats.spearmanr(p.judge, p.human)
    assert k["spearman"] == ref.statistic and k["spearman_p"] == ref.pvalue
    lo, hi = k["spearman_ci"]
    assert lo < k["spearman"] < hi
    assert set(k["groups"]) == {"mini-dalle", "sd1dot1", "sd1dot5", "sd2dot1", "vq-diffusion"}
    assert all(g["n"] == 159 for g in k["groups"].values())
    with pytest.raises(InputError, match="--missing"):
        correlate(s, h, missing="mean")


def test_vectorised_spearman_equals_scipy_with_ties():
    from scipy import stats

    from capaudit.judges.correlate import _spearman_along

    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, size=(7, 50)) / 5.0  # item scores tie often
    y = rng.integers(1, 6, size=(7, 50)) + rng.integers(0, 2, size=(7, 50)) / 2.0
    got = _spearman_along(x, y)
    want = [stats.spearmanr(a, b).statistic for a, b in zip(x, y)]
    assert got == pytest.approx(want, abs=1e-12)


def test_correlate_refuses_a_store_that_shares_no_image_with_the_ratings(pali_dsg_store: Path, tmp_path: Path):
    f = tmp_path / "h.csv"
    f.write_text("t2i_model,item_id,answer\nother,x1,3\nother,x2,4\nother,x3,5\n")
    rq, rs = store_paths(pali_dsg_store)
    s = item_scores([rq], [rs], dependency=False).rows
    with pytest.raises(InputError, match="only 0 image"):
        correlate(s, read_human_ratings(f), missing="skip")


def test_cli_item_scores_and_correlate(pali_dsg_store: Path, dsg_release: Path, tmp_path: Path, capsys):
    out = tmp_path / "s.jsonl"
    assert main(["judges", "item-scores", "--store", str(pali_dsg_store), "--dependency", "on", "--out", str(out)]) == 0
    rows = read_item_scores(out)
    assert len(rows) == 1700 and sum(r.score is None for r in rows) == 5
    corr = tmp_path / "c.json"
    assert main(["judges", "correlate", "--store", str(pali_dsg_store), "--human",
                 str(dsg_release / "data" / "tifa160-likert-anns.csv"), "--dependency", "on", "--dsg-script-quirks",
                 "--missing", "zero", "--reps", "20", "--out", str(corr)]) == 0
    c = json.loads(corr.read_text())
    assert {"spearman", "kendall", "n"} <= set(c) and c["n"] == 800
    assert (round(c["spearman"], 3), round(c["kendall"], 3)) == (0.571, 0.458)
    assert "Spearman 0.571" in capsys.readouterr().err


# --- review findings: edges of the inputs ---------------------------------------------------
def test_tifa_odd_vqa_answers_are_counted_never_a_no(data_dir: Path, tmp_path: Path):
    f = data_dir / "tifa" / "sample" / "sample_evaluation_result.json"
    if not f.is_file():
        pytest.skip("TIFA sample not in the data folder")
    data = json.loads(f.read_text())
    qs = data["question_details"]["coco_301091"]
    odd = list(qs)[:3]
    for q, v in zip(odd, ("", ["surfer"], None)):
        qs[q]["multiple_choice_vqa"] = v
    src = tmp_path / "odd.json"
    src.write_text(json.dumps(data))
    m = import_release("tifa", src, "t", tmp_path / "s").manifest
    assert m["answer_status"]["empty"] == 1 and m["answer_status"]["unrecognised"] == 1
    assert m["answer_status"]["missing"] == 1
    rows = [json.loads(x) for x in (tmp_path / "s" / "responses.jsonl").read_text().splitlines()]
    res = {r["question_id"]: r for r in rows[0]["parsed"]["question_results"]}
    assert [res[f"coco_301091:u{i:04d}"]["answer"] for i in (1, 2, 3)] == ["uncertain"] * 3
    assert res["coco_301091:u0004"]["raw_answer"] == qs[list(qs)[3]]["multiple_choice_vqa"]  # verbatim
    bad = json.loads(f.read_text())
    next(iter(bad["question_details"]["coco_301091"].values()))["choices"] = "notalist"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match="choices"):
        import_release("tifa", tmp_path / "bad.json", "t", tmp_path / "b")


def test_a_missing_answer_row_is_left_out_of_the_score_and_counted(dsg_release: Path, tmp_path: Path):
    rows = _read(dsg_release / "vqa_answers_release" / "pali17b_dsg.csv")
    keep = [r for r in rows if r["t2i_model"] == "sd2dot1" and r["item_id"] == "tifa160_0"]
    assert len(keep) == 5
    src = tmp_path / "partial.csv"
    with open(src, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep[1:])  # question 1 has no answer row
    m = import_release("dsg", src, "p", tmp_path / "s", questions=dsg_release / "data" / "dsg-1k-anns.csv").manifest
    assert m["answer_status"]["missing"] == 1
    rq, rs = store_paths(tmp_path / "s")
    row = next(r for r in item_scores([rq], [rs], dependency=False).rows if r.item_id == "tifa160_0")
    answers = {int(r["question_id"]): r["answer"] for r in keep[1:]}
    assert row.missing_answers == 1 and row.questions == 4
    assert row.score == pytest.approx(_dsg_item_score(answers, {}))  # DSG scores the answered rows only


def test_bom_and_repeated_question_text(tmp_path: Path):
    src = tmp_path / "a.csv"
    src.write_text("\ufefft2i_model,item_id,question,answer\nm,i1,Is it red?,yes\nm,i1,Is it red?,no\n"
                   "m,i2,Is it blue?,yes\n", encoding="utf-8")
    m = import_release("dsg", src, "j", tmp_path / "s").manifest
    assert m["groups"] == {"m": {"images": 2, "answered": 2, "questions": 3}}
    assert m["reader"]["repeated_question_text"] == 1


def test_ratings_refuse_a_worker_twice_and_a_missing_group(pali_dsg_store: Path, dsg_release: Path, tmp_path: Path):
    src = dsg_release / "data" / "tifa160-likert-anns.csv"
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "dup.csv").write_text("".join(lines + lines[1:2]), encoding="utf-8")
    with pytest.raises(InputError, match="rates image .* twice"):
        read_human_ratings(tmp_path / "dup.csv")
    (tmp_path / "typo.csv").write_text("".join(lines).replace(",sd2dot1,", ",sd2.1,"), encoding="utf-8")
    rq, rs = store_paths(pali_dsg_store)
    s = item_scores([rq], [rs], dependency=False).rows
    with pytest.raises(InputError, match=r"sd2\.1 \(0 of 160\)"):
        correlate(s, read_human_ratings(tmp_path / "typo.csv"), missing="zero", reps=0)


def test_import_counts_unknown_parents_and_items_the_questions_file_lacks(tmp_path: Path):
    """A dependency on a proposition the image does not have, and answered items the questions
    file does not hold, are imported and counted in the manifest's reader counts, never silently."""
    from capaudit.judges.releases import import_release

    head = "dsg_prompt_split,qg_model,t2i_model,item_id,question,question_id,dependency_id,answer\n"
    answers = tmp_path / "answers.csv"
    answers.write_text(head + "s,dsg,m1,s_0,Is there a dog?,1,0,yes\n"
                       "s,dsg,m1,s_0,Is the dog brown?,2,7,no\n"  # parent 7: no such question
                       "s,dsg,m1,s_1,Is there a cat?,1,0,yes\n")
    questions = tmp_path / "questions.csv"
    questions.write_text("item_id,proposition_id,dependency,category_broad,category_detailed,"
                         "question_natural_language\n"
                         "s_0,1,0,entity,whole,Is there a dog?\n"
                         "s_0,2,9,attribute,color,Is the dog brown?\n")  # s_1 absent; parent 9 unknown
    m = import_release("dsg", answers, "J", tmp_path / "store", questions=questions).manifest
    assert m["reader"]["answered_items_not_in_questions_file"] == 1
    assert m["reader"]["not_in_questions_file"] == 1
    assert m["reader"]["unknown_parent_ids"] == 1  # the questions file's dependency (9) replaces the answer file's
    m2 = import_release("dsg", answers, "J", tmp_path / "store2").manifest
    assert m2["reader"]["unknown_parent_ids"] == 1  # without a questions file: the answers' parent 7
