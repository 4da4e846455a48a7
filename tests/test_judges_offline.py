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
from typing import List, Tuple

import pytest

from capaudit.judges import offline as O
from capaudit.judges.questions import question_text


@pytest.fixture(scope="module")
def coco():
    from capaudit.data.coco import coco_mini

    return coco_mini()


def _messages(path: Path, caption_id: str, claims: List[Tuple[str, str, str]], data: bool = False) -> list:
    from capaudit.judges.prompts import user_prompt
    from capaudit.judges.requests import jpeg_data_url, vqa_schema

    qs = [{"question_id": f"{caption_id}:u{i:04d}", "category": c, "question": question_text(c, u, t)}
          for i, (c, u, t) in enumerate(claims)]
    url = jpeg_data_url(path.read_bytes()) if data else path.resolve().as_uri()
    text = user_prompt(caption_id, qs, vqa_schema([q["question_id"] for q in qs]))
    return [{"role": "system", "content": "judge"},
            {"role": "user", "content": [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}]}]


def _answers(judge, path: Path, caption_id: str, claims, data: bool = False) -> List[str]:
    out = json.loads(judge(_messages(path, caption_id, claims, data), {}))
    assert out["caption_id"] == caption_id
    return [r["answer"] for r in out["question_results"]]


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
    got = _answers(O.DEFAULT_REFCAPTION_JUDGE, p, "coco_a:coco-ann-150585", claims)
    assert got == ["yes", "yes", "uncertain", "no", "uncertain",
                   "yes", "uncertain",
                   "yes", "no", "uncertain",
                   "uncertain", "yes"]
    # the judged caption is never evidence: on 000000000139.jpg only caption 372891 ("A woman stands
    # in the dining area at the table.") says "dining area"; excluded, the claim is not found
    kitchen = coco.images[139].path
    claim = [("style", "dining area", "scene")]
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, kitchen, "coco_a:coco-ann-372891", claim) == ["uncertain"]
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, kitchen, "recap:139", claim) == ["yes"]
    train = coco.images[113488].path  # 700202: "A lone passenger watches as the train pulls away ..."
    assert _answers(O.DEFAULT_REFCAPTION_JUDGE, train, "x", [("count", "one passenger", "passenger"),
                                                               ("count", "two passengers", "passenger")]) == ["yes", "no"]
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
