"""Survey metrics on hand-checked examples, and independence from chunking/workers."""

import json
import random

import pytest

from capaudit.text.survey import LEADING_STOPWORDS, SurveyConfig, survey_captions

CAPS = [
    "The image shows a close-up of a person's dog. The dog is brown.",  # 14 units
    "A dog on a dog on a dog mat",  # 9 units, repeats "a dog on"
    "",  # skipped (empty)
    "!!!",  # loaded, zero units
    "In this picture, we see\nThe image showcases cats",  # 9 units
]
CFG = SurveyConfig(budgets=(4, 8), repeat_orders=(3, 4, 5, 6))


@pytest.fixture(scope="module")
def result():
    return survey_captions(CAPS, CFG).finalize()


def test_budget_stats(result):
    assert result["records"] == 4  # the empty string is not loaded; "!!!" is
    assert result["captions_with_units"] == 3
    assert result["avg_lex"] == pytest.approx((14 + 9 + 9) / 3)
    b4, b8 = result["budgets"]["4"], result["budgets"]["8"]
    assert b4["eligibility"] == 3 / 4 and b8["eligibility"] == 3 / 4
    assert b8["truncation_rate"] == 3 / 4
    assert b4["avg_budget_tokens"] == 4
    assert b8["avg_budget_tokens"] == 8
    assert b8["marginal_avg_token_gain"] == 1.0


def test_opener_on_lexical_window(result):
    # B=4 windows: "The image shows a", "A dog on a", "In this picture, we"
    assert result["budgets"]["4"]["opener_rate"] == pytest.approx(2 / 3)
    assert result["budgets"]["full"]["opener_rate"] == pytest.approx(2 / 3)


def test_distinct_and_rep(result):
    # B=4 unigrams: [the image shows a] [a dog on a] [in this picture we] -> 12 total, 10 distinct
    assert result["budgets"]["4"]["distinct"]["1"] == pytest.approx(10 / 12)
    # trigrams at B=4: 2 per caption, all distinct
    assert result["budgets"]["4"]["distinct"]["3"] == 1.0
    assert result["budgets"]["4"]["rep"]["3"] == 0.0
    # B=8: "a dog on a dog on a dog" repeats trigram "a dog on" -> 1 of 3 captions
    assert result["budgets"]["8"]["rep"]["3"] == pytest.approx(1 / 3)
    full = result["budgets"]["full"]
    assert full["rep"]["5"] == pytest.approx(1 / 3)  # "a dog on a dog" twice
    assert full["rep"]["6"] == 0.0


def test_content_prefix_strips_stopword_tokens(result):
    b4 = result["budgets"]["4"]
    # content prefix inside the 4-unit window: only "dog on a" survives; the others are all stopwords
    assert b4["prefix_content"]["total"] == 1
    assert b4["prefix_content_top_10"] == [("dog on a", 1)]
    assert b4["prefix_raw"]["total"] == 3
    tops = dict(result["budgets"]["full"]["prefix_content_top_10"])
    assert tops["close up of a person's"] == 1  # hyphen splits, stopwords stripped
    assert tops["showcases cats"] == 1
    assert len(LEADING_STOPWORDS) == 29


def test_top_k_prefix_mass():
    caps = ["a red car"] * 3 + ["a blue car"] * 2 + ["one green car"]
    r = survey_captions(caps, SurveyConfig(budgets=(64,), top_k=1, top_ks=(1, 2))).finalize()
    assert r["budgets"]["64"]["prefix_top_mass"]["raw"] == pytest.approx(3 / 6)
    assert r["budgets"]["64"]["prefix_raw"]["top_k_mass"]["2"] == pytest.approx(5 / 6)
    assert r["dedup"]["normalized_unique_rate"] == pytest.approx(3 / 6)
    assert r["dedup"]["duplicate_mass_rate"] == pytest.approx(5 / 6)


def test_independent_of_chunking_and_workers(data_dir):
    rows = [json.loads(l) for l in open(data_dir / "imageinwords/IIW-400/data.jsonl", encoding="utf-8")]
    caps = [r["IIW"] for r in rows] + [r.get("IIW-P5B", "") for r in rows]
    random.Random(0).shuffle(caps)
    cfg = SurveyConfig()
    one = survey_captions(caps, cfg, chunk_size=10_000).finalize()
    many = survey_captions(caps, cfg, chunk_size=37, merge_every=3).finalize()
    two = survey_captions(caps, cfg, workers=2, chunk_size=101).finalize()
    for other in (many, two):
        for b in ("16", "64", "full"):
            x, y = one["budgets"][b], other["budgets"][b]
            for key in ("distinct", "rep", "prefix_top_mass", "violation_code_rate", "ngram_top_k_mass"):
                assert x[key] == pytest.approx(y[key], rel=1e-12), (b, key)
        assert one["avg_lex"] == other["avg_lex"]


def test_matches_a_plain_python_reference(data_dir):
    """Distinct-n and rep-n against a direct Counter implementation of spec §2.4–2.5."""
    from collections import Counter

    from capaudit.text.lexical import lex_units

    data = json.load(open(data_dir / "coco_karpathy_captions/test_captions.json", encoding="utf-8"))
    caps = [c for v in list(data.values())[:400] for c in v]
    B = 16
    r = survey_captions(caps, SurveyConfig(budgets=(B,))).finalize()["budgets"][str(B)]
    grams = {n: Counter() for n in (1, 2, 3)}
    rep = {n: 0 for n in (3, 4)}
    units = 0
    for c in caps:
        t = lex_units(c.strip())[:B]
        if not t:
            continue
        units += 1
        for n in grams:
            grams[n].update(tuple(t[i:i + n]) for i in range(len(t) - n + 1))
        for n in rep:
            g = [tuple(t[i:i + n]) for i in range(len(t) - n + 1)]
            rep[n] += len(g) != len(set(g))
    for n in grams:
        assert r["distinct"][str(n)] == pytest.approx(len(grams[n]) / sum(grams[n].values()), rel=1e-15)
        top = sum(v for _, v in grams[n].most_common(100))
        assert r["ngram_top_k_mass"][str(n)] == pytest.approx(top / sum(grams[n].values()), rel=1e-15)
    for n in rep:
        assert r["rep"][str(n)] == pytest.approx(rep[n] / units, rel=1e-15)


def _reference_catalog_rates(caps, budget):
    """The reference's catalog on its survey window (spec §1.2, §2.2), written plainly: a caption of
    more than B lexical units is cut at the end of the B-th and the cut text stripped, one of at most B
    units is kept whole and unstripped; each code counts once per text (first matching pattern, with
    re.MULTILINE); rates over the texts holding a lexical unit."""
    import re
    from collections import Counter

    from capaudit.text.lexical import LEX_RE
    from capaudit.text.violations import ALL_CODES, CATALOG

    codes, violated, total = Counter(), 0, 0
    for c in caps:
        if not c.strip():
            continue
        m = list(LEX_RE.finditer(c))
        text = c if budget is None or len(m) <= budget else c[: m[budget - 1].end()].strip()
        if not LEX_RE.findall(text.lower()):
            continue
        total += 1
        found = {code for code, (_, pats) in CATALOG.items() if any(re.search(p, text, re.MULTILINE) for p in pats)}
        words = text.lower().split()
        grams = Counter(tuple(words[i:i + 5]) for i in range(len(words) - 4))
        if len(words) >= 5 and max(grams.values()) >= 10:
            found.add("F_repetition")
        codes.update(found)
        violated += bool(found)
    return {c: codes[c] / total for c in ALL_CODES}, violated / total


KEPT_WHOLE = [
    "  - indented bullet",  # at most B units, kept whole: leading spaces stay, "^[-*]\s" does not match
    " 1. item indented",  # likewise "^\d+\.\s+\w"
    "- bullet at the start",
    "1. numbered at the start",
    "Intro line\n  - indented bullet in a second line\n- plain bullet",
    "   - " + "long indented bullet " * 8,  # more than B units: cut and stripped, so the bullet matches
    "  2. " + "numbered item words " * 8,
    " The image shows a cat",  # the opener, line-start too
    "Please let me ",  # trailing space kept on a whole caption: "(?i)let me " matches
    "Please let me " + "go on with more words " * 6,
]


@pytest.mark.parametrize("budget", [4, 8, 64, None])
def test_catalog_on_kept_whole_captions_equals_the_reference(data_dir, budget):
    """Violation rates per code and violation_rate equal the reference's on probe strings and on real
    captions given with leading/trailing whitespace (a caption of at most B units kept whole)."""
    rows = [json.loads(l) for l in open(data_dir / "imageinwords/IIW-400/data.jsonl", encoding="utf-8")]
    rng = random.Random(1)
    real = []
    for r in rows[:150]:
        c = r["IIW"]
        pad = rng.choice(["", " ", "  ", "\n", "\t "])
        head = rng.choice(["", "- ", "1. ", "* ", "# "]) if rng.random() < 0.4 else ""
        real.append(pad + head + " ".join(c.split()[: rng.choice([3, 6, 12, 40, 400])]) + rng.choice(["", " ", "\n"]))
    caps = KEPT_WHOLE + real
    budgets = (4, 8, 64)
    got = survey_captions(caps, SurveyConfig(budgets=budgets)).finalize()["budgets"]
    want_codes, want_rate = _reference_catalog_rates(caps, budget)
    block = got["full" if budget is None else str(budget)]
    assert block["violation_code_rate"] == pytest.approx(want_codes, rel=1e-15, abs=0)
    assert block["violation_rate"] == pytest.approx(want_rate, rel=1e-15)


def test_kept_whole_caption_is_not_stripped():
    """Pins the definition: a caption of at most B units is its own window, unstripped, so the
    line-start patterns miss "  - indented bullet" (2 units) and " 1. item indented" (3 units); cut
    after fewer units, the window is stripped and they match."""
    cfg = SurveyConfig(budgets=(1, 2, 4))
    r = survey_captions(["  - indented bullet", " 1. item indented"], cfg).finalize()["budgets"]
    rate = {b: (r[b]["violation_code_rate"]["D_markdown_leak"], r[b]["violation_code_rate"]["M_numbered_list_leak"],
                r[b]["violation_rate"]) for b in r}
    assert rate["1"] == (0.5, 0.0, 0.5)  # "- indented" (cut, stripped); "1"
    assert rate["2"] == (0.0, 0.5, 0.5)  # "  - indented bullet" (whole); "1. item" (cut, stripped)
    assert rate["4"] == rate["full"] == (0.0, 0.0, 0.0)  # both whole, unstripped


@pytest.mark.parametrize("field", ["caption", None])  # the named field's fast path, and field detection
def test_files_reach_the_survey_as_written(tmp_path, field):
    """Read from a file (``text-stats``'s path), a caption keeps its leading whitespace, so an
    indented bullet or numbered first line is no markdown or list leak while the plain ones are;
    blank captions are still skipped and counted."""
    from capaudit.text.survey import survey_files

    rows = ["  - indented bullet", " 1. item indented", "- plain bullet", "1. numbered item", "   ", "\tThe image shows a dog"]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"caption": r}) + "\n" for r in rows))
    summ = survey_files([str(path)], SurveyConfig(budgets=(64,)), caption_field=field)
    b = summ.finalize()["budgets"]["64"]
    assert summ.records == 5 and summ.load["rows_blank_caption"] == 1
    assert b["violation_code_rate"]["D_markdown_leak"] == b["violation_code_rate"]["M_numbered_list_leak"] == 0.2
    assert b["opener_rate"] == 0.0  # "\tThe image shows": whole and unstripped, "^the image shows" misses it
