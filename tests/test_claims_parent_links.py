"""Parent links on our own claims (issue 20): the extractor's schema gains optional ``parents``, the
judge requests carry them, and ``judges cells --dependency on`` scores as DSG does."""

from __future__ import annotations

import json
from pathlib import Path

from capaudit.standins.claims_extractor import ExtractorBackend, link_parents
from capaudit.claims.prompts import PARENTS_PROMPT_VERSION, PARENTS_RULE, PROMPT_VERSION
from capaudit.claims.requests import BuildParams, build_requests, claims_schema
from capaudit.cli import main
from capaudit.judges.questions import questions_from_units, question_parents
from capaudit.judges.requests import JudgeBuildParams, build_judge_requests
from capaudit.llm.dialects import build_payload
from capaudit.llm.requests import write_requests


def test_schema_and_prompt_gain_parents_only_when_asked():
    plain = claims_schema()
    linked = claims_schema(parent_links=True)
    items = linked["properties"]["claimed_units"]["items"]
    assert "parents" not in plain["properties"]["claimed_units"]["items"]["properties"]
    assert items["properties"]["parents"] == {"type": "array", "items": {"type": "integer", "minimum": 0}}
    assert "parents" not in items["required"]  # optional
    rows, _ = build_requests([(0, "Two dogs on a red sofa.", "c1", None)], BuildParams(surface="s", model="m", prompts="capaudit"))
    rows_p, _ = build_requests([(0, "Two dogs on a red sofa.", "c1", None)],
                               BuildParams(surface="s", model="m", parent_links=True, prompts="capaudit"))
    assert rows[0]["prompt_version"] == PROMPT_VERSION and rows_p[0]["prompt_version"] == PARENTS_PROMPT_VERSION
    assert PARENTS_RULE not in rows[0]["messages"][1]["content"] and PARENTS_RULE in rows_p[0]["messages"][1]["content"]
    assert rows[0]["request_id"] != rows_p[0]["request_id"]


def test_offline_extractor_links_when_the_schema_asks():
    rows, _ = build_requests([(0, "A red cup on a wooden table.", "c1", None)],
                             BuildParams(surface="s", model="m", parent_links=True, prompts="capaudit"))
    payload = build_payload(rows[0], "m")
    ans = json.loads(ExtractorBackend()(rows[0]["messages"], payload))
    units = ans["claimed_units"]
    by_unit = {u["unit"]: u for u in units}
    cup, table = [i for i, u in enumerate(units) if u["category"] == "object"][:2]
    assert by_unit["red cup"]["parents"] == [cup]
    assert by_unit["cup on table"]["parents"] == [cup, table]
    plain, _ = build_requests([(0, "A red cup on a wooden table.", "c1", None)], BuildParams(surface="s", model="m", prompts="capaudit"))
    assert all("parents" not in u for u in json.loads(ExtractorBackend()(plain[0]["messages"],
                                                                         build_payload(plain[0], "m")))["claimed_units"])


def test_question_parents_keep_links_to_object_questions_only():
    units = [{"category": "object", "unit": "dog", "span": "dog", "target": "dog", "parents": []},
             {"category": "attribute", "unit": "brown dog", "span": "brown", "target": "dog", "parents": [0]},
             {"category": "count", "unit": "two dogs", "span": "two", "target": "dog", "parents": [1, 7, 0, True]},
             {"category": "relation", "unit": "dog on dog", "span": "x", "target": "dog", "parents": [2]}]
    qs = questions_from_units("c", units)
    parents, dropped = question_parents(units, qs)
    assert parents == [[], [0], [0], []]
    assert dropped == 4  # 1 (an attribute), 7 (no such unit), True (not an index), 2 (a count)
    assert question_parents([{k: v for k, v in u.items() if k != "parents"} for u in units], qs) == (None, 0)


def _png(path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (24, 16), (200, 30, 30)).save(path)


def test_cells_dependency_on_zeroes_children_of_a_no(tmp_path: Path, capsys):
    _png(tmp_path / "a.png")
    caps = [{"cid": "c1", "caption": "A red cup on a table.", "image": "a.png"}]
    (tmp_path / "captions.jsonl").write_text(json.dumps(caps[0]) + "\n")
    rows, _ = build_requests([(0, caps[0]["caption"], "c1", None)],
                             BuildParams(surface="s", model="m", parent_links=True, prompts="capaudit"))
    write_requests(tmp_path / "cq.jsonl", rows)
    units = link_parents([{"category": "object", "unit": "cup", "span": "cup", "target": "cup"},
                          {"category": "object", "unit": "table", "span": "table", "target": "table"},
                          {"category": "attribute", "unit": "red cup", "span": "red cup", "target": "cup"},
                          {"category": "relation", "unit": "cup on table", "span": "cup on a table", "target": "cup"}])
    (tmp_path / "cr.jsonl").write_text(json.dumps({"request_id": rows[0]["request_id"], "ok": True,
                                                   "started_at": "2026-01-01T00:00:00Z",
                                                   "parsed": {"caption_id": "c1", "claimed_units": units}}) + "\n")
    args = ["judges", "cells", "--slice", "x", "--reps", "10"]
    for judge, answers in (("A", "nyyy"), ("B", "yyyu")):
        req = tmp_path / f"req_{judge}.jsonl"
        counts = build_judge_requests([tmp_path / "cr.jsonl"], [tmp_path / "cq.jsonl"], tmp_path / "captions.jsonl",
                                      "cid", "image", JudgeBuildParams(model=judge), req)
        assert counts.requests_with_parents == 1 and counts.parent_links_dropped == 0
        r = json.loads(req.read_text())
        assert r["meta"]["parents"] == [[], [], [0], [0, 1]]
        res = [{"question_id": q["question_id"], "answer": {"y": "yes", "n": "no", "u": "uncertain"}[a], "confidence": 1}
               for q, a in zip(r["input"]["questions"], answers)]
        (tmp_path / f"resp_{judge}.jsonl").write_text(json.dumps(
            {"request_id": r["request_id"], "ok": True, "started_at": "2026-01-01T00:00:00Z",
             "parsed": {"caption_id": "c1", "question_results": res}}) + "\n")
        args += ["--judge", f"{judge}={tmp_path / f'resp_{judge}.jsonl'}", "--requests", str(req)]
    for dep in ("off", "on"):
        assert main(args + ["--dependency", dep, "--out", str(tmp_path / f"{dep}.json")]) == 0
    cell = lambda dep, j: next(c for c in json.loads((tmp_path / f"{dep}.json").read_text())["cells"]  # noqa: E731
                               if c["judge"] == j)
    # judge A said the cup is absent: with dependency on, "red cup" and "cup on table" are no
    assert cell("off", "A")["all_types"]["yes"] == 3 and cell("on", "A")["all_types"]["yes"] == 1
    assert cell("on", "A")["all_types"]["no"] == 3
    # judge B: every parent is yes -> nothing changes
    assert cell("on", "B")["all_types"] == cell("off", "B")["all_types"]


def test_relation_parents_match_plural_mentions():
    """Units are in the caption's words (issue 21): an object first named ``dog`` is the parent of
    ``dogs on grass``; whole words only (``cat`` is not in ``catwalk``)."""
    units = link_parents([{"category": "object", "unit": "dog", "span": "dog", "target": "dog"},
                          {"category": "object", "unit": "grass", "span": "grass", "target": "grass"},
                          {"category": "object", "unit": "cat", "span": "cat", "target": "cat"},
                          {"category": "relation", "unit": "dogs on grass", "span": "dogs on the grass",
                           "target": "dog"},
                          {"category": "relation", "unit": "dog on catwalk", "span": "dog on a catwalk",
                           "target": "dog"}])
    assert [u["parents"] for u in units] == [[], [], [], [0, 1], [0]]
