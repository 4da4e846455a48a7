"""The lexical-unit tokenizer kernel equals the Python definition (``LEX_RE.findall``) on every
code point and on random strings mixing scripts, apostrophes, digits, underscores and combining
marks, with and without a unit budget; its vocabulary form numbers units by first appearance."""

from __future__ import annotations

import random
import re
from itertools import chain

import numpy as np
import pytest

from capaudit.text.lexical import LEX_PATTERN, LEX_RE
from capaudit.text.lexkernel import (PREFIX_CHARS_PER_UNIT, factorize_keys, tokenize_batch, unit_char_table,
                                     unit_keys, unit_spans, units_of)

ALL = 0x110000
UNIT_CHAR = re.compile(r"[^\W_]")  # the definition's character class, as Python's re reads it


def test_character_class_is_the_definitions_on_every_code_point():
    table = unit_char_table()
    assert table.shape == (ALL,) and table.dtype == bool
    want = np.fromiter((UNIT_CHAR.fullmatch(chr(c)) is not None for c in range(ALL)), bool, ALL)
    differ = np.flatnonzero(table != want)
    assert differ.size == 0, [hex(c) for c in differ[:10]]
    isalnum = np.fromiter(map(str.isalnum, map(chr, range(ALL))), bool, ALL)  # what the class means in Python
    assert np.array_equal(table, isalnum)
    assert 50_000 < int(table.sum()) < ALL  # letters and digits of many scripts, not everything


@pytest.mark.parametrize("frame", ["{}", "a{}b", "x'{}'y", "1{}_{}"])
def test_every_code_point_in_context_splits_as_the_regex(frame):
    """Each of the 0x110000 code points (surrogates included) in one batch, framed by unit
    characters, apostrophes and underscores: the kernel's units equal the regex's."""
    texts = [frame.replace("{}", chr(c)) for c in range(ALL)]
    got = units_of(texts)
    bad = [c for c, (g, t) in enumerate(zip(got, texts)) if g != LEX_RE.findall(t)]
    assert not bad, [hex(c) for c in bad[:10]]


PIECES = ["a", "Z", "é", "É", "ß", "İ", "ı", "Σ", "ς", "7", "٣", "²", "½", "_", "'", "''", "’", "-", " ", "\n",
          "\t", "\x00", "\u0301", "\u0308", "\u200d", "\u4e00", "\u3042", "\u0905", "\u093f", "\U0001F600",
          "\U00010400", "\U0001D7D8", "\ud800", "\udfff", "\ufeff", "ﬁ", "ǅ", ".", "!", "a'b", "don't"]


def _random_texts(seed: int, n: int, longest: int = 40) -> list:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, longest))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
def test_random_strings_equal_the_definition(seed):
    texts = _random_texts(seed, 20_000)
    assert units_of(texts) == [LEX_RE.findall(t) for t in texts]


@pytest.mark.parametrize("max_units", [0, 1, 2, 5, 64])
def test_first_units_equal_the_definition_cut(max_units):
    """The budget's prefix rule: texts longer than 7 characters a unit, some whose prefix holds
    too few units (read whole in the second pass), mixed with short ones, in one batch."""
    texts = _random_texts(10 + max_units, 5_000, longest=120)
    cut = max(max_units, 1) * PREFIX_CHARS_PER_UNIT
    texts += ["-" * (cut + 3) + " a b c d e f", " ".join(["w" * 30] * 90), "é" * (cut * 2) + " x", "a " * (cut + 9)]
    assert units_of(texts, max_units) == [LEX_RE.findall(t)[:max_units] for t in texts]
    sp = unit_spans(texts, max_units)
    assert sp.counts.tolist() == [min(len(LEX_RE.findall(t)), max_units) for t in texts]


def test_nul_inside_a_text_keeps_text_boundaries():
    texts = ["a\x00b c", "", "\x00", "d'e\x00'f", "x"]
    assert units_of(texts) == [LEX_RE.findall(t) for t in texts]


def test_units_never_cross_texts():
    texts = ["abc", "def", "'", "ghi'", "'jkl"]
    assert units_of(texts) == [["abc"], ["def"], [], ["ghi"], ["jkl"]]


@pytest.mark.parametrize("lower_units", [False, True])
def test_tokenize_batch_vocabulary(lower_units):
    texts = _random_texts(7, 10_000) + ["İstanbul ΣΊΣΥΦΟΣ", "A a À à", "DOG dog Dog"]
    lens, codes, vocab = tokenize_batch(texts, lower_units=lower_units)
    want = [[m.lower() if lower_units else m for m in LEX_RE.findall(t)] for t in texts]
    assert lens.tolist() == [len(w) for w in want]
    words = [vocab[c] for c in codes.tolist()]
    assert words == list(chain.from_iterable(want))
    first: dict = {}
    for w in words:
        first.setdefault(w, len(first))
    assert codes.tolist() == [first[w] for w in words] and len(vocab) == len(set(vocab)) == len(first)


def test_unit_keys_partition_units_exactly():
    """Equal units get equal keys and, on these texts, distinct units distinct keys (exact up to 7
    bytes; hashed beyond, so a collision would merge two units: none here)."""
    texts = _random_texts(3, 20_000) + ["abcdefgh" * k for k in range(1, 6)]
    sp = unit_spans(texts)
    ids, firsts = factorize_keys(unit_keys(sp.buf, sp.starts, sp.ends))
    units = [sp.unit(k) for k in range(sp.starts.size)]
    by_id: dict = {}
    for u, i in zip(units, ids.tolist()):
        assert by_id.setdefault(i, u) == u
    assert len(by_id) == len(set(units))
    assert all(units[f] == by_id[i] for i, f in enumerate(firsts.tolist()))


def test_the_kernel_and_the_readable_definition_share_the_pattern():
    assert LEX_PATTERN == r"[^\W_]+(?:'[^\W_]+)*"
