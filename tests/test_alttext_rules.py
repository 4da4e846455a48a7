"""Each alt-text filter rule on hand-made rows, kept and dropped (issue 14, "Tests and figures").

Rules that need no spaCy model are tested here; spaCy/WordNet rules are in test_alttext_nlp.py.
"""

from __future__ import annotations

import pytest

from capaudit.alttext.blocks import (CHANGED, DROP, KEEP, UNCHECKED, AdultWords, Capitalisation, Context,
                                     DigitSubstitution, English, ImageAspectRatio, ImageFormat,
                                     ImageMinSide, ImageTextOverlap, Item, RareWords, Sentiment, UniqueWordRatio,
                                     WordCount, WordRepetition, build_block, replace_spans, tidy)
from capaudit.errors import InputError


def item(text: str, **row) -> Item:
    return Item(0, {"text": text, **row}, "test: row 1", text, text)


def outcomes(block, *items):
    return block.apply(list(items), Context())


def test_image_format_from_field_url_and_missing():
    b = ImageFormat()
    assert outcomes(b, item("x", format="JPEG"), item("x", mime_type="image/jpeg"), item("x", format="png")) == [KEEP, KEEP, DROP]
    assert outcomes(b, item("x", url="http://a.com/b/c.JPG?w=3"), item("x", URL="http://a.com/c.png"),
                    item("x", url="http://a.com/image?id=3"), item("x")) == [KEEP, DROP, UNCHECKED, UNCHECKED]
    assert outcomes(ImageFormat(url_extension=False), item("x", url="http://a.com/c.png")) == [UNCHECKED]


def test_image_min_side_is_strict_and_aspect_ratio_inclusive():
    b = ImageMinSide(min_side=400)
    assert outcomes(b, item("x", width=640, height=401), item("x", width=640, height=400),
                    item("x", WIDTH="800", HEIGHT="600"), item("x", width=None, height=3)) == [KEEP, DROP, KEEP, UNCHECKED]
    r = ImageAspectRatio(max_ratio=2.0)
    assert outcomes(r, item("x", width=800, height=400), item("x", width=801, height=400),
                    item("x", width=400, height=1000)) == [KEEP, DROP, DROP]
    assert outcomes(ImageAspectRatio(max_ratio=2.5), item("x", width=400, height=1000)) == [KEEP]


def test_word_count_range_uses_lexical_units():
    b = WordCount(min_words=3, max_words=5)
    assert outcomes(b, item("a dog"), item("a dog runs"), item("a dog's ball, red."), item("one two three four five six")) \
        == [DROP, KEEP, KEEP, DROP]
    with pytest.raises(InputError):
        WordCount(min_words=5, max_words=3)


def test_capitalisation_first_word_and_ratio():
    b = Capitalisation(max_ratio=0.5)
    assert outcomes(b, item("A dog runs on the beach"),            # 1/6 capitalised
                    item("a dog runs on the beach"),                # first word lower
                    item("Vintage Leather Handbag Brown"),          # 4/4
                    item("Harrison Ford and Calista Flockhart attend the premiere"),  # 4/8 = 0.5
                    item("3D printer on a desk"),                   # first letter of "3D" is upper
                    item("123 456")) == [KEEP, DROP, DROP, KEEP, KEEP, DROP]


def test_unique_word_ratio():
    b = UniqueWordRatio(min_ratio=0.7)
    # 7 words, 6 distinct = 0.857; "dog dog dog cat" 2/4 = 0.5
    assert outcomes(b, item("the dog chased the ball in snow"), item("dog dog dog cat"), item("...")) == [KEEP, DROP, DROP]


def test_word_repetition_is_the_share_of_repeated_words():
    # CC12M Sec. 3: max fraction of word repetition 0.2; a word used once is no repetition
    b = WordRepetition(max_fraction=0.2)
    assert b.fraction("Red apple on table") == 0.0                  # 4 words, none repeated
    assert b.fraction("dog dog dog cat") == 2 / 4
    assert b.fraction("a dog and a cat") == 1 / 5                    # boundary: 0.2 is allowed
    assert b.fraction("a dog and a cat on a sofa") == 2 / 8
    assert b.fraction("...") is None
    assert outcomes(b, item("Red apple on table"), item("Tavern Brawl by velinov"), item("a dog and a cat"),
                    item("a dog and a cat on a sofa"), item("dog dog dog cat"), item("...")) == [
        KEEP, KEEP, KEEP, DROP, DROP, DROP]


def test_word_repetition_stop_word_option_is_off_by_default():
    opt = WordRepetition(max_fraction=0.2, ignore_stop_words=True)
    assert opt.fraction("a dog and a cat on a sofa") == 0.0          # only "a" repeats
    assert outcomes(opt, item("a dog and a cat on a sofa"), item("dog dog cat")) == [KEEP, DROP]
    assert WordRepetition().ignore_stop_words is False
    with pytest.raises(InputError, match="max_fraction"):
        WordRepetition(max_fraction=1.5)


def test_cc12m_word_repetition_keeps_short_captions():
    # the shipped cc12m block: every 3..4-word caption without a repeated word survives
    from capaudit.alttext.funnel import build_pipeline

    block = next(b for b in build_pipeline("cc12m").blocks if b.type == "word_repetition")
    short = ["Red apple on table", "Tavern Brawl by velinov", "Vintage leather handbag", "A cat sleeping"]
    assert outcomes(block, *[item(t) for t in short]) == [KEEP] * 4
    assert outcomes(block, item("sale sale sale now")) == [DROP]


def test_adult_words_singular_plural_and_phrases():
    b = AdultWords()
    assert outcomes(b, item("Porn stars at the party")) == [DROP]
    assert outcomes(b, item("A sexy dress")) == [DROP]
    assert outcomes(b, item("Chicken breast on a plate"), item("a cock crowing at dawn")) == [KEEP, KEEP]
    custom = AdultWords(terms=["sex toy"], extra_terms=["foo"])
    assert outcomes(custom, item("two sex toys"), item("sex education"), item("a foo bar")) == [DROP, KEEP, DROP]


def test_sentiment_threshold():
    b = Sentiment(max_abs_compound=0.9)
    assert outcomes(b, item("A dog sits on the grass"),
                    item("The best most wonderful amazing beautiful happy perfect day ever, I love it!"),
                    item("Horrible, disgusting, awful, terrible, hateful disaster and the worst death")) == [KEEP, DROP, DROP]


def test_english_langid():
    b = English(min_prob=0.5)
    assert outcomes(b, item("A dog runs on the beach with a red ball"), item("Chaussures de sport pour femme en cuir"),
                    item("Schöne Landschaft mit Bergen und einem See")) == [KEEP, DROP, DROP]
    assert b.backend.startswith("langid ")


def test_rare_words_two_pass_exact_and_hashed():
    texts = ["a red dog", "a red cat", "a red dog", "a blue zebra"] + ["a red dog"] * 3
    b = RareWords(min_count=3)
    for t in texts:
        b.observe(t)
    # counts: a 7, red 6, dog 5, cat 1, blue 1, zebra 1
    assert b.count("dog") == 5 and b.count("cat") == 1
    assert outcomes(b, item("a red dog"), item("a red cat"), item("a blue zebra")) == [KEEP, DROP, DROP]
    h = RareWords(min_count=3, hash_buckets=1 << 16)
    for t in texts:
        h.observe(t)
    assert h.count("dog") >= 5 and h.count("red") >= 6
    assert outcomes(h, item("a red dog")) == [KEEP]
    # digits are not checked: "model 3000" passes when only "model" is frequent
    d = RareWords(min_count=2)
    for t in ["model 3000", "model 4000"]:
        d.observe(t)
    assert outcomes(d, item("model 3000")) == [KEEP]
    assert outcomes(RareWords(min_count=2, ignore_digits=False), item("model 3000")) == [DROP]


def test_image_text_overlap_with_field_tagger_and_coco_mini():
    b = ImageTextOverlap(tagger="field", tagger_args={"field": "tags"})
    assert outcomes(b, item("Two dogs playing in a park", tags=["dog", "grass"]),
                    item("A sunset over the sea", tags="dog, frisbee"),
                    item("A hot dog stand", tags=["hot dog"]),
                    item("no tags here")) == [KEEP, DROP, KEEP, UNCHECKED]
    assert outcomes(ImageTextOverlap(tagger="field", on_missing="drop"), item("x y z")) == [DROP]
    coco = ImageTextOverlap()  # COCO-MINI annotations of 000000000139.jpg include person, tv, chair, ...
    assert outcomes(coco, item("A living room with a television and chairs", image="000000000139.jpg"),
                    item("A bowl of soup and a spoon", image="000000000139.jpg"),
                    item("A living room", image="not_in_coco_mini.jpg")) == [KEEP, DROP, UNCHECKED]
    assert "coco_mini_annotations" in coco.backend and "offline" in coco.backend


def test_digit_substitution_and_text_helpers():
    b = DigitSubstitution()
    it = item("Route 66 in 1999")
    assert outcomes(b, it, item("no digits")) == [CHANGED, KEEP]
    assert it.text == "Route ## in ####"
    assert replace_spans("abcdef", [(1, 3, "X"), (2, 4, "Y"), (5, 6, "")]) == "aXde"
    assert tidy(" , a dog ( ) ,, on the beach .") == "a dog, on the beach."


def test_build_block_rejects_unknown_type_and_parameter():
    with pytest.raises(InputError, match="unknown block type"):
        build_block({"block": "nope"})
    with pytest.raises(InputError, match="unknown parameter"):
        build_block({"block": "word_count", "min": 3})
    b = build_block({"block": "word_count", "name": "short", "min_words": 1, "max_words": 2, "doc": "x", "source": "y"})
    assert b.name == "short" and b.max_words == 2
