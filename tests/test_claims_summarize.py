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


# --- caption-level bootstrap intervals --------------------------------------------------------

import random  # noqa: E402

import numpy as np  # noqa: E402

from capaudit.claims.summarize import (  # noqa: E402
    ClaimIntervals,
    caption_intervals,
    intervals_path,
    read_claim_intervals,
    summarize_to_files,
    summarize_with_intervals,
    surface_intervals,
)
from capaudit.stats.bootstrap_caption import index_chunks, percentile_bootstrap, replicate_sums  # noqa: E402
from capaudit.summaries.categories import UNIT_CATEGORIES  # noqa: E402


@pytest.fixture(scope="module")
def coco_sample(data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """Real COCO val captions (two surfaces of 37 and 23) with claims taken from their words
    (categories cycled, some repeated and article-led units so dedup matters, some captions with no
    claim), answered in a shuffled (completion-like) order; plus one caption with no lexical unit."""
    p = data_dir / "coco_karpathy_captions" / "val_captions.json"
    if not p.is_file():
        pytest.skip(f"{p} not found")
    caps = [c for cs in json.loads(p.read_text(encoding="utf-8")).values() for c in cs][:59] + ["..."]
    rng = random.Random(7)
    cats = list(UNIT_CATEGORIES)
    reqs, resps = [], []
    for i, cap in enumerate(caps):
        rid = f"r{(i * 7919) % 1000:03d}"
        surface = "s_big" if i < 37 else "s_small"
        reqs.append(_req(rid, surface, cap))
        words = [w.strip(".,").lower() for w in cap.split()]
        units = []
        for j, w in enumerate(words[: rng.randrange(0, 10)]):
            units.append(_u(cats[(i + j) % len(cats)], ("the " if j % 3 == 0 else "") + w, words[0]))
            if j % 4 == 1:
                units.append(_u(cats[(i + j) % len(cats)], w, words[0]))  # a duplicate
        resps.append(_ok(rid, units))
    rng.shuffle(resps)
    d = tmp_path_factory.mktemp("coco_boot")
    rq, rs = d / "requests.jsonl", d / "responses.jsonl"
    rq.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    rs.write_text("".join(json.dumps(r) + "\n" for r in resps))
    return rq, rs


def _loop_bootstrap(values, lex, reps, seed):
    """Independent plain-Python percentile bootstrap: one generator, one ``integers(0, n, size=n)``
    draw per replicate; mean of each per-caption column and 100·Σdedup/Σlex (the point's own ratio)."""
    n = len(lex)
    rng = np.random.default_rng(seed)
    means = {k: [] for k in values}
    ratio = []
    for _ in range(reps):
        idx = [int(i) for i in rng.integers(0, n, size=n)]
        for k, col in values.items():
            means[k].append(sum(col[i] for i in idx) / n)
        ratio.append(100.0 * sum(values["dedup"][i] for i in idx) / sum(lex[i] for i in idx))

    def iv(xs):
        return {"lower": float(np.quantile(xs, 0.025)), "upper": float(np.quantile(xs, 0.975))}

    return {k: iv(v) for k, v in means.items()}, iv(ratio)


def test_intervals_equal_an_independent_loop_bootstrap(coco_sample):
    rq, rs = coco_sample
    summary, ivs = summarize_with_intervals([rs], [rq])
    assert ivs.reps == 2000 and ivs.seed == 0 and set(ivs.surfaces) == {"s_big", "s_small"}
    reqs = {json.loads(x)["request_id"]: json.loads(x)["input"] for x in rq.read_text().splitlines()}
    resps = sorted((json.loads(x) for x in rs.read_text().splitlines()), key=lambda r: r["request_id"])
    for name, block in ivs.surfaces.items():
        counters = [caption_counter(unit_records(r["parsed"]), reqs[r["request_id"]]["caption"])
                    for r in resps if reqs[r["request_id"]]["surface"] == name]
        values = {"dedup": [c["claimed_dedup_total"] for c in counters],
                  **{t: [c[f"claimed_dedup_{t}"] for c in counters] for t in UNIT_CATEGORIES}}
        lex = [c["caption_tokens"] for c in counters]
        means, ratio = _loop_bootstrap(values, lex, 2000, 0)
        assert block["captions"] == len(lex) == summary.surface(name).captions
        assert block["cbu_per_cap"] == means["dedup"]  # exact: the same stream, the same arithmetic
        assert block["cbu_per_100_lex"] == ratio
        assert block["per_type_per_cap"] == {t: means[t] for t in UNIT_CATEGORIES}
        s = summary.surface(name)
        assert block["cbu_per_cap"]["lower"] <= s.cbu_per_cap <= block["cbu_per_cap"]["upper"]
        assert block["cbu_per_cap"]["lower"] < block["cbu_per_cap"]["upper"]
    assert ivs.surfaces["s_small"]["zero_lex_captions"] == 1  # "..." adds nothing to the ratio's denominator


def test_intervals_leave_the_summary_unchanged_and_ignore_answer_order(coco_sample, tmp_path):
    rq, rs = coco_sample
    summary, ivs = summarize_with_intervals([rs], [rq])
    assert summary.to_dict() == summarize_responses([rs], [rq]).to_dict()
    lines = rs.read_text().splitlines()
    random.Random(1).shuffle(lines)
    other = tmp_path / "responses.jsonl"
    other.write_text("\n".join(lines) + "\n")
    assert summarize_with_intervals([other], [rq])[1].surfaces == ivs.surfaces  # request-id order, not file order


def test_reps_and_seed_are_recorded_and_used(coco_sample, tmp_path):
    rq, rs = coco_sample
    out = tmp_path / "claimed_cbu_summary.json"
    summary, ivs, ipath = summarize_to_files([rs], out, [rq], bootstrap_reps=500, bootstrap_seed=3)
    assert ipath == intervals_path(out) == tmp_path / "claimed_cbu_summary.intervals.json"
    assert read_claimed_summary(out).to_dict() == summary.to_dict()  # the summary file is as before
    d = json.loads(ipath.read_text())
    b = d["bootstrap"]
    assert (d["kind"], b["method"], b["level"], b["quantiles"], b["reps"], b["seed"]) == (
        "claimed_cbu_intervals", "percentile", 0.95, [0.025, 0.975], 500, 3)
    assert "ratio of sums" in b["cbu_per_100_lex"] and b["caption_order"] == "request id"
    back = read_claim_intervals(ipath)
    assert (back.reps, back.seed, back.surfaces) == (500, 3, ivs.surfaces)
    again = summarize_with_intervals([rs], [rq], bootstrap_reps=500, bootstrap_seed=3)[1]
    assert again.surfaces == ivs.surfaces  # reproducible
    seed0 = summarize_with_intervals([rs], [rq], bootstrap_reps=500, bootstrap_seed=0)[1]
    assert seed0.surfaces["s_big"]["cbu_per_cap"] != ivs.surfaces["s_big"]["cbu_per_cap"]


def test_zero_reps_gives_no_interval_and_says_so(coco_sample, tmp_path):
    rq, rs = coco_sample
    summary, ivs, ipath = summarize_to_files([rs], tmp_path / "s.json", [rq], bootstrap_reps=0)
    assert ivs.off and ivs.surfaces == {} and summary.surface("s_big").captions == 37
    d = json.loads(ipath.read_text())
    assert d["surfaces"] == {} and d["bootstrap"] == {"reps": 0, "seed": 0,
                                                     "off": "bootstrap_reps is 0: no intervals computed"}
    for bad in (1, -5, 2.5):
        with pytest.raises(ValueError, match="bootstrap reps"):
            summarize_with_intervals([rs], [rq], bootstrap_reps=bad)


def test_an_empty_surface_is_refused_not_given_a_zero_interval():
    with pytest.raises(ValueError, match="no answered captions"):
        surface_intervals([], [], 2000, 0)
    with pytest.raises(ValueError, match="no captions"):
        percentile_bootstrap({"x": []}, means=["x"], reps=10)
    ivs = caption_intervals({"empty": ([], [], []), "one": ([3], [(2, 2, 0, 0) + (0,) * 16], ["a"])}, 50, 0)
    assert ivs.skipped == {"empty": "no answered captions: no interval"} and set(ivs.surfaces) == {"one"}
    assert ivs.surfaces["one"]["cbu_per_cap"] == {"lower": 2.0, "upper": 2.0}  # one caption: a point, honestly
    assert ClaimIntervals.from_dict(ivs.to_dict()).skipped == ivs.skipped


def test_chunked_draws_are_the_one_index_matrix():
    for n in (1, 7, 250):
        whole = np.random.default_rng(5).integers(0, n, size=(301, n))
        parts = np.vstack(list(index_chunks(n, 301, np.random.default_rng(5), chunk_cells=3 * n + 1)))
        assert np.array_equal(whole, parts)
        v = np.random.default_rng(n).integers(0, 20, size=(n, 3)).astype(float)
        assert np.array_equal(replicate_sums(v, 301, 5, chunk_cells=2 * n), v[whole].sum(axis=1))
        assert np.array_equal(replicate_sums(v, 301, 5, chunk_cells=2 * n), replicate_sums(v, 301, 5))


def test_cli_summarize_writes_intervals(coco_sample, tmp_path, capsys):
    from capaudit.cli import main

    rq, rs = coco_sample
    out = tmp_path / "x.json"
    assert main(["claims", "summarize", "--responses", str(rs), "--requests", str(rq), "--out", str(out),
                 "--bootstrap-reps", "200", "--bootstrap-seed", "4"]) == 0
    err = capsys.readouterr().err
    assert "95% caption-bootstrap intervals (200 reps, seed 4) for 2 surfaces" in err
    assert json.loads((tmp_path / "x.intervals.json").read_text())["bootstrap"]["reps"] == 200
    assert main(["claims", "summarize", "--responses", str(rs), "--requests", str(rq), "--out", str(out),
                 "--bootstrap-reps", "0"]) == 0
    assert "no intervals (--bootstrap-reps 0)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["claims", "summarize", "--responses", str(rs), "--out", str(out), "--bootstrap-reps", "1"])
