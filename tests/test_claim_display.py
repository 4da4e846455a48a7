"""The claim shown to annotators (capaudit.human.claim_display, issue 21): the unit where it is a
faithful rendering of its caption span, else the span; on real captions and the real extractor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capaudit.human.claim_display import is_faithful, shown_claim
from capaudit.lexicons import LEXICON_DIR, claim_function_words


# -- the reviewed function-word list -------------------------------------------------------------------
def test_function_words_are_reviewed_data() -> None:
    words = claim_function_words()
    lines = [l.strip() for l in (LEXICON_DIR / "claim_function_words.txt").read_text(encoding="utf-8").splitlines()
             if l.strip() and not l.startswith("#")]
    assert lines == sorted(set(lines)) and all(l == l.lower() and " " not in l for l in lines)
    assert set(lines) == words
    assert {"a", "an", "the", "their", "his", "her", "its", "is", "are", "which"} <= words
    # words that carry a claim's content never may be left out
    assert not words & {"no", "not", "without", "none", "one", "two", "both", "and", "or", "with", "of", "in", "on",
                        "near", "left", "right", "some", "all", "many", "can", "has", "have"}


# -- is_faithful ------------------------------------------------------------------------------------------
def test_is_faithful_rejects_lemma_garbling_and_dropped_words() -> None:
    assert is_faithful("pants doing trick", "pants doing a trick")
    assert not is_faithful("pant doing trick", "pants doing a trick")           # a lemma, not the caption's word
    assert not is_faithful("pair of scissor", "a pair of scissors")
    assert not is_faithful("person holding in hand", "person holding a can in their hand")   # "can" dropped
    assert is_faithful("person holding can", "person holding a can")
    assert is_faithful("man holding umbrella", "man who is holding the umbrella")
    assert not is_faithful("dog", "no dog")                                       # a negation is content
    assert not is_faithful("white dog", "brown and white dog")
    assert not is_faithful("umbrella holding man", "man holding an umbrella")     # order matters
    assert not is_faithful("pant", "pants") and is_faithful("pants", "the pants")     # whole words only
    assert is_faithful("Person holding a can", "person holding a can")           # the span itself, any case
    assert is_faithful('text "OPEN 24 HOURS"', 'a sign that reads "OPEN 24 HOURS"')
    assert is_faithful('text "open 24 hours"', '"OPEN 24 HOURS"')
    assert not is_faithful('text "OPEN 25 HOURS"', '"OPEN 24 HOURS"')
    assert is_faithful("red (about: car)", "red")                                # the "about" part is context
    assert not is_faithful("", "red car") and not is_faithful("red", "")


# -- shown_claim ------------------------------------------------------------------------------------------
def test_shown_claim_rules() -> None:
    assert shown_claim("pants doing trick", "pants doing a trick", "pants", "relation") == "pants doing trick"
    assert shown_claim("pant doing trick", "pants doing a trick", "pant", "relation") == "pants doing a trick"
    assert shown_claim("person holding in hand", "person holding a can in their hand", "person", "relation") \
        == "person holding a can in their hand"
    assert shown_claim("st. peter", "St. Peter", "st. peter", "object") == "St. Peter"   # the span's spelling
    assert shown_claim("red fire truck", " red, fire truck ", "fire truck", "attribute") == "red fire truck"
    assert shown_claim("red truck", " red, fire truck, ", "truck", "attribute") == "red, fire truck"  # trimmed span
    assert shown_claim('text "open 24 hours"', '"OPEN 24 HOURS"', "sign", "text_rendering") \
        == 'text "OPEN 24 HOURS" (about: sign)'
    # the target: named by the claim (a plural counts) -> nothing added; in the span -> the span; else "about"
    assert shown_claim("two dogs", "two dogs", "dog", "count") == "two dogs"
    assert shown_claim("two people", "Two people", "person", "count") == "Two people"
    assert shown_claim("red", "red car", "car", "attribute") == "red car"
    assert shown_claim("red", "red", "car", "attribute") == "red (about: car)"
    assert shown_claim("on", "", "table", "relation") == "on (about: table)"
    assert shown_claim("close-up", "Close-up", "scene", "camera") == "Close-up"
    assert shown_claim("soft lighting", "soft lighting", "face", "lighting") == "soft lighting"
    assert shown_claim("close-up", "", "", "camera") == "close-up"                 # no span: the unit


# -- the real extractor on real captions -------------------------------------------------------------------
@pytest.fixture(scope="module")
def extractor():
    pytest.importorskip("spacy")
    from capaudit.standins.claims_extractor import HeuristicExtractor

    return HeuristicExtractor()


def _shown(u):
    return shown_claim(u["unit"], u["span"], u["target"], u["category"])


@pytest.mark.parametrize("caption, unit, shown", [
    ("A boy with jean shirt and blue pants doing a trick with his skateboard.", "pants doing trick",
     "pants doing trick"),
    ("A gold colored pair of scissors cutting into a piece of bejeweled fabric.", "pair of scissors",
     "pair of scissors"),
    ("A dog that is sitting at a door and a person holding a can in their hand.", "person holding in hand",
     "person holding a can in their hand"),
    ("A dog that is sitting at a door and a person holding a can in their hand.", "person holding can",
     "person holding can"),
])
def test_issue_examples(extractor, caption, unit, shown) -> None:
    units = {u["unit"]: u for u in extractor.extract(caption)}
    assert unit in units, sorted(units)
    u = units[unit]
    assert u["span"] in caption and _shown(u) == shown and is_faithful(shown, u["span"])


def _windows(data_dir: Path):
    from capaudit.claims.requests import caption_window

    out = []
    for name, field, limit in (("IIW-400", "IIW", 200), ("DOCCI_Test", "DOCCI", 100)):
        with open(data_dir / "imageinwords" / name / "data.jsonl", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= limit:
                    break
                out.append(caption_window(json.loads(line)[field], 64))
    return out


def test_every_shown_claim_is_the_caption_on_real_captions(extractor, data_dir) -> None:
    """300 real captions (IIW-400, DOCCI), 64-word claims windows: every span is an exact substring
    of the window and every shown claim is faithful to its span, the span itself (an exact substring
    of the window) where the unit is not; the span stands in for a minority of units. The lemma
    units (the old display) fail the same check far more often."""
    windows = _windows(data_dir)
    assert len(windows) == 300
    n = fallback = about = lemma_unfaithful = 0
    for window, units in zip(windows, extractor.extract_many(windows)):
        lemma_units = extractor.extract_doc(extractor.nlp(window), forms="lemma")
        for u, lu in zip(units, lemma_units):
            n += 1
            assert u["span"] and u["span"] in window, (u, window)
            shown = _shown(u)
            claim = shown.split(" (about: ")[0]
            assert is_faithful(shown, u["span"]), (u, shown)
            if not is_faithful(u["unit"], u["span"]):  # the span stands in: an exact substring of the window
                assert claim == u["span"].strip(" ,;:") and claim in window, (u, shown)
                fallback += 1
            about += shown != claim
            lemma_unfaithful += not is_faithful(lu["unit"], lu["span"])
    print(f"\n{n} units, shown as their span: {fallback}, with '(about: ...)': {about}; "
          f"lemma units not faithful: {lemma_unfaithful}")
    assert n > 5000
    assert 0 < fallback < n / 2
    assert about < n / 10
    assert lemma_unfaithful > fallback  # lemmas garble what surface forms keep


def test_annotator_view_shows_the_faithful_claim(tmp_path: Path, extractor) -> None:
    """A study sampled from judged claims whose units are the heuristic extractor's: every item's
    view shows shown_claim(unit, span, target, category), faithful to the highlighted span."""
    from capaudit.human.protocol import StudyConfig
    from capaudit.human.simulate import synthetic_judged_claims
    from capaudit.human.study import Study

    rows = [json.loads(l) for l in synthetic_judged_claims(tmp_path / "synthetic.jsonl", n_images=12)
            .read_text(encoding="utf-8").splitlines()]
    per_caption = {r["caption_id"]: r for r in rows}
    out = []
    for cid, r in per_caption.items():
        for k, u in enumerate(extractor.extract(r["caption_window"])):
            start = r["caption_window"].find(u["span"])
            out.append({**r, **u, "question_id": f"{cid}:u{k:04d}", "span_offsets": [start, start + len(u["span"])]})
    jc = tmp_path / "judged_claims.jsonl"
    jc.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    study = Study.create(tmp_path / "study.sqlite", StudyConfig(
        study_id="claims", claims_per_stratum=2, require_all_strata=False, target_items=30, max_items=40))
    study.sample([jc])
    study.seal()
    people = study.invite(1)
    study.assign()
    study.open()
    session = study.login(people[0].code)
    seen = 0
    for t in session.tasks():
        it = study.item(t.item_id)
        view = session.view(t.item_id, t.phase)
        assert view.claim == shown_claim(it["unit"], it["span"], it["target"], it["category"])
        assert is_faithful(view.claim, it["span"]), (it["unit"], it["span"], view.claim)
        if t.phase == "caption":
            s, e = view.span_offsets
            assert view.caption_window[s:e] == it["span"]
        seen += 1
    assert seen >= 20
    study.close()
