"""Claimed summarizer (reference-spec §4.4): hand-checked counts, distributions and merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capaudit.claims.summarize import (
    caption_counter,
    distribution,
    nearest_rank,
    normalize_unit,
    summarize_responses,
    summarize_to_file,
    trimmed_mean,
    unit_records,
)
from capaudit.summaries.claimed import read_claimed_summary, surface_field_order


def _req(rid, surface, caption):
    return {"request_id": rid, "task": "claimed_cbu", "task_version": 2, "prompt_version": "t", "schema": {},
            "messages": [{"role": "user", "content": "x"}], "decoding": {"max_tokens": 1},
            "input": {"surface": surface, "caption": caption, "caption_id": rid}}


def _ok(rid, units, started="2026-01-01T00:00:00Z"):
    return {"request_id": rid, "ok": True, "started_at": started, "parsed": {"caption_id": rid, "claimed_units": units}}


def _u(cat, unit, target="", span=""):
    return {"category": cat, "unit": unit, "span": span, "target": target}


UNITS_A = [
    _u("object", "Dog", "dog"),
    _u("object", "the dog", "dog"),           # duplicate after normalization
    _u("attribute", "red dog", "dog"),
    _u("count", "a", "dog"),                  # normalizes to "": raw only
    _u("text_rendering", "no visible text"),  # suspicious
    _u("relation", "dog on mat", "dog"),
    _u("bogus", "x"),                         # not a unit record
    _u("object", "   "),                      # not a unit record
]


@pytest.fixture()
def files(tmp_path: Path):
    reqs = [_req("A", "s1", "A red dog on the mat"), _req("B", "s1", "Nothing here"),
            _req("C", "s2", "failed one"), _req("D", "s2", "two cats")]
    rq = tmp_path / "requests.jsonl"
    rq.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    resp1 = [_ok("A", UNITS_A), _ok("B", []), {"request_id": "C", "ok": False, "error": "x"},
             _ok("D", [_u("count", "two cats", "cat"), _u("object", "cats", "cat")])]
    resp2 = [{"request_id": "A", "ok": False, "started_at": "2026-02-01T00:00:00Z", "error": "later failure"}]
    p1, p2 = tmp_path / "responses.jsonl", tmp_path / "more.jsonl"
    p1.write_text("".join(json.dumps(r) + "\n" for r in resp1))
    p2.write_text("".join(json.dumps(r) + "\n" for r in resp2))
    return rq, p1, p2


def test_normalize_unit():
    assert normalize_unit("The  A an Red-Dog's bowl") == "red dog's bowl"
    assert normalize_unit("a") == ""
    assert normalize_unit("THE the") == ""
    assert normalize_unit("Close-up") == "close up"


def test_caption_counter_hand_checked():
    c = caption_counter(unit_records({"claimed_units": UNITS_A}), "A red dog on the mat")
    assert c["claimed_total"] == 6
    assert (c["claimed_object"], c["claimed_attribute"], c["claimed_count"], c["claimed_text_rendering"],
            c["claimed_relation"]) == (2, 1, 1, 1, 1)
    assert c["claimed_dedup_total"] == 3
    assert (c["claimed_dedup_object"], c["claimed_dedup_attribute"], c["claimed_dedup_relation"],
            c["claimed_dedup_count"], c["claimed_dedup_text_rendering"]) == (1, 1, 1, 0, 0)
    assert c["duplicate_units"] == 1 and c["suspicious_units"] == 1
    assert c["rows_with_duplicate"] == 1 and c["rows_with_suspicious"] == 1
    assert c["caption_tokens"] == 6
    # the empty-normalized count unit is the one raw unit that is neither dedup, dup nor suspicious
    assert c["claimed_total"] - c["claimed_dedup_total"] - c["duplicate_units"] - c["suspicious_units"] == 1


def test_legacy_dict_form():
    recs = unit_records({"claimed_units": {"object": ["dog", {"unit": "cat", "target": "cat"}], "style": [""]}})
    assert [(r.category, r.unit, r.target) for r in recs] == [("object", "dog", ""), ("object", "cat", "cat")]


def test_distribution_rules():
    assert nearest_rank([0, 2, 3], 0.25) == 0.0  # round(0.5) == 0 (banker's)
    assert nearest_rank([0, 2, 3], 0.75) == 3.0  # round(1.5) == 2
    assert trimmed_mean(list(range(1, 11))) == 5.5  # drops 1 and 10
    assert trimmed_mean([1, 2, 3, 100]) == 26.5  # floor(0.4) = 0 dropped
    d = distribution([4, 1, 3, 2])
    assert (d.median, d.p25, d.p75) == (2.5, 2.0, 3.0)  # indices round(0.75)=1, round(2.25)=2


def test_summary_hand_checked(files):
    rq, p1, p2 = files
    s = summarize_responses([p1, p2], [rq])
    assert s.status.to_dict() == {"responses": 4, "captions": 3, "bad": 1}  # A answered beats its later failure
    s1 = s.surface("s1")
    assert (s1.captions, s1.claimed_total, s1.claimed_dedup_total, s1.caption_tokens) == (2, 6, 3, 8)
    assert s1.cbu_per_cap == 1.5 and s1.cbu_per_100_lex == 37.5
    d = s1.distributions
    assert (d["claimed_dedup"].median, d["claimed_dedup"].p25, d["claimed_dedup"].p75) == (1.5, 0.0, 3.0)
    assert d["claimed_dedup_per_100_tokens"].median == 25.0  # per caption 50 and 0
    assert d["claimed"].trimmed_mean == 3.0
    allb = s.surface("__all__")
    assert (allb.captions, allb.claimed_dedup_total, allb.caption_tokens) == (3, 5, 10)
    assert allb.cbu_per_cap == pytest.approx(5 / 3) and allb.cbu_per_100_lex == 50.0
    dd = allb.distributions["claimed_dedup"]
    assert (dd.median, dd.p25, dd.p75) == (2.0, 0.0, 3.0)
    assert allb.per_type_dedup_per_caption["count"] == pytest.approx(1 / 3)
    # merge order does not matter
    assert summarize_responses([p2, p1], [rq]).to_dict()["surfaces"] == s.to_dict()["surfaces"]


def test_default_requests_beside_responses_and_roundtrip(files, tmp_path):
    rq, p1, _ = files
    out = tmp_path / "summary.json"
    s = summarize_to_file([p1], out)  # finds requests.jsonl beside responses.jsonl
    back = read_claimed_summary(out)
    assert back.to_dict()["surfaces"] == s.to_dict()["surfaces"]
    assert json.loads(out.read_text())["input"]["requests"] == [str(rq)]


def test_embedded_request_rows(tmp_path):
    p = tmp_path / "log.jsonl"
    row = _ok("z", [_u("object", "tree")])
    row["request"] = {"surface": "ref", "caption": "a tree"}
    p.write_text(json.dumps(row) + "\n")
    s = summarize_responses([p])
    assert s.surface("ref").claimed_dedup_total == 1 and s.surface("ref").caption_tokens == 2


def test_missing_request_is_a_clear_error(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps(_ok("nope", [])) + "\n")
    with pytest.raises(ValueError, match="response nope"):
        summarize_responses([p])


def test_key_sets_equal_reference_files(files, reference_dir):
    rq, p1, _ = files
    ours = summarize_responses([p1], [rq]).to_dict()
    refs = sorted((reference_dir / "results").rglob("*claimed_cbu_summary.json"))
    assert len(refs) >= 5
    for ref in refs:
        d = json.loads(ref.read_text())
        for block in d["surfaces"].values():
            assert set(block) == set(ours["surfaces"]["s1"]) == set(surface_field_order())
            assert list(block) == list(ours["surfaces"]["s1"])  # same order too
        assert set(d["status"]) <= set(ours["status"])
        assert set(d) <= set(ours)
