from capaudit.text.lexical import WindowMode, lex_count, lex_cut_text, lex_units, whitespace_window, window


def test_units_edge_cases_of_the_spec():
    assert lex_units("close-up") == ["close", "up"]
    assert lex_units("person's") == ["person's"]
    assert lex_units("person\u2019s") == ["person", "s"]  # a curly apostrophe splits
    assert lex_units("3.5") == ["3", "5"]
    assert lex_units("blue_hair") == ["blue", "hair"]
    assert lex_units("The CAT's Toy") == ["the", "cat's", "toy"]
    assert lex_units("caf\u00e9 na\u00efve") == ["caf\u00e9", "na\u00efve"]
    assert lex_count("A close-up, 3.5 x") == 6


def test_no_silent_normalisation():
    # NFKC would turn the ligature into "fi"; the reference applies lower() only
    assert lex_units("\ufb01sh") == ["\ufb01sh"]
    assert lex_units("STRASSE Stra\u00dfe") == ["strasse", "stra\u00dfe"]


def test_three_window_rules():
    text = "  A close-up of a dog's nose.  Next"
    assert lex_cut_text(text, 3) == "A close-up"
    assert lex_cut_text("a b", 5) == "a b"
    assert window(text, 3, WindowMode.LEX_UNITS) == ["a", "close", "up"]
    assert whitespace_window(text, 3) == "A close-up of"
    assert window(text, 3, "whitespace_words") == "A close-up of"
    assert window(text, 5, WindowMode.LEX_CUT_TEXT) == "A close-up of a"
    assert window(text, 6, WindowMode.LEX_CUT_TEXT) == "A close-up of a dog's"


def test_lex_cut_keeps_a_caption_of_at_most_b_units_whole():
    import random

    from capaudit.text.lexical import LEX_RE, lex_cut_text
    from capaudit.text.truncation import lex_windows

    assert lex_cut_text("A cat.", 2) == "A cat." and lex_cut_text(" A cat. x", 2) == "A cat"
    assert lex_windows("A cat.", [2, 3, 1]) == ["A cat.", "A cat.", "A"]
    rng = random.Random(22)
    for _ in range(3000):
        text = "".join(rng.choice([" a", "b.", " ", ",", "cc ", "'", "  ", "é "]) for _ in range(rng.randint(0, 12)))
        budgets = [rng.randint(-1, 8) for _ in range(rng.randint(0, 4))]  # repeats included
        ends = [m.end() for m in LEX_RE.finditer(text)]

        def ref(b):  # spec §1.2: cut at the B-th unit's end and strip; at most B units: kept whole
            return "" if b <= 0 else text if len(ends) <= b else text[: ends[b - 1]].strip()

        assert lex_windows(text, budgets) == [ref(b) for b in budgets] == [lex_cut_text(text, b) for b in budgets]
