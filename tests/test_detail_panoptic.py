"""COCO panoptic grounding (things+stuff ICR) on a synthetic, format-exact panoptic set, the reviewed
stuff lexicon, and the ICR naming (things-only for instance masks)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capaudit.cli import main
from capaudit.detail.graph import SceneGraph
from capaudit.detail.grounding import CocoGrounding, grounding_spec, icr_name, parse_grounding_specs
from capaudit.detail.metrics import icr
from capaudit.detail.panoptic import (PanopticGrounding, STUFF_LEXICON, merge_stuff_lexicon, panoptic_classes,
                                      panoptic_lexicon, split_spec)
from capaudit.errors import InputError
from capaudit.lexicons import coco_lexicon, load_noun_lexicon

from _detail_data import H, PANOPTIC_SEGMENTS, W, panoptic_png, rect, two_image_instances, write_panoptic

AREA = W * H


@pytest.fixture()
def pan(tmp_path):
    return PanopticGrounding(write_panoptic(tmp_path))


def cover(g, *names):
    return icr(SceneGraph.build(list(names)), g.ground("a.jpg"))


# -- loader and ICR ---------------------------------------------------------------------------------
def test_png_ids_decode_to_the_painted_segments(pan):
    im = pan.ground("a.jpg")
    assert (im.width, im.height) == (W, H) and im.icr_kind == "things+stuff"
    sky = np.zeros((H, W), dtype=bool)
    sky[0:3, :] = True
    assert np.array_equal(im.class_mask("sky-other-merged"), sky)  # segment id 300: R 44, G 1
    assert im.class_mask("dog").sum() == 25 and im.class_mask("dog")[3:8, 0:5].all()  # id 70000: B channel
    assert not im.class_mask("person")[8].any()  # row 8 is void


def test_things_and_stuff_icr(pan):
    assert cover(pan, "sky", "dog") == pytest.approx((60 + 25) / AREA)
    assert cover(pan, "clouds") == pytest.approx(60 / AREA)  # synonym of sky
    assert cover(pan, "lawn") == cover(pan, "grass") == pytest.approx(20 / AREA)
    assert cover(pan, "man") == pytest.approx(25 / AREA)  # a crowd segment grounds like any other
    assert cover(pan, "wall") == pytest.approx(50 / AREA)  # generic wall: every wall class
    assert cover(pan, "brick wall") == pytest.approx(25 / AREA)  # the brick one only
    assert cover(pan, "sky", "clouds", "dog", "puppy") == pytest.approx(85 / AREA)  # each pixel once
    assert cover(pan, "sky", "grass", "dog", "person", "wall") == pytest.approx(180 / AREA)  # void never covered
    assert cover(pan, "cat", "road") == 0.0  # mentioned, not in the image


def test_image_without_annotation_is_unavailable_not_zero(pan, tmp_path):
    assert pan.ground("b.jpg") is None and pan.unannotated == 1  # listed in images, no annotation
    assert pan.ground("zzz.jpg") is None and pan.ground(None) is None
    assert pan.ground(1) is pan.ground("/imgs/a.jpg") is pan.ground("a.jpg")
    assert icr(SceneGraph.build(["sky"]), pan.ground("b.jpg")) is None
    assert "1 of 2 images annotated" in pan.label


def test_spec_forms(tmp_path):
    js = write_panoptic(tmp_path)
    assert split_spec(str(js)) == (js, tmp_path / "panoptic_val2017")
    assert split_spec(f"{js}:{tmp_path / 'pngs'}") == (js, tmp_path / "pngs")
    g = parse_grounding_specs([f"coco-panoptic:{js}"])
    assert isinstance(g, PanopticGrounding) and g.icr_kind == "things+stuff"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "panoptic_val2017" / "a.png").rename(tmp_path / "elsewhere" / "a.png")
    g = parse_grounding_specs([f"coco-panoptic:{js}:{tmp_path / 'elsewhere'}"])
    assert g.ground("a.jpg").union_area(["sky"]) == 60


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(InputError, match="not found") as e:
        grounding_spec(f"coco-panoptic:{tmp_path / 'nope.json'}")
    assert "nope.json" in str(e.value)
    js = write_panoptic(tmp_path / "nopng", write_png=False)
    with pytest.raises(InputError, match="PNG of image 1 not found") as e:
        PanopticGrounding(js)
    assert "a.png" in str(e.value)
    js = write_panoptic(tmp_path / "badcat", extra_segments_info=[{"id": 9, "category_id": 999, "iscrowd": 0}])
    with pytest.raises(InputError, match="category_id 999 is not in categories") as e:
        PanopticGrounding(js)
    assert "badcat" in str(e.value)
    js = tmp_path / "nodir.json"
    js.write_text("{}")
    with pytest.raises(InputError, match="PNG folder not found"):
        grounding_spec(f"coco-panoptic:{js}")
    with pytest.raises(InputError, match="coco-stuff grounding is not supported"):
        grounding_spec("coco-stuff:stuff_val2017.json")


def test_png_errors_name_the_png(tmp_path):
    extra = {**PANOPTIC_SEGMENTS, 11: (1, 0, (0, 8, 2, 9))}  # painted into the PNG, not listed in the JSON
    js = write_panoptic(tmp_path / "unlisted")
    from PIL import Image

    Image.fromarray(panoptic_png(extra), mode="RGB").save(tmp_path / "unlisted" / "panoptic_val2017" / "a.png")
    with pytest.raises(InputError, match="segment id 11 is in the PNG but not in segments_info") as e:
        PanopticGrounding(js).ground("a.jpg").union_area(["sky"])
    assert "a.png" in str(e.value)
    js = write_panoptic(tmp_path / "size", png_size=(W + 1, H))
    with pytest.raises(InputError, match="PNG is 21x10, the JSON says 20x10"):
        PanopticGrounding(js).ground("a.jpg").union_area(["sky"])


# -- ICR naming -------------------------------------------------------------------------------------
def test_icr_kinds_are_named(tmp_path):
    p = tmp_path / "inst.json"
    p.write_text(json.dumps(two_image_instances(rect(12, 6, 20, 10))))
    inst = CocoGrounding.from_files([p])
    assert inst.icr_kind == inst.ground("a.jpg").icr_kind == "things-only"
    assert icr_name(["things-only"]) == "things-only ICR"
    assert icr_name(["things+stuff", None]) == "things+stuff ICR"
    assert icr_name(["things-only", "things+stuff"]).startswith("mixed ICR")
    assert icr_name([]) .startswith("ICR (unavailable")
    # instance masks never ground stuff: "sky" grounds nothing, whatever the image shows
    assert inst.ground("a.jpg").union_area(["sky", "grass", "wall"]) == 0


def test_score_cli_with_panoptic_grounding(tmp_path):
    js = write_panoptic(tmp_path)
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "c1", "image": "a.jpg", "caption": "A dog under a blue sky."},
        {"id": "c2", "image": "b.jpg", "caption": "A dog under a blue sky."}]))
    out = tmp_path / "s.jsonl"
    assert main(["detail", "score", "--input", str(caps), "--grounding", f"coco-panoptic:{js}", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows[0]["icr"] == pytest.approx((25 + 60) / AREA) and rows[0]["icr_kind"] == "things+stuff"
    assert rows[1]["icr"] is None and rows[1]["icr_status"] == "unavailable" and rows[1]["icr_kind"] is None
    man = json.loads((tmp_path / "s.manifest.json").read_text())
    assert man["icr"] == "things+stuff ICR" and man["counts"]["icr_unavailable"] == 1


# -- the reviewed stuff lexicon -----------------------------------------------------------------------
def test_stuff_lexicon_maps_stuff_and_keeps_things():
    lex = panoptic_lexicon()
    assert panoptic_classes(lex, lex.category_of("blue sky")) == ("sky-other-merged",)
    assert panoptic_classes(lex, lex.category_of("clouds")) == ("sky-other-merged",)
    assert set(panoptic_classes(lex, lex.category_of("walls"))) == {"wall-brick", "wall-stone", "wall-tile",
                                                                    "wall-wood", "wall-other-merged"}
    assert panoptic_classes(lex, lex.category_of("green grass")) == ("grass-merged",)
    assert lex.category_of("table") == "dining table"  # things keep their terms
    assert panoptic_classes(lex, lex.category_of("coffee table")) == ("table-merged",)
    assert panoptic_classes(lex, lex.category_of("puppies")) == ("dog",)  # a thing grounds itself
    assert lex.category_of("ground") is None  # no single class: left out


def test_stuff_lexicon_covers_every_panoptic_stuff_class():
    from capaudit.data.registry import DataError, fetch

    try:
        cats = json.loads(fetch("class_lists", "coco_panoptic/panoptic_coco_categories.json", download=False)
                          .read_text(encoding="utf-8"))
    except DataError as exc:
        pytest.skip(f"class list not available: {exc}")
    stuff = {c["name"] for c in cats if not c["isthing"]}
    things = {c["name"] for c in cats if c["isthing"]}
    assert len(stuff) == 53 and things == set(coco_lexicon().categories)
    lex = load_noun_lexicon(STUFF_LEXICON)
    listed = {c for e in lex.categories.values() for c in e["panoptic"]}
    assert listed == stuff  # every stuff class reached, nothing else listed


def test_stuff_lexicon_conflict_is_an_error(tmp_path):
    p = tmp_path / "stuff.yaml"
    p.write_text("version: 1\ncategories:\n  - {name: desk, panoptic: [table-merged], terms: [table]}\n")
    with pytest.raises(InputError, match="'table' is already a term of thing category 'dining table'") as e:
        merge_stuff_lexicon(coco_lexicon(), load_noun_lexicon(p), p)
    assert "stuff.yaml" in str(e.value)
    p.write_text("version: 1\ncategories:\n  - {name: sky, terms: [sky]}\n")
    with pytest.raises(InputError, match="'panoptic' list"):
        merge_stuff_lexicon(coco_lexicon(), load_noun_lexicon(p), p)


def test_sharded_score_with_panoptic_equals_single_process(tmp_path):
    js = write_panoptic(tmp_path)
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps({"id": f"c{i}", "image": im, "caption": c}) + "\n" for i, (im, c) in enumerate(
        [("a.jpg", "A dog on the grass."), ("b.jpg", "A wall."), ("a.jpg", "A man by a brick wall under the sky.")])))
    g = ["--grounding", f"coco-panoptic:{js}"]
    assert main(["detail", "score", "--input", str(caps), *g, "--out", str(tmp_path / "one.jsonl")]) == 0
    assert main(["detail", "score", "--input", str(caps), *g, "--shards", "2", "--out", str(tmp_path / "two.jsonl")]) == 0
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    man = json.loads((tmp_path / "two.manifest.json").read_text())
    assert man["icr"] == "things+stuff ICR" and man["relation_ends"] == "subject"
