"""Model cards (issue 32): the server declares who answers, the client records it beside its
store, and stages read it back (``answered_by``) instead of recognising model names."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from capaudit.llm.backends import BackendRegistry
from capaudit.llm.cards import ModelCard, card_of_entry, fetch_card, model_revision
from capaudit.llm.client import run_requests
from capaudit.llm.server import background_server, make_app, served_cards
from capaudit.llm.store import answered_by, models_path, record_answerers
from test_llm_server import _call
from test_llm_support import make_rows


def test_server_declares_each_card_in_models_and_completions():
    reg = BackendRegistry()
    card = ModelCard("upper", "heuristic", "v3", "upper (a test heuristic)", "answers are upper-cased prompts")
    reg.register("upper", lambda messages, payload: messages[-1]["content"].upper(), card=card)
    reg.register("bare", lambda messages, payload: "x")  # no card: said so
    status, models = _call(make_app(["upper", "bare"], registry=reg), "GET", "/v1/models")
    assert status == 200
    by_id = {m["id"]: m for m in models["data"]}
    assert by_id["upper"]["capaudit"] == {"kind": "heuristic", "version": "v3", "label": "upper (a test heuristic)",
                                          "caveat": "answers are upper-cased prompts"}
    assert by_id["bare"]["capaudit"]["kind"] == "unknown" and "without a model card" in by_id["bare"]["capaudit"]["caveat"]
    status, out = _call(make_app(["upper"], registry=reg), "POST", "/v1/chat/completions",
                        {"model": "upper", "messages": [{"role": "user", "content": "a dog"}]})
    assert status == 200 and out["capaudit_model"] == by_id["upper"]["capaudit"]


def test_the_stand_ins_carry_the_labels_and_versions_the_artifacts_print():
    cards = served_cards()
    assert cards["capaudit-heuristic-extractor"] == {
        "kind": "heuristic", "version": "heuristic-v7", "label": "capaudit-heuristic-extractor (heuristic baseline)",
        "caveat": "claims come from capaudit's offline heuristic extractor, not from a language model"}
    assert cards["capaudit-offline-coco-captioner"]["label"] == \
        "capaudit-offline-coco-captioner (offline, composed from COCO annotations)"
    assert cards["capaudit-offline-refcaption-judge"]["needs"] == ["judged_caption"]
    assert cards["capaudit-offline-annotation-judge"]["short"] == "Annot. (offline)"
    assert cards["capaudit-offline-scene-graph"]["version"] == "sg-offline-v1+heuristic-v7"
    # every stand-in of the reviewed card file (other tests may register test backends of their own)
    from capaudit.standins.cards import cards as standin_cards

    declared = standin_cards()
    assert declared and set(declared) <= set(cards)
    assert all(cards[n]["kind"] == "heuristic" and cards[n]["caveat"] for n in declared)


def test_vllm_entries_local_card_file_or_real(tmp_path):
    plain = card_of_entry({"id": "Qwen/Qwen3", "root": "Qwen/Qwen3", "owned_by": "vllm", "max_model_len": 4096})
    assert plain["kind"] == "real" and plain["caveat"] == "" and plain["max_model_len"] == 4096
    assert plain["root"] == "Qwen/Qwen3" and plain["owned_by"] == "vllm"
    (tmp_path / "capaudit_model.json").write_text(json.dumps(
        {"kind": "random-vision test model", "version": "seed-0", "label": "tiny VLM (random weights)",
         "caveat": "answers come from a model with random weights: they test the pipeline, not the data"}))
    test = card_of_entry({"id": "tiny", "root": str(tmp_path), "owned_by": "vllm"})
    assert test["kind"] == "random-vision test model" and test["label"] == "tiny VLM (random weights)"
    assert test["version"] == "seed-0" and test["source"].endswith("capaudit_model.json")
    (tmp_path / "capaudit_model.json").write_text(json.dumps({"kind": "heuristic"}))  # no label/caveat: ignored
    assert card_of_entry({"id": "tiny", "root": str(tmp_path)})["kind"] == "real"
    # a folder on the server's machine that is not here: its card cannot be read, so who answered is unknown
    far = card_of_entry({"id": "far", "root": str(tmp_path / "on-another-machine"), "max_model_len": 2048})
    assert far["kind"] == "unknown" and "not readable here" in far["caveat"] and far["max_model_len"] == 2048


class _NoModelsRoute(BaseHTTPRequestHandler):
    """A chat server without ``/v1/models`` (its answers echo nothing but valid JSON)."""

    def do_GET(self):  # noqa: N802
        self.send_response(404)
        self.end_headers()

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("Content-Length", 0))
        payload = json.loads(self.rfile.read(n))
        body = json.dumps({"id": "x", "object": "chat.completion", "model": payload["model"],
                           "choices": [{"index": 0, "finish_reason": "stop", "message": {
                               "role": "assistant", "content": json.dumps({"caption_id": "", "claimed_units": []})}}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_client_records_who_answered_merged_across_runs_and_urls(tmp_path):
    store = tmp_path / "responses.jsonl"
    rows = make_rows(3, model="capaudit-schema-minimal")
    with background_server(["capaudit-schema-minimal"]) as url:
        assert fetch_card(url, "capaudit-schema-minimal")["kind"] == "heuristic"
        assert model_revision(url, "capaudit-schema-minimal") == "1"
        assert fetch_card(url, "not-served")["kind"] == "unknown"
        stats = run_requests(rows[:2], store, [url], "capaudit-schema-minimal", progress=False, handle_signals=False)
        assert stats.answered == 2
        first = answered_by(store)
        assert models_path(store) == tmp_path / "responses.models.json" and models_path(store).is_file()
        assert len(first) == 1 and first[0]["model"] == "capaudit-schema-minimal"
        assert first[0]["kind"] == "heuristic" and first[0]["urls"] == [url]
        assert first[0]["label"].startswith("capaudit-schema-minimal (smoke test")
        run_requests(rows, store, [url], "capaudit-schema-minimal", progress=False, handle_signals=False)  # resumed
        assert answered_by(store) == first  # same server: one card, one URL
    # a second endpoint with no /v1/models: recorded as unknown, the first card kept
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _NoModelsRoute)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        other = f"http://127.0.0.1:{srv.server_address[1]}"
        more = make_rows(2, model="capaudit-schema-minimal", prompt_version=2)
        run_requests(more, store, [other], "capaudit-schema-minimal", progress=False, handle_signals=False, probe=False)
    finally:
        srv.shutdown()
    cards = answered_by(store)
    assert [c["kind"] for c in cards] == ["heuristic", "unknown"]
    assert cards[1]["urls"] == [other] and "unknown" in cards[1]["caveat"]


def test_directory_stores_and_a_missing_sidecar(tmp_path):
    assert answered_by(tmp_path / "never.jsonl") == []
    d = tmp_path / "store"
    d.mkdir()
    record_answerers(str(d) + "/", [{"model": "m", "url": "u1", "kind": "real", "version": "", "label": "m", "caveat": ""}])
    (d / "other.models.json").write_text(json.dumps({"answered_by": [
        {"model": "m", "url": "u2", "kind": "real", "version": "", "label": "m", "caveat": ""}]}))
    cards = answered_by(d)
    assert len(cards) == 1 and sorted(cards[0]["urls"]) == ["u1", "u2"]


def test_card_kinds_are_checked():
    with pytest.raises(ValueError, match="kind"):
        ModelCard("x", "magic")


def test_recorded_cards_keep_what_was_declared(tmp_path):
    """A server that did not answer is not recorded; an unknown card never replaces a known one of the
    same model and URL; a fresh store (no row yet) replaces a leftover file instead of merging."""
    from capaudit.llm.cards import fetch_card
    from capaudit.llm.store import answered_by, record_answerers

    store = tmp_path / "responses.jsonl"
    real = {"model": "m", "kind": "real", "version": "", "label": "m", "caveat": "", "url": "http://a"}
    record_answerers(store, [real])
    down = fetch_card("http://127.0.0.1:9", "m", timeout=2.0)  # nothing listens on the discard port
    assert down["reachable"] is False and down["kind"] == "unknown"
    record_answerers(store, [down])
    record_answerers(store, [{**real, "kind": "unknown", "label": "m", "caveat": "who answered m is unknown"}])
    assert [c["kind"] for c in answered_by(store)] == ["real"]
    record_answerers(store, [{**real, "model": "other", "kind": "heuristic"}], fresh=True)
    assert [c["model"] for c in answered_by(store)] == ["other"]
