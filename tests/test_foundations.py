"""Shared foundations: errors, atomic writes, COCO index, noun lexicon, WordNet."""

from __future__ import annotations

import json
import shutil

import pytest

from capaudit.errors import FieldNotFoundError, InputError
from capaudit.io import atomic_write, write_json_atomic
from capaudit.lexicons import coco_lexicon, load_noun_lexicon


def test_input_error_names_file_line_field():
    e = InputError("caption is not a string", path="a.jsonl", line=7, field="caption")
    assert str(e) == "a.jsonl:7 field 'caption': caption is not a string"
    f = FieldNotFoundError("captoin", ["id", "caption"], path="a.jsonl")
    assert "captoin" in str(f) and "caption, id" in str(f)


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    out = tmp_path / "x.json"
    write_json_atomic(out, {"a": 1})
    with pytest.raises(RuntimeError):
        with atomic_write(out) as fh:
            fh.write('{"a": 2')
            raise RuntimeError("boom")
    assert json.loads(out.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary left


def test_atomic_write_refuses_directory(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        write_json_atomic(tmp_path, {})


def test_coco_mini_index():
    from capaudit.data.coco import coco_mini

    c = coco_mini()
    assert len(c) == 159 and len(c.categories) == 80
    im = c.by_file_name("000000397133.jpg")
    counts = im.category_counts(c.category_names)
    assert counts["bowl"] == 4 and counts["person"] == 2 and len(im.captions) == 5
    assert c.lookup(image_bytes=im.path.read_bytes()).id == 397133
    assert sum(len(i.instances) for i in c) == 1363


def test_coco_lexicon_lookups():
    lex = coco_lexicon()
    assert lex.category_of("two hot dogs") == "hot dog"
    assert lex.category_of("knives") == "knife"
    assert lex.category_of("a red traffic lights") == "traffic light"
    assert lex.category_of("a cloud") is None
    assert lex.mentions("a teddy bear on two dining tables") == [("teddy bear", "teddy bear"),
                                                                 ("dining table", "dining table")]


def test_lexicon_rejects_ambiguous_terms(tmp_path):
    p = tmp_path / "lex.yaml"
    p.write_text("categories:\n  - {name: dog, terms: [dog, pup]}\n  - {name: seal, terms: [pup]}\n")
    with pytest.raises(InputError, match="maps to both"):
        load_noun_lexicon(p)


@pytest.mark.skipif(not shutil.which("wn") and not __import__("pathlib").Path("/usr/share/wordnet/data.noun").exists(),
                    reason="WordNet (Debian wordnet-base) not installed")
def test_wordnet_from_debian(tmp_path, monkeypatch):
    from capaudit.nlp import wordnet as w

    root = w.prepare_nltk_data(root=tmp_path / "nltk_data")
    assert (root / "corpora" / "wordnet" / "lexnames").read_text().count("\n") == 45
    wn = w.wordnet()
    assert wn.get_version() == "3.0"
    assert wn.synset("dog.n.01").lexname() == "noun.animal"
    assert wn.morphy("geese") == "goose"


def test_numbers_fragments_roundtrip_and_conflicts(tmp_path):
    from capaudit.summaries.numbers_fragments import read_numbers_fragments, write_numbers_fragment

    write_numbers_fragment(tmp_path, "embed", {"VendiCoco": {"value": 3.21, "format": "num:1", "description": "d"}})
    write_numbers_fragment(tmp_path, "detail", {"IcrMean": {"value": 0.5, "format": "num:2", "description": "d"}})
    got = read_numbers_fragments(tmp_path)
    assert got["VendiCoco"]["format"] == "num:1" and got["IcrMean"]["stage"] == "detail"
    with pytest.raises(InputError, match="letters only"):
        write_numbers_fragment(tmp_path, "x", {"Bad1": {"value": 1, "format": "int"}})
    write_numbers_fragment(tmp_path, "other", {"IcrMean": {"value": 1, "format": "int"}})
    with pytest.raises(InputError, match="also defined"):
        read_numbers_fragments(tmp_path)
