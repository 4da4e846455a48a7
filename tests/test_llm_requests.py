"""Request ids, request rows and dialect payloads (capaudit.llm.requests / .dialects)."""

from __future__ import annotations

import hashlib
import json

import pytest

from capaudit.llm.dialects import build_payload, requested_schema, schema_name
from capaudit.llm.requests import check_request, count_lines, make_request, read_requests, request_id, write_requests

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
BASE = dict(task="claimed_cbu_v3", task_version=1, model="Qwen/Qwen3.5-397B-A17B-FP8",
            revision="ea5b4f81096f3901c91dea97f81324302495781d", prompt_version="p1", schema=SCHEMA,
            decoding={"temperature": 0, "max_tokens": 4096}, input={"caption": "A red bus.", "caption_id": "s:0"})


def test_request_id_is_blake2b16_of_canonical_json():
    # hand-built canonical text: keys sorted at every level, compact separators, UTF-8
    text = (
        '{"decoding":{"max_tokens":4096,"temperature":0},'
        '"input":{"caption":"A red bus.","caption_id":"s:0"},'
        '"model":"Qwen/Qwen3.5-397B-A17B-FP8","prompt_version":"p1",'
        '"revision":"ea5b4f81096f3901c91dea97f81324302495781d",'
        '"schema":{"properties":{"a":{"type":"string"}},"required":["a"],"type":"object"},'
        '"task":"claimed_cbu_v3","task_version":1}'
    )
    expected = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    assert request_id(**BASE) == expected
    assert len(expected) == 32


def test_request_id_key_order_and_unicode():
    a = request_id(**{**BASE, "input": {"caption_id": "s:0", "caption": "café"}})
    b = request_id(**{**BASE, "input": {"caption": "café", "caption_id": "s:0"}})
    assert a == b


@pytest.mark.parametrize("field,value", [
    ("prompt_version", "p2"),
    ("schema", {**SCHEMA, "additionalProperties": False}),
    ("decoding", {"temperature": 0, "max_tokens": 2048}),
    ("decoding", {"temperature": 0, "max_tokens": 4096, "top_p": 0.95}),
    ("model", "google/gemma-4-31B-it"),
    ("revision", "439edf5652646a0d1bd8b46bfdc1d3645761a445"),
    ("revision", None),
    ("task_version", 2),
    ("task", "cbu_vqa_v1"),
    ("input", {"caption": "A red bus!", "caption_id": "s:0"}),
])
def test_request_id_changes_with_every_hashed_field(field, value):
    assert request_id(**{**BASE, field: value}) != request_id(**BASE)


def test_make_request_row_and_check():
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}]
    row = make_request(**BASE, messages=msgs, meta={"surface": "s"})
    assert row["request_id"] == request_id(**BASE)
    assert row["model_hint"] == BASE["model"] and row["meta"] == {"surface": "s", "revision": BASE["revision"]}
    assert set(row) == {"request_id", "task", "task_version", "model_hint", "prompt_version", "schema", "messages",
                        "decoding", "input", "meta"}
    # meta does not change the id
    assert make_request(**BASE, messages=msgs, meta={"surface": "other"})["request_id"] == row["request_id"]
    check_request(row, "x")
    with pytest.raises(ValueError, match="f.jsonl:3: missing field 'schema'"):
        check_request({k: v for k, v in row.items() if k != "schema"}, "f.jsonl:3")
    with pytest.raises(ValueError, match=r"messages\[1\]"):
        check_request({**row, "messages": [msgs[0], {"role": "robot", "content": ""}]}, "w")
    with pytest.raises(ValueError, match="max_tokens"):
        make_request(**{**BASE, "decoding": {"temperature": 0}}, messages=msgs)


def test_write_read_count(tmp_path):
    msgs = [{"role": "user", "content": "ünïcode"}]
    rows = [make_request(**{**BASE, "input": {"i": i}}, messages=msgs) for i in range(5)]
    p = tmp_path / "r.jsonl"
    assert write_requests(p, rows) == 5
    assert list(read_requests(p)) == rows
    assert count_lines(p) == 5
    p.write_bytes(p.read_bytes() + b"\n\n{bad json}\n")
    with pytest.raises(ValueError, match=r"r\.jsonl:8: invalid JSON"):
        list(read_requests(p))


REQ = {"request_id": "r1", "task": "claimed cbu/v2!", "schema": SCHEMA,
       "messages": [{"role": "user", "content": "hi"}], "decoding": {"temperature": 0, "max_tokens": 7,
                                                                   "chat_template_kwargs": {"enable_thinking": False}}}


def test_payload_vllm():
    assert build_payload(REQ, "m") == {
        "model": "m", "messages": REQ["messages"], "temperature": 0, "max_tokens": 7,
        "chat_template_kwargs": {"enable_thinking": False}, "structured_outputs": {"json": SCHEMA},
    }


def test_payload_openai():
    p = build_payload(REQ, "m", "openai")
    assert p["response_format"] == {"type": "json_schema",
                                    "json_schema": {"name": "claimed_cbu_v2", "schema": SCHEMA, "strict": True}}
    assert "structured_outputs" not in p and p["max_tokens"] == 7


def test_payload_llamacpp():
    p = build_payload(REQ, "m", "llamacpp")
    assert p["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert set(p) == {"model", "messages", "temperature", "max_tokens", "chat_template_kwargs", "response_format"}


def test_payload_errors_and_schema_roundtrip():
    with pytest.raises(ValueError, match="unknown dialect"):
        build_payload(REQ, "m", "tgi")
    with pytest.raises(ValueError, match="may not set"):
        build_payload({**REQ, "decoding": {"max_tokens": 1, "response_format": {}}}, "m")
    for d in ("vllm", "openai", "llamacpp"):
        assert requested_schema(build_payload(REQ, "m", d)) == SCHEMA
    assert schema_name({"task": "x" * 100}) == "x" * 64 and schema_name({}) == "response"
    json.dumps(build_payload(REQ, "m"))  # serialisable
