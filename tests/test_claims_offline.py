"""The offline heuristic extractor (capaudit-heuristic-extractor) and its backend."""

from __future__ import annotations

import json

import pytest

from capaudit.claims.requests import BuildParams, build_requests, claims_schema
from capaudit.llm.validate import validate

pytest.importorskip("spacy")


@pytest.fixture(scope="module")
def extractor():
    from capaudit.standins.claims_extractor import HeuristicExtractor

    return HeuristicExtractor()


def _units(ex, text):
    return {(u["category"], u["unit"], u["target"]) for u in ex.extract(text)}


def test_hand_made_caption(extractor):
    text = ('A silver laptop sits on a wooden desk next to two red mugs, with a sign that reads "OPEN 24 HOURS". '
            "Close-up shot, soft lighting, watercolor style.")
    got = _units(extractor, text)
    expected = {
        ("object", "laptop", "laptop"), ("object", "desk", "desk"), ("object", "mugs", "mugs"),
        ("attribute", "silver laptop", "laptop"), ("attribute", "wooden desk", "desk"),
        ("attribute", "red mugs", "mugs"), ("count", "two mugs", "mugs"),
        ("relation", "laptop on desk", "laptop"), ("relation", "laptop next to mugs", "laptop"),
        ("text_rendering", 'text "open 24 hours"', "sign"), ("camera", "close-up shot", "scene"),
        ("lighting", "soft lighting", "scene"), ("style", "watercolor", "scene"),
    }
    assert expected <= got
    assert not any(c == "object" and u in ("shot", "lighting", "style", "hours") for c, u, _ in got)


def test_negated_text_and_stop_nouns(extractor):
    got = _units(extractor, "A photo of a cat in front of a door. There is no text in the image.")
    assert not any(c == "text_rendering" for c, _, _ in got)
    assert ("relation", "cat in front of door", "cat") in got
    assert not any(c == "object" and u in ("photo", "front", "image", "text") for c, u, _ in got)
    assert ("style", "photo", "scene") in got


def test_relation_and_state(extractor):
    got = _units(extractor, "A man riding a brown horse. The sky is blue.")
    assert ("relation", "man riding horse", "man") in got
    assert ("attribute", "blue sky", "sky") in got


def test_spans_are_substrings_and_schema_valid(extractor, data_dir):
    from capaudit.surfaces import iter_captions

    spec = {"name": "iiw", "dataset": "imageinwords", "path": "IIW-400/data.jsonl", "format": "jsonl",
            "caption_field": "IIW", "key_field": "image/key", "max_records": 40}
    caps = [r.caption for r in iter_captions(spec)]
    rows, _ = build_requests([(i, c, None, None) for i, c in enumerate(caps)], BuildParams(surface="iiw", budget=64))
    schema = claims_schema()
    texts = [r["input"]["caption"] for r in rows]
    results = extractor.extract_many(texts)
    assert sum(len(u) for u in results) > 40 * 5
    for text, units in zip(texts, results):
        assert validate({"caption_id": "x", "claimed_units": units}, schema) == []
        for u in units:
            assert u["span"] and u["span"] in text, (u, text)


def test_backend_answers_from_the_prompt(extractor):
    from capaudit.standins.claims_extractor import BACKEND_NAME, ExtractorBackend
    from capaudit.llm.backends import backend_names

    assert BACKEND_NAME in backend_names()
    rows, _ = build_requests([(3, "Two dogs\non grass", None, None)], BuildParams(surface="s", budget=64))
    out = json.loads(ExtractorBackend(extractor)(rows[0]["messages"], {}))
    assert out["caption_id"] == "s:3"
    assert {"category": "count", "unit": "two dogs", "span": "Two dogs", "target": "dogs"} in out["claimed_units"]
    assert validate(out, rows[0]["schema"]) == []
    with pytest.raises(ValueError):
        ExtractorBackend(extractor)([{"role": "user", "content": "no caption lines"}], {})


def test_cache_returns_equal_copies(extractor):
    a = extractor.extract("A red ball.")
    a[0]["unit"] = "mutated"
    assert extractor.extract("A red ball.")[0]["unit"] != "mutated"


def test_units_carry_the_captions_words(extractor):
    """Issue 21: units in surface words (not lemmas), articles left out; dedup still on the lemma."""
    got = _units(extractor, "A skateboarder in black pants doing a trick.")
    assert {("object", "pants", "pants"), ("attribute", "black pants", "pants"),
            ("relation", "skateboarder doing trick", "skateboarder")} <= got
    got = _units(extractor, "A pair of scissors on a desk.")
    assert {("object", "scissors", "scissors"), ("count", "pair of scissors", "scissors"),
            ("relation", "scissors on desk", "scissors")} <= got
    units = extractor.extract("A person holding a can in their hand.")
    rel = {u["unit"]: u["span"] for u in units if u["category"] == "relation"}
    assert rel["person holding can"] == "person holding a can"
    assert rel["person holding in hand"] == "person holding a can in their hand"
    # one object per lemma, in the words of its first mention; targets name that object unit
    got = _units(extractor, "A dog runs on the beach while two dogs sleep. The dogs are brown.")
    assert [u for c, u, _ in got if c == "object" and u.startswith("dog")] == ["dog"]
    assert {("count", "two dogs", "dog"), ("attribute", "brown dogs", "dog"), ("attribute", "dogs sleep", "dog")} <= got


def test_lemma_forms_give_the_same_units(extractor, data_dir):
    """``forms="lemma"`` (the scene-graph parser's) and the surface forms: same units, types, spans."""
    from capaudit.surfaces import iter_captions

    spec = {"name": "iiw", "dataset": "imageinwords", "path": "IIW-400/data.jsonl", "format": "jsonl",
            "caption_field": "IIW", "key_field": "image/key", "max_records": 30}
    changed = 0
    for cap in (r.caption for r in iter_captions(spec)):
        doc = extractor.nlp(" ".join(cap.split()[:64]))
        surface, lemma = extractor.extract_doc(doc), extractor.extract_doc(doc, forms="lemma")
        assert [(u["category"], u["span"]) for u in surface] == [(u["category"], u["span"]) for u in lemma]
        changed += sum(s["unit"] != l["unit"] for s, l in zip(surface, lemma))
    assert changed > 30  # plurals and verb forms differ on real captions
    assert [u["unit"] for u in extractor.extract_doc(extractor.nlp("Two red mugs."), forms="lemma")] == \
        ["mug", "red mug", "two mugs"]
    with pytest.raises(ValueError):
        extractor.extract_doc(doc, forms="stems")
