"""The fast paths of the claimed summarizer equal the reference functions exactly, on real captions.

``lex_count`` vs ``len(lex_units)``, ``UnitCounter`` vs ``caption_counter(unit_records(...))``, and a
whole ``summarize_responses`` vs the plain row-by-row flow (``merge_lines`` → ``loads`` →
``ClaimedAccumulator.add``) it replaced, byte for byte on the written summary.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import List

import pytest

from capaudit.claims.summarize import (
    UNIT_COUNT_FIELDS,
    ClaimedAccumulator,
    UnitCounter,
    _parsed,
    caption_counter,
    index_requests,
    lex_count,
    lex_counts,
    normalize_unit,
    request_info,
    summarize_responses,
    unit_records,
)
from capaudit.io.canonical_json import loads
from capaudit.llm.requests import read_requests
from capaudit.llm.store import merge_lines
from capaudit.summaries.claimed import format_claimed_summary
from capaudit.summaries.categories import UNIT_CATEGORIES
from capaudit.text.lexical import lex_units

EDGE_TEXTS = [
    "", " ", "\t\n", "dog's", "'dog'", "a''b", "a'b'c", "rock'n'roll", "o' clock", "it 's", "l'été",
    "İstanbul", "ΣΊΣΥΦΟΣ", "naïve café", "straße", "东京 tower", "x_y", "__", "e-mail", "5'11\"",
    "A dog.", "  the The an A red-Dog's bowl  ", "no visible text", "NO TEXT", "without text", "a",
    "ＡＢＣ", "١٢٣ arabic digits", "emoji 🐶 dog", "tab\tsep", "\u00a0nbsp\u00a0", "x\u2019s", "'", "''",
]


@pytest.fixture(scope="module")
def captions(data_dir: Path) -> List[str]:
    p = data_dir / "coco_karpathy_captions" / "val_captions.json"
    if not p.is_file():
        pytest.skip(f"{p} not found")
    caps = [c for cs in json.loads(p.read_text(encoding="utf-8")).values() for c in cs]
    return caps + EDGE_TEXTS


def test_lex_counts_equal_lex_units(captions):
    """The claims window's lexical units, counted a batch at a time by the kernel, equal the
    definition's on real captions and edge texts (non-ASCII ones whose lower-casing changes them)."""
    assert len(captions) > 20000
    texts = captions + ["İstanbul ΣΊΣΥΦΟΣ", "DON'T don\u2019t", "x_y", ""]
    assert lex_counts(texts) == [len(lex_units(t)) for t in texts]
    assert [lex_count(t) for t in texts[-4:]] == [len(lex_units(t)) for t in texts[-4:]]
    assert lex_counts([]) == []


def test_normalize_ignores_surrounding_whitespace(captions):
    # UnitCounter memoises normalize_unit on the raw unit/target instead of the stripped one
    for text in captions[:5000] + EDGE_TEXTS:
        for pad in ("", " ", "  \t", "\n"):
            assert normalize_unit(pad + text + pad) == normalize_unit(text.strip()), text


def _answers(captions: List[str], n: int, seed: int = 0):
    """Answers as an extractor would give them (units and targets from caption words and phrases,
    articles, case and whitespace variants, repeats, absence claims) plus malformed ones."""
    rng = random.Random(seed)
    cats = list(UNIT_CATEGORIES)
    out = []
    for i in range(n):
        cap = captions[rng.randrange(len(captions))]
        words = cap.split() or ["thing"]
        units = []
        for _ in range(rng.randrange(0, 12)):
            k = rng.randrange(1, 4)
            j = rng.randrange(len(words))
            unit = " ".join(words[j:j + k])
            r = rng.random()
            if r < 0.1:
                unit = "the " + unit.upper()
            elif r < 0.15:
                unit = "  " + unit + " "
            elif r < 0.2:
                unit = rng.choice(["a", "the", "An", " ", "", "no visible text", "without text", "!!", "a the"])
            target = rng.choice(["", words[0], words[-1], " " + words[0], "the " + words[0]])
            units.append({"category": rng.choice(cats), "unit": unit, "span": unit, "target": target})
            if units and rng.random() < 0.15:
                units.append(dict(rng.choice(units)))  # a repeat
        r = rng.random()
        if r < 0.03:  # malformed items and fields: the reference path
            units.append(rng.choice([
                "dog", None, 3, ["object", "dog"], {"category": "object", "unit": "cat"},
                {"category": "object", "unit": 5, "target": ""}, {"category": "bogus", "unit": "x", "target": ""},
                {"category": "object", "unit": "cat", "target": ["x"]}, {"category": "object", "unit": "cat", "target": 7},
            ]))
        elif r < 0.05:
            out.append({"claimed_units": {"object": [w for w in words[:3]] + [{"unit": words[-1], "target": "x"}, ""],
                                          "style": [""], "count": ["two " + words[0]]}})
            continue
        elif r < 0.06:
            out.append(rng.choice([None, [], "text", {"claimed_units": None}, {"claimed_units": "x"}, {}]))
            continue
        out.append({"caption_id": f"c{i}", "claimed_units": units})
    return out


def test_unit_counter_equals_caption_counter(captions):
    counter = UnitCounter(max_entries=5000)  # small: the memo is cleared many times on the way
    answers = _answers(captions, 20000)
    for parsed in answers:
        ref = caption_counter(unit_records(parsed), 0)
        assert UnitCounter.expand(counter.count(parsed)) == {k: ref[k] for k in UNIT_COUNT_FIELDS}, parsed
    # a fresh counter (cold memo) and a warm one agree
    assert [counter.count(a) for a in answers[:2000]] == [UnitCounter().count(a) for a in answers[:2000]]


def test_unit_counter_raises_as_the_reference():
    with pytest.raises(TypeError):
        caption_counter(unit_records({"claimed_units": [{"category": ["x"], "unit": "dog", "target": ""}]}), 0)
    with pytest.raises(TypeError):
        UnitCounter().count({"claimed_units": [{"category": ["x"], "unit": "dog", "target": ""}]})


def _reference_summary(responses, requests, label):
    """The flow summarize_responses had before it parsed each row once (kept here as the oracle)."""
    index = {}
    for path in requests:
        for i, row in enumerate(read_requests(path), start=1):
            surface, window = request_info(row, f"{path}: request {i} ({row['request_id']})")
            index[row["request_id"]] = (surface, len(lex_units(window)))
    merged = merge_lines(*responses)
    acc = ClaimedAccumulator()
    for rid in sorted(merged):
        row = loads(merged[rid])
        req = row.get("request")
        if isinstance(req, dict):
            surface, window = request_info(req, f"response {rid}")
        else:
            surface, window = index[rid]
        acc.add(surface, bool(row["ok"]), _parsed(row) if row["ok"] else None, window)
    label = {**label, "requests_total": len(index), "unanswered_requests": len(set(index) - set(merged))}
    return acc.finalize(input=label)


@pytest.mark.parametrize("concurrent", [False, True])  # request index read inline, or in a second process
def test_summary_equals_row_by_row_flow(captions, tmp_path, monkeypatch, concurrent):
    import capaudit.claims.summarize as summ

    monkeypatch.setattr(summ, "CONCURRENT_INDEX_BYTES", 0 if concurrent else 1 << 62)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a second CPU
    rng = random.Random(1)
    answers = _answers(captions, 6000, seed=1)
    reqs, r1, r2 = [], [], []
    for i, parsed in enumerate(answers):
        rid = f"{rng.getrandbits(64):016x}"
        cap = captions[rng.randrange(len(captions))]
        surface = rng.choice(["coco", "web", "long"])
        reqs.append({"request_id": rid, "task": "claimed_cbu", "task_version": 2, "prompt_version": "t",
                     "schema": {}, "messages": [{"role": "user", "content": "x"}], "decoding": {"max_tokens": 1},
                     "input": {"surface": surface, "caption": cap, "caption_id": f"c{i}"}})
        started = f"2026-01-01T00:00:{rng.randrange(60):02d}Z"
        row = {"request_id": rid, "ok": True, "started_at": started, "parsed": parsed}
        r = rng.random()
        if r < 0.05:
            row = {"request_id": rid, "ok": False, "started_at": started, "error": "x"}
        elif r < 0.08:  # the answer as text only
            row = {"request_id": rid, "ok": True, "started_at": started, "parsed": None,
                   "response_text": "```json\n" + json.dumps(parsed) + "\n```"}
        elif r < 0.1:  # a reference-style log row carrying its request
            row["request"] = {"surface": "ref", "caption": cap}
        elif r < 0.12:
            continue  # unanswered
        (r1 if rng.random() < 0.7 else r2).append(row)
        if rng.random() < 0.08:  # a second row for the same id: later failure, earlier/equal answer
            twin = dict(row, ok=rng.random() < 0.5, started_at=rng.choice([started, "2025-12-31T00:00:00Z"]))
            if twin["ok"]:
                twin["parsed"] = answers[rng.randrange(len(answers))]
            (r2 if rng.random() < 0.5 else r1).append(twin)
    rq, p1, p2 = tmp_path / "requests.jsonl", tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    rq.write_text("\ufeff" + "".join(json.dumps(r, ensure_ascii=False) + "\n\n" for r in reqs), encoding="utf-8")
    p1.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in r1), encoding="utf-8")
    p2.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in r2), encoding="utf-8")
    label = {"responses": [str(p1), str(p2)], "requests": [str(rq)]}
    ours = summarize_responses([p1, p2], [rq])
    ref = _reference_summary([p1, p2], [rq], label)
    assert format_claimed_summary(ours) == format_claimed_summary(ref)
    assert ours.status.captions > 5000


def test_first_error_in_request_id_order(tmp_path):
    # rows are summed in any order now; the error raised is still that of the smallest request id
    p = tmp_path / "log.jsonl"
    rows = [{"request_id": "c", "ok": True, "parsed": {"claimed_units": []}},  # no request anywhere
            {"request_id": "b", "ok": True, "parsed": {"claimed_units": []}, "request": {"surface": "", "caption": "x"}},
            {"request_id": "d", "ok": True, "parsed": {"claimed_units": []}, "request": {"surface": "s", "caption": "x"}}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match="response b: request field 'surface'"):
        summarize_responses([p])
    p.write_text("".join(json.dumps(r) + "\n" for r in rows[::2]))
    with pytest.raises(ValueError, match="response c: no 'request' in the row"):
        summarize_responses([p])


_REAL_INDEX = index_requests


def _index_spy(paths):
    """``index_requests`` that notes which process ran it (module level: it is pickled by name)."""
    import os

    with open(os.environ["CAPAUDIT_TEST_PIDS"], "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return _REAL_INDEX(paths)


@pytest.mark.parametrize("concurrent", [False, True])
def test_request_file_error_is_reported_before_a_response_error(tmp_path, monkeypatch, concurrent):
    import capaudit.claims.summarize as summ

    import os

    monkeypatch.setattr(summ, "CONCURRENT_INDEX_BYTES", 0 if concurrent else 1 << 62)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)  # a second CPU
    pids = tmp_path / "pids"
    monkeypatch.setenv("CAPAUDIT_TEST_PIDS", str(pids))
    monkeypatch.setattr(summ, "index_requests", _index_spy)
    rq, rs = tmp_path / "requests.jsonl", tmp_path / "responses.jsonl"
    rq.write_text('{"request_id": "a"}\n{not json\n', encoding="utf-8")
    rs.write_text('{"request_id": "a", "ok": true, "parsed": {"claimed_units": []}}\n[1, 2\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"requests.jsonl:1: "):
        summarize_responses([rs], [rq])
    rq.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match=r"responses.jsonl:2"):
        summarize_responses([rs], [rq])
    me = str(os.getpid())
    # inline: both calls index here; forked: a child indexes, and the failed index is run again here
    # (so its error is exactly the inline one), then the second call's child
    want = [me, me] if not concurrent else ["child", me, "child"]
    assert [p if p == me else "child" for p in pids.read_text().split()] == want


def test_no_fork_while_another_thread_runs(tmp_path, monkeypatch):
    import os
    import threading

    import capaudit.claims.summarize as summ

    monkeypatch.setattr(summ, "CONCURRENT_INDEX_BYTES", 0)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    pids = tmp_path / "pids"
    monkeypatch.setenv("CAPAUDIT_TEST_PIDS", str(pids))
    monkeypatch.setattr(summ, "index_requests", _index_spy)
    rq, rs = tmp_path / "requests.jsonl", tmp_path / "responses.jsonl"
    rq.write_text("", encoding="utf-8")
    rs.write_text('{"request_id": "a", "ok": false, "request": {"surface": "s", "caption": "x"}}\n', encoding="utf-8")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)  # e.g. a server thread of the claims stage
    other.start()
    try:
        summarize_responses([rs], [rq])
    finally:
        stop.set()
        other.join()
    assert pids.read_text().split() == [str(os.getpid())]


def test_distribution_equals_its_statistics_definition():
    import math
    import statistics

    from capaudit.claims.summarize import distribution

    rng = random.Random(7)
    cases = [[], [3], [2, 1], [1.5, 0.25, 0.25]]
    for n in (4095, 4096, 5000, 20001):  # both sides of the numpy sort
        cases.append([rng.randrange(0, 40) for _ in range(n)])
        cases.append([100.0 * rng.randrange(0, 40) / max(rng.randrange(0, 90), 1) for _ in range(n)])
    for values in cases:
        d = distribution(values)
        if not values:
            assert (d.median, d.p25, d.p75, d.trimmed_mean) == (0.0, 0.0, 0.0, 0.0)
            continue
        vals = sorted(values)
        k = int(math.floor(0.1 * len(vals)))
        kept = vals[k: len(vals) - k]
        want = (float(statistics.median(values)), float(vals[round((len(vals) - 1) * 0.25)]),
                float(vals[round((len(vals) - 1) * 0.75)]), float(sum(kept) / len(kept)) if kept else 0.0)
        assert (d.median, d.p25, d.p75, d.trimmed_mean) == want  # exactly, not approximately
