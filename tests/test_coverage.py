"""Long-tail coverage: mention counting (plurals, multi-word, longest first), the COVERAGE.json
contract with hand-checked numbers, the >=K curve, vocabularies and the nocaps class count (issue 14)."""

from __future__ import annotations

import json

import pytest

from capaudit.alttext.coverage import (CONTRACT_KEYS, CoverageCounter, at_least_curve, coverage_numbers,
                                       coverage_of_texts, hypernym_share, site_of)
from capaudit.alttext.vocab import (Vocabulary, _build, load_vocabulary, name_forms, nocaps_ood_accounting,
                                    oi_to_coco)
from capaudit.cli import main


@pytest.fixture(scope="module")
def toy() -> Vocabulary:
    return _build("toy", [(n, [n], None) for n in ("dog", "turtle", "sea turtle", "goose", "bell pepper",
                                                   "glasses", "hot dog", "Orange (fruit)")], "test")


def test_mentions_plurals_multiword_longest_first(toy):
    m = toy.matcher()
    assert m.mentions("two dogs") == ["dog"]                               # one mention, plural
    assert m.mentions("Sea turtles and a turtle") == ["sea turtle", "turtle"]   # not also "turtle" for sea turtles
    assert m.mentions("a flock of geese near a goose") == ["goose", "goose"]    # irregular plural (WordNet morphy)
    assert m.mentions("Bell peppers, a hot dog and dogs") == ["bell pepper", "hot dog", "dog"]
    assert m.mentions("reading glasses") == ["glasses"]                    # a plural class name matches as is
    assert m.mentions("an orange and oranges") == ["Orange (fruit)", "Orange (fruit)"]
    assert m.mentions("doghouse turtleneck") == []                         # whole words only
    assert toy.matcher("rules").mentions("two dogs, geese") == ["dog", "goose"]
    cactus = _build("c", [("cactus", ["cactus"], None)], "test")
    assert cactus.matcher().mentions("three cacti") == ["cactus"]        # WordNet's exception lists
    assert cactus.matcher("rules").mentions("three cacti") == []        # English plural rules alone miss it


def test_name_forms():
    assert name_forms("Ball (Object)") == ("ball",)
    assert name_forms("Kitchen & dining room table") == ("kitchen dining room table", "kitchen and dining room table")
    assert name_forms("Cutting/chopping Board") == ("cutting board", "chopping board")
    assert name_forms("aerosol_can") == ("aerosol can",)


def test_coverage_numbers_hand_checked(toy):
    texts = ["two dogs and a turtle", "a dog", "sea turtles", "", "a goose"]
    c = coverage_of_texts(texts, [toy])["toy"]
    s = c.summary()
    assert list(s) == list(CONTRACT_KEYS)
    assert s["records"] == 5 and s["classes"] == 8 and s["instances_total"] == 5
    assert s["per_class"] == {"dog": 2, "turtle": 1, "sea turtle": 1, "goose": 1, "bell pepper": 0, "glasses": 0,
                              "hot dog": 0, "Orange (fruit)": 0}
    # counts sorted: 0 0 0 0 1 1 1 2 -> median (0 + 1) / 2 = 0.5; per 1M records: 0.5 / 5 * 1e6 = 100,000
    assert s["median_per_class"] == 0.5 and s["per_million_median"] == pytest.approx(100_000)
    # per 1M: dog 400,000, others 200,000 -> 4 classes >= K for every contract K
    assert s["classes_at_least"] == {"1": 4, "10": 4, "100": 4, "1000": 4, "10000": 4}
    # words: 5 + 2 + 2 + 0 + 2 = 11 tokens; types: two dogs and a turtle dog sea turtles goose = 9
    assert s["avg_words"] == pytest.approx(11 / 5) and s["token_type_ratio"] == pytest.approx(11 / 9)


def test_at_least_curve_and_merge(toy):
    pc = {"a": 0, "b": 1, "c": 10, "d": 100}
    # 1,000 records: per 1M = 0, 1000, 10000, 100000
    assert at_least_curve(pc, 1000, (1, 1000, 1001, 10000, 100000, 100001)) == \
        [[1, 3], [1000, 3], [1001, 2], [10000, 2], [100000, 1], [100001, 0]]
    assert coverage_numbers(pc, 1000)["classes_at_least"] == {"1": 3, "10": 3, "100": 3, "1000": 3, "10000": 2}
    a = CoverageCounter(toy).update(["two dogs", ("a goose", "http://www.x.com/1.jpg")])
    b = CoverageCounter(toy).update(["a dog"])
    whole = CoverageCounter(toy).update(["two dogs", ("a goose", "http://www.x.com/1.jpg"), "a dog"])
    assert a.merge(b).summary(detail=True) == whole.summary(detail=True)


def test_site_of_and_hypernym_share():
    assert site_of("https://www.Example.co.uk/a/b.jpg") == ("example.co.uk", "example.co.uk")
    assert site_of("http://i1.wp.com/x.jpg") == ("i1.wp.com", "wp.com")
    assert site_of("cdn.shop.example.com/x.png") == ("cdn.shop.example.com", "example.com")
    assert site_of("") == (None, None)
    h = hypernym_share(["painting by artist", "a dog", "actor and person"], ["artist", "actor", "person"])
    assert h["share_with_hypernym"] == pytest.approx(2 / 3) and h["counts"] == {"artist": 1, "actor": 1, "person": 1}


def test_builtin_vocabularies_and_nocaps_count():
    assert len(load_vocabulary("lvis")) == 1203
    assert {g: len(n) for g, n in load_vocabulary("lvis").groups().items()} == {"c": 461, "f": 405, "r": 337}
    assert len(load_vocabulary("objects365")) == 365
    mapping = oi_to_coco()
    assert len(set(mapping.values())) == 80 and len(mapping) == 90        # every COCO class mapped
    assert mapping["Fixed-wing aircraft"] == "airplane" and mapping["Doughnut"] == "donut"
    ood = load_vocabulary("nocaps_ood")
    assert len(ood) == 511 and "Sea turtle" in ood.names and "Dog" not in ood.names and "Mouse" in ood.names
    acct = nocaps_ood_accounting()
    assert acct["open_images"] == 601 and acct["nocaps_ood"] == 511 and acct["study"] == 394
    assert acct["after_superclasses"] < acct["after_extra_in_domain"] < acct["nocaps_ood"]


def test_cli_coverage_contract(tmp_path):
    vocab = tmp_path / "VOCAB.txt"
    vocab.write_text("# classes\ndog\nsea turtle\nturtle\n\n", encoding="utf-8")
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"caption": c, "url": "http://a.org/x.jpg"}) + "\n"
                           for c in ["Two dogs", "A sea turtle and dogs", "A cat"]), encoding="utf-8")
    out = tmp_path / "COVERAGE.json"
    assert main(["coverage", "--input", str(src), "--text-field", "caption", "--vocabulary", str(vocab),
                 "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert list(d) == list(CONTRACT_KEYS)
    assert d["per_class"] == {"dog": 2, "sea turtle": 1, "turtle": 0} and d["instances_total"] == 3
    assert d["median_per_class"] == 1.0 and d["per_million_median"] == pytest.approx(1e6 / 3)
    assert d["classes_at_least"]["10000"] == 2
    assert main(["coverage", "--input", str(src), "--text-field", "caption", "--vocabulary", str(vocab),
                 "--out", str(out), "--detail", "--url-field", "url"]) == 0
    d = json.loads(out.read_text())
    assert d["domains"]["top_sites"][0][:2] == ["a.org", 3] and d["curve"][0] == [1, 2]
    assert main(["coverage", "--input", str(src), "--text-field", "caption", "--vocabulary", "nope",
                 "--out", str(out)]) == 1


def test_cli_coverage_reads_key_to_captions_json(tmp_path, capsys):
    """A JSON {key: caption | [captions]} (the Karpathy layout): each caption is one record."""
    vocab = tmp_path / "VOCAB.txt"
    vocab.write_text("dog\ncat\n", encoding="utf-8")
    src = tmp_path / "caps.json"
    src.write_text(json.dumps({"a.jpg": ["Two dogs on a bench", "A dog", "  "], "b.jpg": "A cat and a dog",
                               "c.jpg": []}), encoding="utf-8")
    out = tmp_path / "COVERAGE.json"
    assert main(["coverage", "--input", str(src), "--vocabulary", str(vocab), "--out", str(out),
                 "--lemmatiser", "rules"]) == 0
    d = json.loads(out.read_text())
    assert d["records"] == 3 and d["per_class"] == {"dog": 3, "cat": 1}      # blank caption skipped
    # naming a field on this layout, or omitting it on another, is one clear error
    capsys.readouterr()
    assert main(["coverage", "--input", str(src), "--text-field", "caption", "--vocabulary", str(vocab),
                 "--out", str(tmp_path / "x.json")]) == 1
    assert "Karpathy" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"caption": "a dog"}) + "\n", encoding="utf-8")
    assert main(["coverage", "--input", str(rows), "--vocabulary", str(vocab), "--out", str(out)]) == 1
    assert "--text-field" in capsys.readouterr().err


def test_cli_coverage_on_the_registry_karpathy_file(tmp_path, data_dir):
    """The data registry's Karpathy test captions: every caption is a record."""
    src = data_dir / "coco_karpathy_captions" / "test_captions.json"
    captions = [c for v in json.loads(src.read_text(encoding="utf-8")).values() for c in v if c.strip()]
    out = tmp_path / "COVERAGE.json"
    assert main(["coverage", "--input", str(src), "--vocabulary", "coco80", "--out", str(out),
                 "--lemmatiser", "rules"]) == 0
    d = json.loads(out.read_text())
    assert d["records"] == len(captions) and d["classes"] == 80
    direct = coverage_of_texts(captions, [load_vocabulary("coco80")], "rules")["coco80"].per_class()
    assert d["per_class"] == direct and d["per_class"]["dog"] > 0


def test_cli_coverage_help_names_the_layouts(capsys):
    with pytest.raises(SystemExit):
        main(["coverage", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{key: caption or [captions]}" in text and "Karpathy" in text and "JSONL" in text
