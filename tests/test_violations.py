import pytest

from capaudit.text.violations import ALL_CODES, OpenerOptions, ViolationChecker


@pytest.fixture(scope="module")
def checker():
    return ViolationChecker()


@pytest.mark.parametrize("text", [
    "The image shows a girl.", "This photo captures a dog", "The scene features trees",
    "In this picture, a cat", "We can see two dogs", "we see a man",
    "The image showcases a bowl",  # quirk: no word boundary after the verb
    "A dog.\nThe image depicts a cat",  # quirk: MULTILINE anchors every line
])
def test_opener_matches(checker, text):
    assert "J_meta_statement" in checker.codes(text)
    assert checker.is_opener(text)


@pytest.mark.parametrize("text", [
    "The photograph shows a man", "An image of a cat", "Here is a detailed description",
    "The picture is blurry", "A dog. The image shows a cat",
])
def test_opener_non_matches(checker, text):
    assert "J_meta_statement" not in checker.codes(text)


def test_quirks_can_be_switched_off():
    strict = ViolationChecker(OpenerOptions(multiline=False, verb_word_boundary=True))
    assert not strict.is_opener("The image showcases a bowl")
    assert not strict.is_opener("A dog.\nThe image depicts a cat")
    assert strict.is_opener("The image shows a bowl")


def test_other_codes_and_prefilter_consistency(checker):
    text = "**Bold** text\n- item\n1. first\nThe user wants a caption; bbox_2d at [1, 2, 3, 4] overlay"
    codes = set(checker.codes(text))
    assert {"D_markdown_leak", "E_thinking_leak", "M_numbered_list_leak", "K_qwen_bbox_echo",
            "A_prose_coord_echo", "I_overlay_meta_leak"} <= codes
    rep = " ".join(["a b c d e"] * 10)
    assert "F_repetition" in checker.codes(rep)
    assert "F_repetition" not in checker.codes(" ".join(["a b c d e"] * 2))
    # the literal pre-filter never changes a result: compare against brute force
    import re
    from capaudit.text.violations import CATALOG, opener_patterns
    samples = [text, "Une IMAGE montre", "\u0130n this image we see", "x_y_z tag", "Per instructions: go",
               "Resolution: 1024 stage 2", "<think>hmm</think>", "confidence: 0.9 bounding box"]
    for s in samples:
        brute = set()
        for code, (_, pats) in CATALOG.items():
            compiled = opener_patterns() if code == "J_meta_statement" else [re.compile(p, re.M) for p in pats]
            if any(p.search(s) for p in compiled):
                brute.add(code)
        assert set(checker.codes(s)) - {"F_repetition"} == brute, s
    assert set(ALL_CODES) >= set(CATALOG)
