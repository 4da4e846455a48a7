"""ICR (Eq. 2) on constructed masks, AOD (Eq. 4) on hand-built graphs, CD (Eq. 5), Length."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capaudit.detail.graph import SceneGraph, graph_from_llm, graph_to_llm, scene_graph_schema
from capaudit.detail.grounding import (ChainGrounding, CocoGrounding, SegmentationGrounding, instance_rle,
                                       parse_grounding_specs)
from capaudit.detail.metrics import (DEFAULT_RELATION_ENDS, RELATION_ENDS, RELATION_ENDS_LABELS, aod, caption_length, cd,
                                     icr, object_detail, relation_ends_label, score_graph)
from capaudit.errors import InputError
from capaudit.lexicons import load_noun_lexicon

from _detail_data import H, W, two_image_instances


def dense(x0, y0, x1, y1):
    m = np.zeros((H, W), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


@pytest.fixture()
def lexicon(tmp_path):
    p = tmp_path / "lex.yaml"
    p.write_text("version: 1\ncategories:\n"
                 "  - {name: dog, terms: [dog, puppy]}\n"
                 "  - {name: person, terms: [person, man, woman]}\n"
                 "  - {name: cat, terms: [cat]}\n", encoding="utf-8")
    return load_noun_lexicon(p)


@pytest.fixture()
def instances(tmp_path):
    from pycocotools import mask as m

    cat_rle = m.encode(np.asfortranarray(dense(12, 6, 20, 10).astype(np.uint8)))
    cat_rle["counts"] = cat_rle["counts"].decode("ascii")  # compressed RLE as stored in JSON
    data = two_image_instances(cat_rle)
    p = tmp_path / "instances.json"
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


@pytest.fixture()
def grounding(instances, lexicon):
    return CocoGrounding.from_files([instances], lexicon)


def g(*objects):
    return SceneGraph.build(objects)


def test_constructed_masks_rasterise_as_drawn(grounding):
    im = grounding.ground("a.jpg")
    assert (im.width, im.height) == (W, H)
    assert np.array_equal(im.category_mask("cat"), dense(12, 6, 20, 10))
    person = dense(16, 0, 20, 5) | dense(8, 5, 12, 10)
    assert np.array_equal(im.category_mask("person"), person)
    assert im.category_area("dog") == 120 and im.category_area("person") == 40 and im.category_area("cat") == 32
    assert im.crowd == {"person": 1} and im.instances == {"dog": 2, "person": 2, "cat": 1}


def test_icr_counts_overlap_once(grounding):
    im = grounding.ground("a.jpg")
    assert icr(g("dog"), im) == pytest.approx(120 / 200)  # two overlapping dog masks: 100 + 40 - 20
    # person (crowd 20 + polygon 20) with the dogs: 120 + 40 - 10 overlap
    assert icr(g("man", "dog"), im) == pytest.approx(150 / 200)
    assert icr(g("cat", "dog", "woman"), im) == pytest.approx(182 / 200)


def test_icr_crowd_regions_ground(grounding):
    im = grounding.ground("a.jpg")
    assert icr(g("person"), im) == pytest.approx(40 / 200)  # 20 px of the 40 are the crowd region
    assert im.grounds("woman") and not im.grounds("car")


def test_icr_object_named_twice_and_synonyms_counted_once(grounding):
    im = grounding.ground("a.jpg")
    assert icr(g("dog", "puppy"), im) == icr(g("dog"), im) == pytest.approx(0.6)
    assert SceneGraph.build(["dog", "Dog", " dog "]).objects == ("dog",)
    assert icr(g("dog", "unicorn", "sky"), im) == pytest.approx(0.6)  # unknown nouns ground nothing


def test_icr_unavailable_is_none_not_zero(grounding):
    assert grounding.ground("missing.jpg") is None
    assert icr(g("dog"), None) is None
    assert icr(g("dog"), grounding.ground("empty.jpg")) == 0.0  # annotated, no instances: a source, ICR 0
    assert icr(g(), grounding.ground("a.jpg")) == 0.0


def test_images_matched_by_file_name_and_id(grounding):
    assert grounding.ground("/some/dir/a.jpg").image_id == 1
    assert grounding.ground("C:\\imgs\\a.jpg").image_id == 1
    assert grounding.ground(1).image_id == 1
    assert grounding.ground(None) is None and grounding.ground("") is None


def test_instance_rle_box_fallback():
    from pycocotools import mask as m

    r = instance_rle({"segmentation": [[1, 2]], "bbox": [2, 1, 3, 4]}, H, W)
    assert int(m.area(r)) == 12


def test_segmentation_slot_and_chain(tmp_path, grounding):
    from PIL import Image

    img = tmp_path / "seg.png"
    Image.new("RGB", (W, H)).save(img)
    asked = []

    def segment(path, phrases):
        asked.append(list(phrases))
        return {"dog": dense(0, 0, 10, 10), "ball": dense(5, 5, 15, 10), "sky": None}

    seg = SegmentationGrounding(segment)
    im = seg.ground(str(img))
    assert icr(g("dog", "ball", "sky"), im) == pytest.approx((100 + 50 - 25) / 200)
    assert im.grounds("dog") and not im.grounds("sky")
    assert seg.ground(str(tmp_path / "nope.png")) is None
    chain = ChainGrounding([grounding, seg])
    assert chain.ground("a.jpg") is grounding.ground("a.jpg")
    assert chain.ground(str(img)) is not None
    assert chain.name == "coco-instance-masks+segmentation-model"


def test_parse_grounding_specs(instances, tmp_path):
    assert parse_grounding_specs([]) is None and parse_grounding_specs(["none"]) is None
    gr = parse_grounding_specs([f"coco:{instances}"])
    assert gr.name == "coco-instance-masks" and "instances.json" in gr.label
    with pytest.raises(InputError, match="not found"):
        parse_grounding_specs([f"coco:{tmp_path / 'missing.json'}"])
    with pytest.raises(InputError, match="unknown grounding"):
        parse_grounding_specs(["lvis:x.json"])


def hand_graph():
    # man: tall; horse: brown; relations: man riding horse, man wearing hat
    return SceneGraph.build(["man", "horse", "hat"],
                            [("man", "tall", "attribute", "pre"), ("horse", "brown", "attribute", "pre")],
                            [("man", "riding", "horse"), ("man", "wearing", "hat")])


def test_aod_default_is_eq3_subject_count():
    # Eq. 3: D_R(o) counts the relations whose subject is o, each once: man 1 attr + 2 relations,
    # horse 1 attr (object of "riding": not counted), hat 0 (object of "wearing": not counted)
    gr = hand_graph()
    assert DEFAULT_RELATION_ENDS == "subject"
    assert object_detail(gr) == [3.0, 1.0, 0.0]
    assert aod(gr) == aod(gr, "subject") == pytest.approx((2 + 2) / 3)  # (|A| + |R|) / |O|
    assert relation_ends_label(DEFAULT_RELATION_ENDS).startswith("subject (Eq. 3")


def test_aod_relation_ends_options():
    gr = hand_graph()
    assert object_detail(gr, "both") == [3.0, 2.0, 1.0]  # degree in the relation graph + attributes
    assert aod(gr, "both") == pytest.approx((2 + 2 * 2) / 3)  # (|A| + 2|R|) / |O|
    assert object_detail(gr, "subject") == [3.0, 1.0, 0.0]
    assert aod(gr, "subject") == pytest.approx(4 / 3)
    assert object_detail(gr, "split") == [2.0, 1.5, 0.5]
    assert aod(gr, "split") == pytest.approx(4 / 3)
    with pytest.raises(ValueError):
        aod(gr, "half")
    with pytest.raises(ValueError):
        relation_ends_label("half")
    assert set(RELATION_ENDS_LABELS) == set(RELATION_ENDS)


def test_aod_edge_cases():
    assert aod(SceneGraph()) == 0.0
    assert aod(g("sky", "sea")) == 0.0
    self_rel = SceneGraph.build(["dog"], [], [("dog", "next to", "dog")])
    assert aod(self_rel) == 1.0 and aod(self_rel, "both") == 2.0


def test_length_and_cd():
    text = "A tall man riding a brown horse wears a hat"
    assert caption_length(text) == caption_length(text, "words") == 10
    assert caption_length("black-and-white photo") == 4 and caption_length("black-and-white photo", "words") == 2
    assert caption_length("the man's hat") == 3
    with pytest.raises(ValueError):
        caption_length(text, "tokens")
    assert cd(0.6, 2.0, 10) == pytest.approx(0.12)
    assert cd(0.6, 2.0, 10, normalize_length=False) == pytest.approx(1.2)
    assert cd(None, 2.0, 9) is None and cd(0.5, 1.0, 0) is None


def test_score_graph(grounding):
    s = score_graph(SceneGraph.build(["dog", "man"], [("dog", "brown", "attribute", "pre")],
                                     [("man", "walking", "dog")]), "A man walking a brown dog.",
                    grounding.ground("a.jpg"))
    # default (Eq. 3): man 1 relation, dog 1 attribute -> AOD 2/2; both ends: dog also 1 -> 3/2
    assert s.icr == pytest.approx(0.75) and s.aod == pytest.approx(1.0) and s.length == 6
    assert s.cd == pytest.approx(0.75 * 1.0 / 6) and s.cd_unnormalized == pytest.approx(0.75 * 1.0)
    b = score_graph(SceneGraph.build(["dog", "man"], [("dog", "brown", "attribute", "pre")],
                                     [("man", "walking", "dog")]), "A man walking a brown dog.",
                    grounding.ground("a.jpg"), relation_ends="both")
    assert b.aod == pytest.approx(1.5) and b.cd == pytest.approx(0.75 * 1.5 / 6)
    assert (s.objects, s.attributes, s.relations, s.icr_status) == (2, 1, 1, "ok")
    u = score_graph(SceneGraph.build(["dog"]), "A dog.", None)
    assert u.icr is None and u.cd is None and u.icr_status == "unavailable" and u.aod == 0.0


def test_graph_json_and_llm_form_roundtrip():
    gr = hand_graph()
    assert SceneGraph.from_json(gr.to_json()) == gr
    llm = graph_to_llm(gr)
    back = graph_from_llm(llm, parser="m")
    assert back.objects == gr.objects and back.relations == gr.relations and back.parser == "m"
    from jsonschema import validate

    validate(llm, scene_graph_schema())
    dropped = graph_from_llm({"objects": [{"name": "Dog", "attributes": ["two", "brown"]}],
                              "relations": [{"subject": "dog", "predicate": "on", "object": "sofa"}]}, "m")
    assert dropped.objects == ("dog",) and dropped.relations == () and dropped.meta["dropped"] == 1
    assert [(a.value, a.kind) for a in dropped.attributes] == [("two", "count"), ("brown", "attribute")]
    with pytest.raises(InputError):
        SceneGraph.from_json({"objects": ["a"], "relations": [{"subject": 0, "object": 3, "predicate": "x"}]})
