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
    text = "**Bold** text\n- item\n1. first\nThe user wants a caption; bbox_2d at [10, 20, 30, 40] overlay"
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
    samples += [pos for _, _, pos, _ in PATTERN_PROBES] + [neg for _, _, _, neg in PATTERN_PROBES]
    for s in samples:
        brute = set()
        for code, (_, pats) in CATALOG.items():
            compiled = opener_patterns() if code == "J_meta_statement" else [re.compile(p, re.M) for p in pats]
            if any(p.search(s) for p in compiled):
                brute.add(code)
        assert set(checker.codes(s)) - {"F_repetition"} == brute, s
    assert set(ALL_CODES) >= set(CATALOG)


# ---------------------------------------------------------------------------------------------
# The exact catalog of reference-spec §2.2: one positive and one negative probe per pattern
# (code, pattern index, text that this pattern matches, near-miss that no pattern of the code
# matches). Probes named by issue 16 are marked.
PATTERN_PROBES = [
    ("A_prose_coord_echo", 0, "box [12, 34, 56, 78] here", "box (12, 34, 56, 78) here"),  # issue: () not flagged
    ("A_prose_coord_echo", 0, "at [ 100 ,2000, 30 , 45 ]", "at [1, 2, 3, 4]"),  # 2-4 digits each
    ("B_text_coord_echo", 0, "TEXT: 'SALE' [1, 2, 3, 4]", "text: 'SALE' [1, 2, 3, 4]"),  # case-sensitive
    ("C_bbox_tag", 0, "a cat <bbox>", "a cat <box>"),  # issue: <box> not flagged
    ("C_bbox_tag", 1, "a cat </bbox>", "a cat <BBOX>"),
    ("C_bbox_tag", 2, "<ref>cat", "<quad>cat"),
    ("C_bbox_tag", 3, "cat</ref>", "cat</REF>"),
    ("D_markdown_leak", 0, "a **bold\nword** cat", "a **** cat"),
    ("D_markdown_leak", 1, "a cat\n- a dog", "a cat\n  - a dog"),  # no leading spaces allowed
    ("D_markdown_leak", 2, "## Header", "#hashtag"),
    ("D_markdown_leak", 3, "see [here](http://x)", "see [here] (http://x)"),
    ("E_thinking_leak", 0, "<think>", "<THINK>"),  # tags are case-sensitive
    ("E_thinking_leak", 1, "done</think> a cat", "done</ think> a cat"),
    ("E_thinking_leak", 2, "THE USER WANTS a caption", "the users want"),
    ("E_thinking_leak", 3, "Let me describe", "letme describe"),
    ("E_thinking_leak", 4, "so i need to check", "I needed to"),
    ("E_thinking_leak", 5, "I should say", "I shouldn't"),
    ("E_thinking_leak", 6, "I will describe", "I willow"),
    ("E_thinking_leak", 7, "I'll describe it", "I'll caption it"),
    ("G_meta_instruction", 0, "per the instructions, a cat", "per instruction, a cat"),
    ("G_meta_instruction", 1, "As instructed, a cat", "as instructor"),  # issue: "As instructed" flagged
    ("G_meta_instruction", 1, "as prompted: a cat", "as promptly"),
    ("G_meta_instruction", 2, "following the guidelines", "following guidelines"),
    ("G_meta_instruction", 3, "Requirement: red", "requirement red"),
    ("H_detection_meta_leak", 0, "a Bounding Box around", "a bounding-box around"),
    ("H_detection_meta_leak", 1, "the detection box shows", "the detections box"),  # issue: "detection box"
    ("H_detection_meta_leak", 2, "Confidence: 9", "confidence: high"),  # issue: "Confidence: 9" flagged
    ("H_detection_meta_leak", 2, "confidence = 0.8", "confidence of 0.8"),
    ("H_detection_meta_leak", 3, "cat detected at left", "cat detected on left"),
    ("I_overlay_meta_leak", 0, "text Overlays the sky", "over lay"),
    ("I_overlay_meta_leak", 1, "an annotation layer", "an annotation-layer"),
    ("I_overlay_meta_leak", 2, "a green rectangle", "a green square"),
    ("I_overlay_meta_leak", 3, "a labeled box", "a labelled box"),
    ("J_meta_statement", 0, "The image shows a cat", "The photograph shows a cat"),
    ("J_meta_statement", 1, "This scene captures dusk", "This image is dark"),
    ("J_meta_statement", 2, "In this photo, a cat", "In this scene, a cat"),
    ("J_meta_statement", 3, "We can see a cat", "We saw a cat"),
    ("K_qwen_bbox_echo", 0, "x bbox_2d y", "x BBOX_2D y"),
    ("K_qwen_bbox_echo", 1, '{"type" : "bbox"}', '{"type": "box"}'),
    ("L_tag_verbatim", 0, "blue_hair_girl", "blue_hair girl"),
    ("M_numbered_list_leak", 0, "cats:\n1. a cat", "cats:\n 1. a cat"),
    ("M_numbered_list_leak", 0, "12.  Two", "1.5 cats"),
    ("N_stage_header_leak", 0, "backstage 3 lights", "stage 5"),  # issue: "backstage 3" flagged
    ("N_stage_header_leak", 0, "Stage2 done", "stage fright"),
    ("N_stage_header_leak", 1, "Resolution : 1024", "resolution is 1024"),
    ("N_stage_header_leak", 2, "Caption style: short", "caption styles: short"),
]


@pytest.mark.parametrize("code,index,positive,negative", PATTERN_PROBES,
                         ids=[f"{c}-{i}-{n}" for n, (c, i, _, _) in enumerate(PATTERN_PROBES)])
def test_exact_catalog_pattern(checker, code, index, positive, negative):
    """Each pattern of the §2.2 table matches its probe; the near-miss matches no pattern of the code."""
    import re
    from capaudit.text.violations import CATALOG

    pats = CATALOG[code][1]
    assert re.search(pats[index], positive, re.MULTILINE), (code, index, positive)
    assert code in checker.codes(positive)
    assert not any(re.search(p, negative, re.MULTILINE) for p in pats), (code, negative)
    assert code not in checker.codes(negative)


def test_exact_catalog_severities_and_patterns():
    from capaudit.text.violations import CATALOG, SEVERITY

    assert SEVERITY == {
        "A_prose_coord_echo": "critical", "B_text_coord_echo": "moderate", "C_bbox_tag": "moderate",
        "D_markdown_leak": "moderate", "E_thinking_leak": "critical", "F_repetition": "severe",
        "G_meta_instruction": "low", "H_detection_meta_leak": "moderate", "I_overlay_meta_leak": "moderate",
        "J_meta_statement": "moderate", "K_qwen_bbox_echo": "moderate", "L_tag_verbatim": "low",
        "M_numbered_list_leak": "low", "N_stage_header_leak": "critical",
    }
    # pattern strings exactly as the spec table writes them (spot checks of every code's count)
    assert {c: len(p) for c, (_, p) in CATALOG.items()} == {
        "A_prose_coord_echo": 1, "B_text_coord_echo": 1, "C_bbox_tag": 4, "D_markdown_leak": 4, "E_thinking_leak": 8,
        "G_meta_instruction": 4, "H_detection_meta_leak": 4, "I_overlay_meta_leak": 4, "J_meta_statement": 4,
        "K_qwen_bbox_echo": 2, "L_tag_verbatim": 1, "M_numbered_list_leak": 1, "N_stage_header_leak": 3,
    }
    assert CATALOG["N_stage_header_leak"][1][0] == r"(?i)stage\s*[1-4]"
    assert CATALOG["D_markdown_leak"][1][0] == r"\*\*[^*]+\*\*"
    assert CATALOG["H_detection_meta_leak"][1][2] == r"(?i)confidence\s*[:=]\s*\d"


def test_first_matching_pattern_counts_a_code_once(checker):
    text = "<bbox></bbox><ref></ref> <think> let me I will"
    codes = checker.codes(text)
    assert codes.count("C_bbox_tag") == 1 and codes.count("E_thinking_leak") == 1


def test_the_joined_anchored_pattern_matches_where_one_of_them_does():
    """``any_of`` (the one-pass pre-check of the anchored patterns) matches a text at 0 exactly
    when one of the patterns does: per-pattern flags kept (case-folding characters, a MULTILINE-free
    opener option), on the probes, their upper-cased forms and random strings over the heads."""
    import random
    import re
    from capaudit.text.violations import CATALOG, any_of, opener_patterns

    for opener in (OpenerOptions(), OpenerOptions(multiline=False, verb_word_boundary=True)):
        pats = [p for p in opener_patterns(opener)]
        pats += [re.compile(p, re.M) for c, (_, ps) in CATALOG.items() if c != "J_meta_statement" for p in ps
                 if p.startswith("^")]
        joined = any_of(pats)
        assert joined is not None and len(pats) == 7
        rng = random.Random(7)
        heads = ["the image shows", "THIS PHOTO DEPICTS", "in this picture", "we can see ", "we see ", "- ", "* ",
                 "## ", "12. x", "1.x", "\u0130n this image", "\u212a", "the scene", "-x", "#", "\n- a"]
        samples = [pos for _, _, pos, _ in PATTERN_PROBES] + [neg for _, _, _, neg in PATTERN_PROBES]
        samples += [s.upper() for s in samples] + heads
        samples += ["".join(rng.choice(heads + ["a", " ", "\u0131", "\u017f", "_", "\t"]) for _ in range(3))
                    for _ in range(3000)]
        for s in samples:
            assert bool(joined.match(s)) == any(p.match(s) for p in pats), (opener, s)
    assert any_of([re.compile("x", re.ASCII)]) is None and any_of([]) is None
