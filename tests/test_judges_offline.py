"""The two offline judges on real COCO-MINI images, with hand-checked expected answers.

Hand checks (COCO-MINI annotations, boxes as x, y, w, h):

* 000000022892.jpg (500×334): one each of dog [36, 76, 253, 220], cat [238, 23, 261, 231],
  dining table [347, 229, 153, 101], potted plant, chair; no crowd region. Cat centre
  (368.5, 138.5), dog centre (162.5, 186): the dog is left of the cat (206 px > 2 % of 500),
  the cat is above the dog (47.5 px > 2 % of 334); the cat's bottom edge (254) lies inside the
  table's vertical extent and their horizontal overlap (152 px) exceeds 30 % of the table's width,
  the cat centred higher: cat on table. Captions 150585 ("A cats sits on the table with a dog
  outside."), 151554, 155688 ("... a cat sitting on a table."), 155943 ("... sliding glass door
  ..."), 159363.
* 000000113488.jpg: grayscale (subway; caption 700202 "A lone passenger watches as the train ...").
* 000000034417.jpg: donuts annotated as a crowd region.
* 000000231460.jpg: a Berlin street scene; an "ISTANBUL GRILL" shop sign (OCR reads "grill") and
  a large "Potsdamer Straße" street sign that OCR misses.
* 000000460229.jpg: a stop sign (OCR reads nothing).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import List, Optional, Tuple

import pytest

from capaudit.standins import judges as O
from capaudit.judges.questions import question_text


@pytest.fixture(scope="module")
def coco():
    from capaudit.data.coco import coco_mini

    return coco_mini()


def _messages(path: Path, caption_id: str, claims: List[Tuple[str, str, str]], data: bool = False,
              judged: Optional[str] = None, evidence: bool = False) -> list:
    from capaudit.judges.prompts import user_prompt
    from capaudit.judges.answer_schema import vqa_schema
    from capaudit.judges.requests import jpeg_data_url

    qs = [{"question_id": f"{caption_id}:u{i:04d}", "category": c, "question": question_text(c, u, t)}
          for i, (c, u, t) in enumerate(claims)]
    url = jpeg_data_url(path.read_bytes()) if data else path.resolve().as_uri()
    text = user_prompt(caption_id, qs, vqa_schema([q["question_id"] for q in qs], evidence), evidence,
                       judged_caption=judged)
    return [{"role": "system", "content": "judge"},
            {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]}]


def _results(judge, path: Path, caption_id: str, claims, data: bool = False, judged: Optional[str] = None,
             evidence: bool = False) -> List[dict]:
    from capaudit.judges.answer_schema import vqa_schema

    msgs = _messages(path, caption_id, claims, data, judged, evidence)
    ids = [f"{caption_id}:u{i:04d}" for i in range(len(claims))]
    payload = {"structured_outputs": {"json": vqa_schema(ids, evidence)}} if evidence else {}
    out = json.loads(judge(msgs, payload))
    assert out["caption_id"] == caption_id
    return out["question_results"]


def _answers(judge, path: Path, caption_id: str, claims, data: bool = False, judged: Optional[str] = None) -> List[str]:
    return [r["answer"] for r in _results(judge, path, caption_id, claims, data, judged)]


def test_helpers_by_hand() -> None:
    # box_relation: a = (0, 0, 10, 10), b = (50, 0, 10, 10) in a 100 x 100 image
    a, b = (0, 0, 10, 10), (50, 0, 10, 10)
    assert O.box_relation("left", a, b, 100, 100) is True and O.box_relation("right", a, b, 100, 100) is False
    assert O.box_relation("left", a, (1, 0, 10, 10), 100, 100) is None  # 1 px < 2 % margin
    assert O.box_relation("near", a, b, 100, 100) is None  # gap 40: above 10 % (14.1), not above 30 % (42.4) of the diagonal
    assert O.box_relation("near", a, (15, 0, 10, 10), 100, 100) is True  # gap 5 <= 14.1
    assert O.box_relation("near", a, (60, 60, 10, 10), 100, 100) is False  # gap 70.7 > 42.4
    cup, table = (40, 20, 20, 22), (20, 40, 60, 30)  # cup bottom 42 inside the table's extent
    assert O.box_relation("on", cup, table, 100, 100) is True and O.box_relation("on", table, cup, 100, 100) is None
    assert O.box_relation("on", (0, 80, 10, 10), table, 100, 100) is False  # 10 px apart horizontally
    assert O.split_relation("bus on left of car") == (["bus"], ("on", "left", "of"), "left", ["car"])
    assert O.split_relation("man riding horse") == (["man", "riding", "horse"], None, None, [])
    assert O.parse_count("two dogs") == (2, False, ["dogs"]) and O.parse_count("a pair of skis") == (2, False, ["skis"])
    assert O.parse_count("several birds") == (None, True, ["birds"]) and O.parse_count("12 eggs") == (12, False, ["eggs"])
    assert O.claimed_text_tokens('text "Main Street"') == ["main", "street"]
    assert O.claimed_text_tokens("sign reads stop") == ["stop"]
    assert O.text_rendering_answer(["stop"], ["stop"]) == ("yes", "OCR reads stop")
    assert O.text_rendering_answer(["street"], ["streat"])[0] == "yes"  # edit distance 1, 6 letters
    assert O.text_rendering_answer(["main", "street"], ["main"])[0] == "uncertain"
    assert O.text_rendering_answer(["exit"], ["open", "daily", "cafe"])[0] == "no"
    assert O.text_rendering_answer(["exit"], ["grill"])[0] == "uncertain"  # one stray word is not evidence
    assert O.text_rendering_answer([], [])[0] == "uncertain" and O.text_rendering_answer([], ["ab"])[0] == "yes"
    assert O.excluded_annotations("s:replace_obj:7:coco-ann-318722") == {318722}
    assert O.excluded_annotations("recap:139") == set()


def test_annotation_judge_rules(coco) -> None:
    p = coco.images[22892].path
    claims = [
        ("object", "cat", "cat"), ("object", "bird", "bird"), ("object", "lamp", "lamp"),
        ("count", "one dog", "dog"), ("count", "two dogs", "dog"), ("count", "several cats", "cat"),
        ("relation", "dog to left of cat", "dog"), ("relation", "cat to left of dog", "cat"),
        ("relation", "cat on table", "cat"), ("relation", "table on cat", "table"), ("relation", "cat above dog", "cat"),
        ("relation", "dog next to cat", "dog"), ("relation", "cat holding dog", "cat"), ("relation", "cat on bird", "cat"),
        ("attribute", "red cat", "cat"), ("attribute", "red bird", "bird"), ("attribute", "stuffed bear", "bear"),
        ("style", "black and white", "scene"), ("camera", "close-up", "scene"), ("lighting", "sunlight", "scene"),
    ]
    got = _answers(O.DEFAULT_ANNOTATION_JUDGE, p, "x:coco-ann-150585", claims)
    assert got == ["yes", "no", "uncertain",
                   "yes", "no", "uncertain",
                   "yes", "no", "yes", "uncertain", "yes", "yes", "uncertain", "no",
                   "uncertain", "no", "no",
                   "no", "uncertain", "uncertain"]


def test_annotation_judge_grayscale_crowd_and_data_urls(coco) -> None:
    gray = coco.images[113488].path
    assert _answers(O.DEFAULT_ANNOTATION_JUDGE, gray, "g", [("style", "black and white photo", "scene"),
                                                              ("count", "one train", "train")]) == ["yes", "yes"]
    donuts = coco.images[34417].path
    assert _answers(O.DEFAULT_ANNOTATION_JUDGE, donuts, "d", [("count", "three donuts", "donut"),
                                                                ("object", "donut", "donut")]) == ["uncertain", "yes"]
    # a re-encoded JPEG data URL (no file name, new bytes) is found by its thumbnail
    assert _answers(O.DEFAULT_ANNOTATION_JUDGE, coco.images[22892].path, "x", [("object", "cat", "cat")], data=True) == ["yes"]


def test_annotation_judge_ocr_rules(coco) -> None:
    street = coco.images[231460].path
    got = _answers(O.DEFAULT_ANNOTATION_JUDGE, street, "s", [
        ("text_rendering", 'text "grill"', "sign"),            # OCR reads GRILL
        ("text_rendering", 'text "Potsdamer Strasse"', "sign"),  # visible, OCR misses it: never "no" from one word
        ("text_rendering", 'text "istanbul grill"', "sign"),    # half read
    ])
    assert got == ["yes", "uncertain", "uncertain"]
    stop = coco.images[460229].path
    assert _answers(O.DEFAULT_ANNOTATION_JUDGE, stop, "t", [("text_rendering", 'text "stop"', "sign")]) == ["uncertain"]


def test_refcaption_judge_rules(coco) -> None:
    p = coco.images[22892].path
    claims = [
        ("object", "dog", "dog"), ("object", "animal", "animal"), ("object", "puppy", "puppy"),
        ("object", "bird", "bird"), ("object", "car", "car"),
        ("attribute", "sliding door", "door"), ("attribute", "red cat", "cat"),
        # "A dog and a cat are watching the plants on the table": another object between -> not evidence
        ("relation", "cat on table", "cat"), ("relation", "cat under table", "cat"), ("relation", "dog on table", "dog"),
        ("count", "two dogs", "dog"), ("style", "window", "scene"),
    ]
    judged = "A cats sits on the table with a dog outside."  # annotation 150585 itself
    got = _answers(O.DEFAULT_REFCAPTION_JUDGE, p, "coco_a:coco-ann-150585", claims, judged=judged)
    want = ["yes", "yes", "uncertain", "no", "uncertain",
            "yes", "uncertain",
            "yes", "no", "uncertain",
            "uncertain", "yes"]
    assert got == want
    # the same caption under a plain id: left out by its text, the same answers
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, p, "coco_a:22892:0", claims, judged=judged) == want
    # the judged caption is never evidence: on 000000000139.jpg only caption 372891 ("A woman stands
    # in the dining area at the table.") says "dining area"; excluded, the claim is not found
    kitchen = coco.images[139].path
    claim = [("style", "dining area", "scene")]
    woman = "A woman stands in the dining area at the table."
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, kitchen, "coco_a:coco-ann-372891", claim, judged=woman) == ["uncertain"]
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, kitchen, "coco_a:coco-ann-372891", claim) == ["uncertain"]
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, kitchen, "recap:139", claim,
                    judged="A kitchen with a table and a woman.") == ["yes"]
    train = coco.images[113488].path  # 700202: "A lone passenger watches as the train pulls away ..."
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, train, "x", [("count", "one passenger", "passenger"),
                                                               ("count", "two passengers", "passenger")],
                    judged="A train at a station.") == ["yes", "no"]
    assert O.refers_to("puppies", "dog") and not O.refers_to("dog", "puppy") and O.refers_to("sofa", "couch")


def test_judge_errors_are_clear(tmp_path: Path) -> None:
    from PIL import Image

    Image.new("RGB", (31, 17), (1, 2, 3)).save(tmp_path / "x.png")
    with pytest.raises(ValueError, match=r"\(31x17, sha256 [0-9a-f]{12}…, x\.png\) is not in the judge's COCO index"):
        O.DEFAULT_ANNOTATION_JUDGE(_messages(tmp_path / "x.png", "c", [("object", "dog", "")]), {})
    msgs = [{"role": "user", "content": "questions=[]"}]
    with pytest.raises(ValueError, match="no image_url part"):
        O.DEFAULT_ANNOTATION_JUDGE(msgs, {})
    with pytest.raises(ValueError, match="only file:// and data:"):
        O.image_bytes_from_url("http://example.org/a.jpg")


@pytest.mark.slow
def test_offline_judges_through_capaudit_serve(coco, tmp_path: Path) -> None:
    """The stage's path: requests built in data mode, sent over HTTP to ``capaudit serve``; an image
    that is not in the index becomes a failed row naming it (HTTP 400), nothing else is lost."""
    from PIL import Image

    from capaudit.judges.questions import Question
    from capaudit.judges.requests import ImageResolver, JudgeBuildParams, build_request
    from capaudit.judges.summarize import summarize_files
    from capaudit.llm.client import run_requests
    from capaudit.llm.requests import write_requests
    from capaudit.llm.server import background_server

    Image.new("RGB", (20, 20), (9, 9, 9)).save(tmp_path / "odd.png")
    res = ImageResolver("data")
    rows = []
    for cid, path in (("a", coco.images[22892].path), ("b", coco.images[139].path), ("z", tmp_path / "odd.png")):
        url, key, _ = res.resolve(str(path))
        q = [Question(f"{cid}:u0000", "object", question_text("object", "cat", ""), "cat", "", "cat", 0)]
        rows.append(build_request(cid, "s", q, url, key, JudgeBuildParams(model=O.ANNOTATION_JUDGE, image_mode="data")))
    write_requests(tmp_path / "req.jsonl", rows)
    with background_server([O.ANNOTATION_JUDGE]) as url:
        stats = run_requests(str(tmp_path / "req.jsonl"), str(tmp_path / "resp.jsonl"), [url], O.ANNOTATION_JUDGE,
                             progress=False, handle_signals=False)
    assert (stats.answered, stats.failed) == (2, 1)
    s = summarize_files([tmp_path / "resp.jsonl"], [tmp_path / "req.jsonl"])
    assert (s.ok, s.bad) == (2, 1) and (s.surface("s").counts.yes, s.surface("s").counts.no) == (1, 1)  # 139 has no cat
    bad = s.examples["bad_response"][0]
    assert bad["caption_id"] == "z" and "HTTP 400" in bad["error"] and "not in the judge's COCO index" in bad["error"]


# --- issue 19: the judged caption is left out by its text; resources are declared ------------------
def test_refcaption_judge_leaves_out_the_judged_caption_whatever_the_id(coco) -> None:
    """Each human caption of 20 images judged as one claim made of all its words (the fallback rule:
    yes when one reference caption holds every word). Under a plain id with the caption's text in
    the request, the answers equal those under a ``coco-ann-<id>`` id; were the judged caption
    evidence (the text of another caption sent instead), every claim would be found: all yes."""
    ids = sorted(coco.images)[:20]
    plain, marked, normalised, leaky = [], [], [], []
    for iid in ids:
        im = coco.images[iid]
        for k, c in enumerate(im.captions):
            text = c["caption"]
            claim = [("style", " ".join(O.content_words(text)), "scene")]
            plain += _answers(O.DEFAULT_REFCAPTION_JUDGE, im.path, f"s:{iid}:{k}", claim, judged=text)
            marked += _answers(O.DEFAULT_REFCAPTION_JUDGE, im.path, f"s:coco-ann-{c['id']}", claim)
            normalised += _answers(O.DEFAULT_REFCAPTION_JUDGE, im.path, f"s:{iid}:{k}", claim,
                                   judged="  " + text.upper().rstrip(".") + " !")
            other = im.captions[(k + 1) % len(im.captions)]["caption"]
            leaky += _answers(O.DEFAULT_REFCAPTION_JUDGE, im.path, f"s:{iid}:{k}", claim, judged=other)
    assert len(plain) >= 100
    assert plain == marked == normalised
    assert set(leaky) == {"yes"}  # the judged caption itself, when not left out, supports every claim
    assert plain.count("yes") < len(plain) // 2  # left out, most full-caption claims are not found


def test_refcaption_judge_refuses_a_request_it_cannot_answer_honestly(coco) -> None:
    kitchen = coco.images[139].path
    with pytest.raises(ValueError, match="no judged_caption= line.*names no coco-ann"):
        O.DEFAULT_REFCAPTION_JUDGE(_messages(kitchen, "plain:1", [("object", "table", "")]), {})
    # the annotation judge reads no caption: plain ids are fine
    assert _answers(O.DEFAULT_ANNOTATION_JUDGE, kitchen, "plain:1", [("object", "dining table", "")]) == ["yes"]


def test_judged_caption_line_round_trip() -> None:
    from capaudit.judges.prompts import parse_judged_caption, parse_user_prompt, user_prompt

    text = user_prompt("c:1", [{"question_id": "c:1:u0000", "category": "object", "question": "q?"}], {},
                       judged_caption='A "quoted"\nline\u2028two')
    assert parse_judged_caption(text) == 'A "quoted"\nline\u2028two'
    assert parse_user_prompt(text)[0] == "c:1" and len(parse_user_prompt(text)[1]) == 1
    assert parse_judged_caption(user_prompt("c", [], {})) is None


@pytest.fixture()
def no_tesseract(monkeypatch):
    """Tesseract reported missing (as on a machine without it), for the resource table and the judge."""
    import dataclasses

    from capaudit.resources import RESOURCES

    monkeypatch.setitem(RESOURCES, "tesseract", dataclasses.replace(
        RESOURCES["tesseract"], check=lambda: (False, "tesseract not on PATH")))
    O._ocr_missing.cache_clear()
    yield
    O._ocr_missing.cache_clear()


def test_annotation_judge_without_tesseract_says_so(coco, no_tesseract) -> None:
    street = coco.images[231460].path
    res = _results(O.DEFAULT_ANNOTATION_JUDGE, street, "s", [("text_rendering", 'text "grill"', "sign"),
                                                               ("object", "car", "car")], evidence=True)
    assert [r["answer"] for r in res] == ["uncertain", "yes"]
    assert res[0]["evidence"] == "OCR unavailable (tesseract not installed: tesseract not on PATH)"


def test_backends_declare_their_resources(monkeypatch, no_tesseract) -> None:
    import dataclasses

    from capaudit.llm.backends import check_backends
    from capaudit.resources import RESOURCES, ResourceMissing

    notes = check_backends([O.ANNOTATION_JUDGE, O.REFCAPTION_JUDGE])
    assert len(notes) == 1 and notes[0].startswith(f"{O.ANNOTATION_JUDGE} runs without Tesseract")
    monkeypatch.setitem(RESOURCES, "wordnet", dataclasses.replace(
        RESOURCES["wordnet"], check=lambda: (False, "/usr/share/wordnet: missing data.noun")))
    assert check_backends([O.ANNOTATION_JUDGE]) == notes  # no WordNet needed at request time
    with pytest.raises(ResourceMissing, match=f"backend {O.REFCAPTION_JUDGE}.*apt-get install"):
        check_backends([O.REFCAPTION_JUDGE])


def test_annotation_judge_needs_no_wordnet_at_request_time(coco, tmp_path: Path) -> None:
    """In a process where WordNet cannot load, the annotation judge answers every category; the
    reference-caption judge cannot (so it declares ``requires=("wordnet",)``)."""
    import os
    import subprocess
    import sys

    script = f"""
import json
from pathlib import Path
from capaudit.standins import judges as O
from capaudit.judges.prompts import user_prompt
from capaudit.judges.questions import question_text
claims = [("object", "cat", "cat"), ("count", "one dog", "dog"), ("relation", "dog to left of cat", "dog"),
          ("attribute", "red cat", "cat"), ("style", "black and white", "scene"), ("camera", "close-up", "scene")]
qs = [{{"question_id": f"c:u{{i:04d}}", "category": c, "question": question_text(c, u, t)}} for i, (c, u, t) in enumerate(claims)]
msgs = [{{"role": "user", "content": [{{"type": "text", "text": user_prompt("c", qs, {{}}, judged_caption="x")}},
        {{"type": "image_url", "image_url": {{"url": Path({str(coco.images[22892].path)!r}).resolve().as_uri()}}}}]}}]
print(json.dumps([r["answer"] for r in json.loads(O.DEFAULT_ANNOTATION_JUDGE(msgs, {{}}))["question_results"]]))
try:
    O.DEFAULT_REFCAPTION_JUDGE(msgs, {{}})
except Exception as exc:
    print(type(exc).__name__)
"""
    env = {**os.environ, "CAPAUDIT_WORDNET_DIR": str(tmp_path / "no-wordnet"), "CAPAUDIT_CACHE": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = p.stdout.strip().splitlines()
    assert json.loads(lines[0]) == ["yes", "yes", "yes", "uncertain", "no", "uncertain"]
    assert lines[1] == "WordNetUnavailable"


def test_degraded_answers_are_counted_by_judges_summarize(coco, tmp_path: Path, no_tesseract, capsys) -> None:
    """Served without Tesseract: every completion carries ``capaudit_degraded``, the response rows
    keep it, and ``judges summarize`` lists it (``input.degraded``) and says so on its line."""
    from capaudit.cli import main
    from capaudit.judges.questions import Question
    from capaudit.judges.requests import ImageResolver, JudgeBuildParams, build_request
    from capaudit.llm.client import run_requests
    from capaudit.llm.requests import write_requests
    from capaudit.llm.server import background_server

    res = ImageResolver("file")
    rows = []
    for cid, iid in (("a", 231460), ("b", 22892)):
        url, key, _ = res.resolve(str(coco.images[iid].path))
        q = [Question(f"{cid}:u0000", "text_rendering", question_text("text_rendering", 'text "grill"', ""),
                      'text "grill"', "", "", 0)]
        rows.append(build_request(cid, "s", q, url, key, JudgeBuildParams(model=O.ANNOTATION_JUDGE, evidence=True)))
    write_requests(tmp_path / "req.jsonl", rows)
    with background_server([O.ANNOTATION_JUDGE]) as url:
        stats = run_requests(str(tmp_path / "req.jsonl"), str(tmp_path / "resp.jsonl"), [url], O.ANNOTATION_JUDGE,
                             progress=False, handle_signals=False)
    assert stats.answered == 2
    resp = [json.loads(x) for x in (tmp_path / "resp.jsonl").read_text().splitlines()]
    assert all("runs without Tesseract" in r["capaudit_degraded"][0] for r in resp)
    assert {r["parsed"]["question_results"][0]["evidence"] for r in resp} == {
        "OCR unavailable (tesseract not installed: tesseract not on PATH)"}
    out = tmp_path / "judge_summary.json"
    assert main(["judges", "summarize", "--responses", str(tmp_path / "resp.jsonl"), "--requests",
                 str(tmp_path / "req.jsonl"), "--out", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert summary["input"]["degraded_responses"] == 2
    assert summary["input"]["degraded"][0]["responses"] == 2 and "Tesseract" in summary["input"]["degraded"][0]["note"]
    assert summary["surfaces"]["s"]["uncertain"] == 2  # existing fields unchanged
    assert "DEGRADED: 2 response(s)" in capsys.readouterr().err
    assert main(["judges", "cells", "--slice", "S", "--judge", f"A={tmp_path / 'resp.jsonl'}", "--requests",
                 str(tmp_path / "req.jsonl"), "--reps", "20", "--out", str(tmp_path / "cells.json")]) == 0
    assert "DEGRADED: A: 2 response(s) answered with less" in capsys.readouterr().err
