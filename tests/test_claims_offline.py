"""The offline heuristic extractor (capaudit-heuristic-extractor) and its backend."""

from __future__ import annotations

import json

import pytest

from capaudit.claims.requests import BuildParams, build_requests, claims_schema
from capaudit.llm.validate import validate

pytest.importorskip("spacy")


@pytest.fixture(scope="module")
def extractor():
    from capaudit.claims.offline import HeuristicExtractor

    return HeuristicExtractor()


def _units(ex, text):
    return {(u["category"], u["unit"], u["target"]) for u in ex.extract(text)}


def test_hand_made_caption(extractor):
    text = ('A silver laptop sits on a wooden desk next to two red mugs, with a sign that reads "OPEN 24 HOURS". '
            "Close-up shot, soft lighting, watercolor style.")
    got = _units(extractor, text)
    expected = {
        ("object", "laptop", "laptop"), ("object", "desk", "desk"), ("object", "mug", "mug"),
        ("attribute", "silver laptop", "laptop"), ("attribute", "wooden desk", "desk"),
        ("attribute", "red mug", "mug"), ("count", "two mugs", "mug"),
        ("relation", "laptop on desk", "laptop"), ("relation", "laptop next to mug", "laptop"),
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
    from capaudit.claims.offline import BACKEND_NAME, ExtractorBackend
    from capaudit.llm.backends import backend_names

    assert BACKEND_NAME in backend_names()
    rows, _ = build_requests([(3, "Two dogs\non grass", None, None)], BuildParams(surface="s", budget=64))
    out = json.loads(ExtractorBackend(extractor)(rows[0]["messages"], {}))
    assert out["caption_id"] == "s:3"
    assert {"category": "count", "unit": "two dogs", "span": "Two dogs", "target": "dog"} in out["claimed_units"]
    assert validate(out, rows[0]["schema"]) == []
    with pytest.raises(ValueError):
        ExtractorBackend(extractor)([{"role": "user", "content": "no caption lines"}], {})


def test_cache_returns_equal_copies(extractor):
    a = extractor.extract("A red ball.")
    a[0]["unit"] = "mutated"
    assert extractor.extract("A red ball.")[0]["unit"] != "mutated"
