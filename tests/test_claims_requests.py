"""Claim-extraction request builder (reference-spec §4.2, windows §1.2) and the CLI contract."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from capaudit.claims.prompts import PROMPT_VERSION, parse_user_prompt
from capaudit.claims.requests import (
    BuildParams,
    build_requests,
    build_requests_file,
    caption_window,
    claims_schema,
    manifest_path,
    prompt_caption,
    sample_rows,
    stable_float,
)
from capaudit.claims.rules import caption_id_matches
from capaudit.cli import main
from capaudit.llm.requests import read_requests
from capaudit.llm.validate import check_output, validate


def test_schema_shape():
    s = claims_schema()
    assert s["required"] == ["caption_id", "claimed_units"] and s["additionalProperties"] is False
    item = s["properties"]["claimed_units"]["items"]
    assert item["additionalProperties"] is False
    assert item["properties"]["category"]["enum"] == [
        "object", "attribute", "relation", "style", "camera", "lighting", "count", "text_rendering"]
    assert [item["properties"][k]["maxLength"] for k in ("unit", "span", "target")] == [80, 120, 80]
    assert "maxItems" not in s["properties"]["claimed_units"]
    assert claims_schema(5)["properties"]["claimed_units"]["maxItems"] == 5
    ok = {"caption_id": "x", "claimed_units": [{"category": "object", "unit": "dog", "span": "dog", "target": "dog"}]}
    assert validate(ok, s) == []
    bad = {"caption_id": "x", "claimed_units": [{"category": "thing", "unit": "dog", "span": "", "target": "", "z": 1}]}
    assert len(validate(bad, s)) >= 2


def test_windows():
    cap = "A close-up\nof  a red-brick wall, today."
    assert caption_window(cap, 3, "whitespace") == "A close-up of"
    assert caption_window(cap, 3, "lexical") == "A close-up"  # A, close, up
    assert caption_window(cap, None) == cap
    with pytest.raises(ValueError):
        caption_window(cap, 3, "words")
    assert prompt_caption("a\nb\r\nc", 3) == "a b"


def test_stable_float_definition():
    h = hashlib.blake2b(b"0:surf:7:surf:7", digest_size=8).digest()
    assert stable_float(0, "surf", 7, "surf:7") == int.from_bytes(h, "big") / 2**64
    assert 0.0 <= stable_float(1, "s", 0, "x") < 1.0


def test_sampling_is_seeded_and_sorted():
    rows = [(i, f"s:{i}") for i in range(50)]
    a = sample_rows(rows, 10, 0, "s")
    assert a == sample_rows(rows, 10, 0, "s") and len(a) == 10 and a == sorted(a)
    assert a != sample_rows(rows, 10, 1, "s")
    keys = sorted(range(50), key=lambda i: stable_float(0, "s", i, f"s:{i}"))[:10]
    assert a == sorted(keys)


def test_build_rows_and_ids():
    items = [(0, "A red\ndog sits", None, None), (4, "Two cats", "cat-id", {"key": "k"})]
    p = BuildParams(surface="demo", budget=2, model="m", prompts="capaudit")
    rows, counts = build_requests(items, p)
    assert counts == {"usable": 2, "emitted": 2}
    r0, r1 = rows
    assert r0["input"]["caption_id"] == "demo:0" and r1["input"]["caption_id"] == "cat-id"
    assert r0["input"]["caption"] == "A red" and r0["input"]["source_caption"] == "A red\ndog sits"
    assert r0["prompt_version"] == PROMPT_VERSION and r0["task"] == "claimed_cbu"
    assert r0["meta"]["source_row"] == 0 and r1["meta"]["emitted_index"] == 1 and r1["meta"]["key"] == "k"
    assert parse_user_prompt(r0["messages"][1]["content"]) == ("demo:0", "A red")
    assert r0["messages"][0]["role"] == "system"
    # id changes with model and window, not with meta
    rows_b, _ = build_requests(items, BuildParams(surface="demo", budget=2, model="other", prompts="capaudit"))
    assert rows_b[0]["request_id"] != r0["request_id"]
    rows_c, _ = build_requests([(0, "A red\ndog sits", None, {"key": "zzz"})], p)
    assert rows_c[0]["request_id"] == r0["request_id"]
    # newline only replaced inside the prompt (lexical window keeps it)
    rows_l, _ = build_requests([(0, "A\nred dog", None, None)], BuildParams(surface="d", budget=2, window="lexical"))
    assert rows_l[0]["input"]["caption"] == "A\nred"
    assert rows_l[0]["messages"][1]["content"].endswith("caption=A red")


def test_prompt_clipping():
    long = "word " * 1000
    rows, _ = build_requests([(0, long, None, None)], BuildParams(surface="d", budget=None, max_caption_chars=20))
    _, cap = parse_user_prompt(rows[0]["messages"][1]["content"])
    assert cap == long[:20] and rows[0]["input"]["caption"] == long


def test_params_validation():
    with pytest.raises(ValueError, match="mutually exclusive"):
        BuildParams(surface="s", sample_records=2, max_records=2)
    with pytest.raises(ValueError):
        BuildParams(surface="", budget=4)


def test_caption_id_rule():
    req = {"input": {"caption_id": "s:1"}, "task": "claimed_cbu",
           "schema": claims_schema()}
    assert caption_id_matches({"caption_id": " s:1 "}, req) == []
    assert caption_id_matches({"caption_id": "s:2"}, req)
    kind, _ = check_output({"caption_id": "s:2", "claimed_units": []}, req)
    assert kind == "rule"


def _write(path: Path, rows):
    path.write_text("".join(json.dumps(r) + "\n" if not isinstance(r, str) else r for r in rows))


def test_jsonl_build_and_errors(tmp_path):
    src = tmp_path / "caps.jsonl"
    _write(src, [{"caption": "one two three"}, {"caption": "  "}, {"caption": 5}, "\n", {"caption": "four five"}])
    out = tmp_path / "r.jsonl"
    counts = build_requests_file(src, "caption", out, BuildParams(surface="s", budget=2))
    assert counts == {"usable": 2, "emitted": 2, "rows": 4, "rows_missing_caption_field": 0, "rows_empty_caption": 2}
    rows = list(read_requests(out))
    assert [r["meta"]["source_row"] for r in rows] == [0, 4]
    assert [r["input"]["caption_id"] for r in rows] == ["s:0", "s:4"]
    man = json.loads(manifest_path(out).read_text())
    assert man["schema"] == claims_schema() and man["parameters"]["budget"] == 2 and man["counts"]["emitted"] == 2
    bad = tmp_path / "bad.jsonl"
    _write(bad, [{"caption": "ok"}, "{not json\n"])
    with pytest.raises(ValueError, match=r"bad.jsonl: line 2: not valid JSON"):
        build_requests_file(bad, "caption", out, BuildParams(surface="s"))
    with pytest.raises(ValueError, match=r"caps.jsonl: line 1: id field 'id'"):
        build_requests_file(src, "caption", out, BuildParams(surface="s"), id_field="id")


def test_cli_build_and_summarize(tmp_path):
    src = tmp_path / "caps.jsonl"
    _write(src, [{"caption": f"caption number {i} with a dog", "id": f"c{i}"} for i in range(6)])
    out = tmp_path / "x" / "requests.jsonl"
    rc = main(["claims", "build", "--input", str(src), "--caption-field", "caption", "--surface", "demo",
               "--budget", "3", "--out", str(out), "--sample-records", "4", "--sample-seed", "0",
               "--id-field", "id", "--model", "m", "--window", "whitespace"])
    assert rc == 0
    rows = list(read_requests(out))
    assert len(rows) == 4 and all(r["input"]["caption"].startswith("caption number") for r in rows)
    resp = out.with_name("responses.jsonl")
    _write(resp, [{"request_id": r["request_id"], "ok": True,
                   "parsed": {"caption_id": r["input"]["caption_id"],
                              "claimed_units": [{"category": "object", "unit": "dog", "span": "", "target": ""}]}}
                  for r in rows])
    summ = tmp_path / "s.json"
    assert main(["claims", "summarize", "--responses", str(resp), "--out", str(summ)]) == 0
    d = json.loads(summ.read_text())
    assert d["surfaces"]["demo"]["claimed_dedup_total"] == 4 and d["surfaces"]["demo"]["caption_tokens"] == 12
    assert main(["claims", "build", "--input", str(tmp_path / "none.jsonl"), "--surface", "s",
                 "--out", str(out)]) == 1


def test_pinned_caption_id_schema():
    items = [(0, "A red dog", None, None), (1, "Two cats", None, None)]
    plain, _ = build_requests(items, BuildParams(surface="d", budget=8, prompts="capaudit"))
    pinned, _ = build_requests(items, BuildParams(surface="d", budget=8, pin_caption_id=True, prompts="capaudit"))
    assert plain[0]["schema"] is plain[1]["schema"] or plain[0]["schema"] == plain[1]["schema"]
    assert plain[0]["schema"]["properties"]["caption_id"] == {"type": "string"}
    for r, cid in zip(pinned, ("d:0", "d:1")):
        assert r["schema"]["properties"]["caption_id"] == {"type": "string", "enum": [cid]}
        assert validate({"caption_id": cid, "claimed_units": []}, r["schema"]) == []
        assert validate({"caption_id": "d:9", "claimed_units": []}, r["schema"])
    # the schema is hashed into the id: pinning never reuses an unpinned answer
    assert pinned[0]["request_id"] != plain[0]["request_id"]
