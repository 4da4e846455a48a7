"""Failure battery of the detail, alt-text and coverage commands (issue 19).

Every subcommand of ``capaudit detail`` (score, select, subgraphs, run), ``capaudit alttext``
(filter) and ``capaudit coverage`` gets bad inputs: a missing file, an empty file, malformed and
truncated JSONL, Latin-1 bytes, a missing field, zero / negative numeric options, an output path
that is a folder or lies under a file. Each case must exit non-zero with exactly one stderr line
starting ``capaudit `` that names the file (and line / field) or the option, print no traceback,
and create, change or remove nothing (:mod:`_battery`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _battery import Case, assert_fails_cleanly, jsonl, run_cases
from _detail_data import PANOPTIC_SEGMENTS, panoptic_png, rect, two_image_instances, write_panoptic

CAPTIONS = [{"id": f"c{i}", "image": "a.jpg", "caption": c} for i, c in enumerate(
    ["Two dogs and a person.", "A cat on a mat.", "A dog next to a cat.", "A person holding a dog."])]
GRAPH = {"objects": ["dog", "person"], "attributes": [{"object": 0, "value": "brown", "kind": "attribute",
                                                      "position": "pre"}],
         "relations": [{"subject": 1, "predicate": "holding", "object": 0}], "parser": "test"}
SCORES = [{"id": f"s{i}", "image": "a.jpg", "caption": "A person holding a brown dog.", "icr": 0.2 + i / 10,
           "aod": 1.0, "cd": 0.01 * i, "cd_unnormalized": 0.1 * i, "length": 6, "itm": 1.0,
           "scene_graph": GRAPH} for i in range(6)]
ALT = [{"TEXT": t, "URL": f"http://example.org/{i}.jpg"} for i, t in enumerate(
    ["A red bus on a street in the city.", "A dog on a beach.", "Vintage leather handbag"])]


def make_inputs(root: Path) -> None:
    i = root / "in"
    i.mkdir()
    (i / "inst.json").write_text(json.dumps(two_image_instances(rect(12, 6, 20, 10))))
    (i / "inst_bad.json").write_text('{"images": [\n')
    (i / "caps.jsonl").write_text(jsonl(CAPTIONS))
    (i / "empty.jsonl").write_text("")
    (i / "malformed.jsonl").write_text(jsonl(CAPTIONS[:1]) + '{"caption": oops}\n')
    (i / "truncated.jsonl").write_text(jsonl(CAPTIONS[:2]) + '{"id": "c9", "caption": "cut sho')
    (i / "latin1.jsonl").write_bytes(jsonl(CAPTIONS[:2]).encode() + b'{"id": "x", "caption": "caf\xe9"}\n')
    (i / "scores.jsonl").write_text(jsonl(SCORES))
    (i / "scores_noitm.jsonl").write_text(jsonl([{k: v for k, v in r.items() if k != "itm"} for r in SCORES]))
    (i / "scores_nocd_row.jsonl").write_text(jsonl(SCORES[:2] + [{k: v for k, v in SCORES[2].items() if k != "cd"}]
                                                    + SCORES[3:]))
    (i / "scores_nullitm.jsonl").write_text(jsonl([dict(r, itm=None) for r in SCORES]))
    (i / "scores_textitm.jsonl").write_text(jsonl(SCORES[:2] + [dict(SCORES[2], itm="high")] + SCORES[3:]))
    (i / "scores_badgraph.jsonl").write_text(jsonl(SCORES[:1] + [dict(SCORES[1], scene_graph={"objects": 3})]))
    (i / "scores_malformed.jsonl").write_text(jsonl(SCORES[:2]) + "{not json\n")
    (i / "scores_latin1.jsonl").write_bytes(jsonl(SCORES[:1]).encode() + b'{"id": "caf\xe9"}\n')
    (i / "alt.jsonl").write_text(jsonl(ALT))
    (i / "urls.tsv").write_text("a caption\thttp://example.org/0.jpg\n")
    (i / "alt_malformed.jsonl").write_text(jsonl(ALT) + '{"TEXT": "x",\n')
    (i / "alt_latin1.jsonl").write_bytes(jsonl(ALT).encode() + b'{"TEXT": "na\xefve"}\n')
    (i / "karpathy.json").write_text(json.dumps({"a.jpg": ["A dog.", "Two cats."], "b.jpg": ["A bus."]}))
    (i / "vocab.txt").write_text("dog\ncat\n")
    (i / "person_bad.yaml").write_text("rows:\n- {index: 1, split: tune, text: Ann Lee, persons: [[0, 99]]}\n")
    (i / "params_bad.yaml").write_bytes(b"run: x\ndetail: {grounding: coco_mini}\n# caf\xe9\n")
    (i / "params_relends.yaml").write_text("run: x\ndetail: {grounding: none, relation_ends: half}\n")
    write_panoptic(i, "pan_ok")
    write_panoptic(i, "pan_nopng", write_png=False)
    write_panoptic(i, "pan_badcat", extra_segments_info=[{"id": 9, "category_id": 999, "iscrowd": 0}])
    (i / "pan_nodir.json").write_text("{}")
    write_panoptic(i, "pan_unlisted")
    from PIL import Image

    Image.fromarray(panoptic_png({**PANOPTIC_SEGMENTS, 11: (1, 0, (0, 8, 2, 9))}), mode="RGB").save(
        i / "pan_unlisted" / "a.png")
    o = root / "out"
    o.mkdir()
    (o / "adir").mkdir()
    (o / "afile").write_text("x\n")


SCORE = ["detail", "score", "--caption-field", "caption", "--image-field", "image", "--id-field", "id",
         "--grounding", "coco:in/inst.json"]
SELECT = ["detail", "select", "--strategy", "itm_cd", "--k", "4", "--t", "2"]
SUBGRAPHS = ["detail", "subgraphs", "--grounding", "coco:in/inst.json"]
FILTER = ["alttext", "filter", "--text-field", "TEXT", "--pipeline", "cc12m", "--funnel", "out/f.csv"]
COVER = ["coverage", "--vocabulary", "in/vocab.txt", "--lemmatiser", "rules"]

CASES = [
    # detail score
    Case("score-missing-input", [*SCORE, "--input", "in/nope.jsonl", "--out", "out/s.jsonl"], ["in/nope.jsonl"]),
    Case("score-empty-input", [*SCORE, "--input", "in/empty.jsonl", "--out", "out/s.jsonl"],
         ["in/empty.jsonl", "empty"]),
    Case("score-malformed-jsonl", [*SCORE, "--input", "in/malformed.jsonl", "--out", "out/s.jsonl"],
         ["in/malformed.jsonl", "line 2"]),
    Case("score-truncated-jsonl", [*SCORE, "--input", "in/truncated.jsonl", "--out", "out/s.jsonl"],
         ["in/truncated.jsonl", "line 3"]),
    Case("score-latin1", [*SCORE, "--input", "in/latin1.jsonl", "--out", "out/s.jsonl"],
         ["in/latin1.jsonl", "3", "UTF-8"]),
    Case("score-missing-field", [*SCORE, "--input", "in/caps.jsonl", "--caption-field", "captoin",
                                 "--out", "out/s.jsonl"], ["in/caps.jsonl", "'captoin'"]),
    Case("score-grounding-missing", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                     "coco:in/nope.json", "--out", "out/s.jsonl"], ["in/nope.json"]),
    Case("score-grounding-malformed", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                       "coco:in/inst_bad.json", "--out", "out/s.jsonl"], ["in/inst_bad.json"]),
    Case("score-relation-ends-unknown", [*SCORE, "--input", "in/caps.jsonl", "--relation-ends", "half",
                                         "--out", "out/s.jsonl"], ["--relation-ends", "half"]),
    Case("score-coco-stuff-refused", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                      "coco-stuff:in/inst.json", "--out", "out/s.jsonl"],
         ["--grounding", "coco-stuff", "not supported"]),
    Case("score-panoptic-missing-json", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                         "coco-panoptic:in/nope.json", "--out", "out/s.jsonl"], ["in/nope.json"]),
    Case("score-panoptic-missing-png-folder", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                               "coco-panoptic:in/pan_nodir.json", "--out", "out/s.jsonl"],
         ["in/pan_nodir", "PNG folder"]),
    Case("score-panoptic-missing-png", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                        "coco-panoptic:in/pan_nopng.json", "--out", "out/s.jsonl"],
         ["in/pan_nopng/a.png", "not found"]),
    Case("score-panoptic-unknown-category", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                             "coco-panoptic:in/pan_badcat.json", "--out", "out/s.jsonl"],
         ["in/pan_badcat.json", "category_id", "999"]),
    Case("score-panoptic-unlisted-segment", ["detail", "score", "--input", "in/caps.jsonl", "--grounding",
                                             "coco-panoptic:in/pan_unlisted.json", "--out", "out/s.jsonl"],
         ["in/pan_unlisted/a.png", "segment id 11"]),
    Case("score-unknown-itm", [*SCORE, "--input", "in/caps.jsonl", "--itm", "bogus", "--out", "out/s.jsonl"],
         ["--itm", "bogus"]),
    Case("score-workers-zero", [*SCORE, "--input", "in/caps.jsonl", "--workers", "0", "--out", "out/s.jsonl"],
         ["--workers", "0"]),
    Case("score-concurrency-negative", [*SCORE, "--input", "in/caps.jsonl", "--concurrency", "-2",
                                        "--out", "out/s.jsonl"], ["--concurrency", "-2"]),
    Case("score-sharded-malformed", [*SCORE, "--input", "in/malformed.jsonl", "--workers", "2",
                                     "--out", "out/s.jsonl"], ["in/malformed.jsonl", "line 2"]),
    Case("score-out-is-directory", [*SCORE, "--input", "in/caps.jsonl", "--out", "out/adir"], ["out/adir"]),
    Case("score-out-under-a-file", [*SCORE, "--input", "in/caps.jsonl", "--out", "out/afile/s.jsonl"],
         ["out/afile"]),
    # detail select
    Case("select-missing-scores", [*SELECT, "--scores", "in/nope.jsonl", "--out", "out/sub.jsonl"],
         ["in/nope.jsonl", "not found"]),
    Case("select-empty-scores", [*SELECT, "--scores", "in/empty.jsonl", "--out", "out/sub.jsonl"],
         ["in/empty.jsonl"]),
    Case("select-malformed-scores", [*SELECT, "--scores", "in/scores_malformed.jsonl", "--out", "out/sub.jsonl"],
         ["in/scores_malformed.jsonl", "line 3"]),
    Case("select-latin1-scores", [*SELECT, "--scores", "in/scores_latin1.jsonl", "--out", "out/sub.jsonl"],
         ["in/scores_latin1.jsonl", "UTF-8"]),
    Case("select-no-itm-field", [*SELECT, "--scores", "in/scores_noitm.jsonl", "--out", "out/sub.jsonl"],
         ["in/scores_noitm.jsonl", "'itm'", "--itm"]),
    Case("select-itm-all-null", [*SELECT, "--scores", "in/scores_nullitm.jsonl", "--out", "out/sub.jsonl"],
         ["in/scores_nullitm.jsonl", "'itm'", "null"]),
    Case("select-row-without-cd", [*SELECT, "--scores", "in/scores_nocd_row.jsonl", "--out", "out/sub.jsonl"],
         ["in/scores_nocd_row.jsonl", "row 3", "'cd'", "missing"]),
    Case("select-itm-not-a-number", [*SELECT, "--scores", "in/scores_textitm.jsonl", "--out", "out/sub.jsonl"],
         ["in/scores_textitm.jsonl", "row 3", "'itm'"]),
    Case("select-k-zero", ["detail", "select", "--scores", "in/scores.jsonl", "--k", "0", "--t", "1",
                           "--out", "out/sub.jsonl"], ["--k", "'0'"]),
    Case("select-t-negative", ["detail", "select", "--scores", "in/scores.jsonl", "--k", "4", "--t", "-1",
                               "--out", "out/sub.jsonl"], ["--t", "'-1'"]),
    Case("select-t-above-k", ["detail", "select", "--scores", "in/scores.jsonl", "--k", "2", "--t", "4",
                              "--out", "out/sub.jsonl"], ["'t'", "must not exceed K"]),
    Case("select-seed-negative", [*SELECT, "--scores", "in/scores.jsonl", "--seed", "-1", "--out", "out/sub.jsonl"],
         ["--seed"]),
    Case("select-out-under-a-file", [*SELECT, "--scores", "in/scores.jsonl", "--out", "out/afile/sub.jsonl"],
         ["out/afile"]),
    # detail subgraphs
    Case("subgraphs-missing-scores", [*SUBGRAPHS, "--scores", "in/nope.jsonl", "--out", "out/g.jsonl"],
         ["in/nope.jsonl", "not found"]),
    Case("subgraphs-truncated-scores", [*SUBGRAPHS, "--scores", "in/truncated.jsonl", "--out", "out/g.jsonl"],
         ["in/truncated.jsonl", "line 3"]),
    Case("subgraphs-bad-graph", [*SUBGRAPHS, "--scores", "in/scores_badgraph.jsonl", "--out", "out/g.jsonl"],
         ["in/scores_badgraph.jsonl", "row 2"]),
    Case("subgraphs-icr-without-grounding", ["detail", "subgraphs", "--scores", "in/scores.jsonl", "--out",
                                             "out/g.jsonl"], ["--grounding"]),
    Case("subgraphs-fraction-out-of-range", [*SUBGRAPHS, "--scores", "in/scores.jsonl", "--fractions", "0.5,1.5",
                                             "--out", "out/g.jsonl"], ["--fractions", "1.5"]),
    Case("subgraphs-tolerance-negative", [*SUBGRAPHS, "--scores", "in/scores.jsonl", "--tolerance", "-0.1",
                                          "--out", "out/g.jsonl"], ["--tolerance"]),
    Case("subgraphs-relation-ends-unknown", [*SUBGRAPHS, "--scores", "in/scores.jsonl", "--relation-ends", "both2",
                                             "--out", "out/g.jsonl"], ["--relation-ends", "both2"]),
    Case("subgraphs-panoptic-missing-png", ["detail", "subgraphs", "--grounding", "coco-panoptic:in/pan_nopng.json",
                                            "--scores", "in/scores.jsonl", "--out", "out/g.jsonl"],
         ["in/pan_nopng/a.png"]),
    Case("subgraphs-out-is-directory", [*SUBGRAPHS, "--scores", "in/scores.jsonl", "--out", "out/adir"],
         ["out/adir"]),
    # detail run
    Case("run-missing-params", ["detail", "run", "--params", "in/nope.yaml"], ["in/nope.yaml", "not found"]),
    Case("run-relation-ends-unknown", ["detail", "run", "--params", "in/params_relends.yaml"],
         ["in/params_relends.yaml", "detail.relation_ends", "half"]),
    Case("run-params-not-utf8", ["detail", "run", "--params", "in/params_bad.yaml"], ["in/params_bad.yaml", "UTF-8"]),
    # alttext filter
    Case("filter-missing-input", [*FILTER, "--input", "in/nope.jsonl", "--out", "out/k.jsonl"], ["in/nope.jsonl"]),
    Case("filter-empty-input", [*FILTER, "--input", "in/empty.jsonl", "--out", "out/k.jsonl"], ["in/empty.jsonl"]),
    Case("filter-malformed-jsonl", [*FILTER, "--input", "in/alt_malformed.jsonl", "--out", "out/k.jsonl"],
         ["in/alt_malformed.jsonl", "line 4"]),
    Case("filter-latin1", [*FILTER, "--input", "in/alt_latin1.jsonl", "--out", "out/k.jsonl"],
         ["in/alt_latin1.jsonl", "UTF-8"]),
    Case("filter-missing-field", ["alttext", "filter", "--input", "in/alt.jsonl", "--text-field", "TXT",
                                  "--pipeline", "cc12m", "--funnel", "out/f.csv", "--out", "out/k.jsonl"],
         ["in/alt.jsonl", "'TXT'"]),
    Case("filter-max-rows-zero", [*FILTER, "--input", "in/alt.jsonl", "--max-rows", "0", "--out", "out/k.jsonl"],
         ["--max-rows", "0"]),
    Case("filter-max-rows-negative", [*FILTER, "--input", "in/alt.jsonl", "--max-rows", "-1",
                                      "--out", "out/k.jsonl"], ["--max-rows", "-1"]),
    Case("filter-batch-size-zero", [*FILTER, "--input", "in/alt.jsonl", "--batch-size", "0", "--out", "out/k.jsonl"],
         ["--batch-size", "0"]),
    Case("filter-unknown-pipeline", ["alttext", "filter", "--input", "in/alt.jsonl", "--text-field", "TEXT",
                                     "--pipeline", "cc99m", "--funnel", "out/f.csv", "--out", "out/k.jsonl"],
         ["cc99m"]),
    Case("filter-sharded-latin1", [*FILTER, "--input", "in/alt_latin1.jsonl", "--workers", "2", "--shards", "3",
                                   "--out", "out/k.jsonl"], ["in/alt_latin1.jsonl", "UTF-8"]),
    Case("filter-out-is-directory", [*FILTER, "--input", "in/alt.jsonl", "--out", "out/adir"], ["out/adir"]),
    Case("filter-funnel-under-a-file", ["alttext", "filter", "--input", "in/alt.jsonl", "--text-field", "TEXT",
                                        "--pipeline", "cc12m", "--funnel", "out/afile/f.csv", "--out", "out/k.jsonl"],
         ["out/afile"]),
    Case("filter-bad-name-filter", [*FILTER, "--input", "in/alt.jsonl", "--set", "person_substitution.name_filter=x",
                                    "--out", "out/k.jsonl"], ["person_substitution", "name_filter 'x'"]),
    Case("filter-dedup-missing-file", [*FILTER, "--input", "in/alt.jsonl", "--dedup-against", "in/nope.tsv",
                                       "--out", "out/k.jsonl"], ["in/nope.tsv", "--dedup-against"]),
    Case("filter-dedup-no-url-field", [*FILTER, "--input", "in/alt.jsonl", "--dedup-against", "in/urls.tsv",
                                       "--dedup-columns", "caption,link", "--out", "out/k.jsonl"],
         ["in/urls.tsv", "line 1", "'url'"]),
    Case("filter-dedup-empty-list", [*FILTER, "--input", "in/alt.jsonl", "--dedup-against", "in/empty.jsonl",
                                     "--out", "out/k.jsonl"], ["in/empty.jsonl"]),
    Case("filter-dedup-columns-alone", [*FILTER, "--input", "in/alt.jsonl", "--dedup-columns", "caption,url",
                                        "--out", "out/k.jsonl"], ["--dedup-columns", "--dedup-against"]),
    Case("filter-dedup-bad-label", [*FILTER, "--input", "in/alt.jsonl", "--dedup-against", "in/urls.tsv",
                                    "--dedup-columns", "caption,url", "--dedup-label", "a b", "--out", "out/k.jsonl"],
         ["--dedup-label", "'a b'"]),
    # alttext person-eval
    Case("person-eval-missing-labels", ["alttext", "person-eval", "--labels", "in/nope.yaml"], ["in/nope.yaml"]),
    Case("person-eval-bad-span", ["alttext", "person-eval", "--labels", "in/person_bad.yaml"],
         ["in/person_bad.yaml:1", "'persons'"]),
    Case("person-eval-bad-match", ["alttext", "person-eval", "--match", "fuzzy"], ["--match", "fuzzy"]),
    Case("person-eval-bad-name-filter", ["alttext", "person-eval", "--name-filter", "x"], ["--name-filter"]),
    Case("person-eval-out-under-a-file", ["alttext", "person-eval", "--out", "out/afile/p.json"], ["out/afile"]),
    # coverage
    Case("coverage-missing-input", [*COVER, "--input", "in/nope.jsonl", "--text-field", "caption",
                                    "--out", "out/c.json"], ["in/nope.jsonl"]),
    Case("coverage-empty-input", [*COVER, "--input", "in/empty.jsonl", "--text-field", "caption",
                                  "--out", "out/c.json"], ["in/empty.jsonl"]),
    Case("coverage-truncated-jsonl", [*COVER, "--input", "in/truncated.jsonl", "--text-field", "caption",
                                      "--out", "out/c.json"], ["in/truncated.jsonl", "line 3"]),
    Case("coverage-latin1", [*COVER, "--input", "in/latin1.jsonl", "--text-field", "caption", "--out", "out/c.json"],
         ["in/latin1.jsonl", "UTF-8"]),
    Case("coverage-missing-field", [*COVER, "--input", "in/caps.jsonl", "--text-field", "text",
                                    "--out", "out/c.json"], ["in/caps.jsonl", "'text'"]),
    Case("coverage-karpathy-with-field", [*COVER, "--input", "in/karpathy.json", "--text-field", "caption",
                                          "--out", "out/c.json"], ["in/karpathy.json", "Karpathy"]),
    Case("coverage-sharded-truncated", [*COVER, "--input", "in/truncated.jsonl", "--text-field", "caption",
                                        "--workers", "2", "--out", "out/c.json"], ["in/truncated.jsonl", "line 3"]),
    Case("coverage-max-rows-zero", [*COVER, "--input", "in/caps.jsonl", "--text-field", "caption",
                                    "--max-rows", "0", "--out", "out/c.json"], ["--max-rows", "0"]),
    Case("coverage-unknown-vocabulary", ["coverage", "--input", "in/caps.jsonl", "--text-field", "caption",
                                         "--vocabulary", "in/nope.txt", "--out", "out/c.json"], ["nope"]),
    Case("coverage-out-is-directory", [*COVER, "--input", "in/caps.jsonl", "--text-field", "caption",
                                       "--out", "out/adir"], ["out/adir"]),
]


@pytest.fixture(scope="module")
def battery(tmp_path_factory):
    return run_cases(CASES, tmp_path_factory.mktemp("battery_detail"), make_inputs)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fails_loudly_and_cleanly(case: Case, battery):
    assert_fails_cleanly(case, battery[case.id])


def test_every_subcommand_has_cases():
    """Each subcommand of detail / alttext and coverage is exercised by the battery."""
    from capaudit.cli import build_parser

    parser = build_parser(["capaudit.detail.cli", "capaudit.alttext.cli"])
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    commands = []
    for name, p in sub.choices.items():
        inner = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"]
        commands += [(name, s) for s in inner[0].choices] if inner else [(name, None)]
    covered = {(c.args[0], c.args[1] if c.args[0] != "coverage" else None) for c in CASES}
    assert set(commands) == covered, set(commands) ^ covered
