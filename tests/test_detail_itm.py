"""ITM scorers: the offline annotation-precision stand-in, and the CLIP-family scorer on a tiny
random-init transformers CLIPModel (skipped where torch/transformers are not installed)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from capaudit.detail.graph import SceneGraph
from capaudit.detail.itm import AnnotationPrecisionScorer, clip_preprocess, make_itm_scorer


@pytest.fixture()
def grounding(tmp_path):
    from capaudit.detail.grounding import CocoGrounding
    from capaudit.lexicons import load_noun_lexicon

    lex = tmp_path / "lex.yaml"
    lex.write_text("version: 1\ncategories:\n  - {name: dog, terms: [dog, puppy]}\n"
                   "  - {name: horse, terms: [horse]}\n  - {name: person, terms: [person, man]}\n", encoding="utf-8")
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps({
        "images": [{"id": 1, "file_name": "a.jpg", "width": 10, "height": 10}],
        "categories": [{"id": 1, "name": "person"}, {"id": 18, "name": "dog"}, {"id": 19, "name": "horse"}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 18, "iscrowd": 0, "segmentation": [[0, 0, 5, 0, 5, 5, 0, 5]]},
            {"id": 2, "image_id": 1, "category_id": 1, "iscrowd": 1,
             "segmentation": {"size": [10, 10], "counts": [90, 10]}},
        ]}), encoding="utf-8")
    return CocoGrounding.from_files([inst], load_noun_lexicon(lex))


def test_annotation_precision_chair_style(grounding):
    sc = AnnotationPrecisionScorer(grounding)
    im = grounding.ground("a.jpg")
    # dog present, horse absent (hallucinated), tree outside the vocabulary (ignored): 1/2
    assert sc.score_graph(SceneGraph.build(["dog", "horse", "tree"]), im) == pytest.approx(0.5)
    # dog and puppy are one vocabulary entry; the person is a crowd region: 2/2
    assert sc.score_graph(SceneGraph.build(["dog", "puppy", "man"]), im) == 1.0
    assert sc.score_graph(SceneGraph.build(["horse"]), im) == 0.0
    assert sc.score_graph(SceneGraph.build(["tree", "sky"]), im) is None  # no vocabulary object
    assert sc.score_graph(SceneGraph.build(["dog"]), None) is None  # no grounding source
    graphs = [SceneGraph.build(["dog", "horse"]), SceneGraph.build(["dog"])]
    assert sc.score(["a.jpg", "b.jpg"], ["x", "y"], graphs) == [0.5, None]
    assert sc.name == "annotation-precision" and "CHAIR" in sc.label and "offline" in sc.label


def test_make_itm_scorer(grounding):
    assert make_itm_scorer("none") is None and make_itm_scorer(None) is None
    assert make_itm_scorer("annotation_precision", grounding).name == "annotation-precision"
    with pytest.raises(ValueError, match="grounding"):
        make_itm_scorer("annotation_precision", None)
    with pytest.raises(ValueError, match="unknown ITM"):
        make_itm_scorer("blip")


def test_clip_preprocess_shapes_and_normalisation():
    from PIL import Image

    out = clip_preprocess([Image.new("RGB", (40, 20), (255, 255, 255)), Image.new("L", (16, 16), 0)], 8)
    assert out.shape == (2, 3, 8, 8) and out.dtype == np.float32
    assert out[0, 0, 0, 0] == pytest.approx((1 - 0.48145466) / 0.26862954, rel=1e-5)
    assert out[1, 2, 0, 0] == pytest.approx((0 - 0.40821073) / 0.27577711, rel=1e-5)


def test_clip_scorer_on_tiny_random_transformers_model(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from PIL import Image

    from capaudit.detail.itm import CLIPScorer

    torch.manual_seed(0)
    cfg = transformers.CLIPConfig(
        text_config=dict(vocab_size=128, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=32),
        vision_config=dict(image_size=32, patch_size=8, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                           num_attention_heads=4),
        projection_dim=16)
    model = transformers.CLIPModel(cfg).eval()

    def tokenize(texts):
        ids = [[min(ord(c), 127) for c in t[:30]] for t in texts]
        n = max(len(i) for i in ids)
        return {"input_ids": torch.tensor([i + [0] * (n - len(i)) for i in ids]),
                "attention_mask": torch.tensor([[1] * len(i) + [0] * (n - len(i)) for i in ids])}

    scorer = CLIPScorer.from_transformers(model, name="tiny-random-clip", tokenize=tokenize, batch_size=2)
    rng = np.random.default_rng(0)
    paths = []
    for k in range(3):
        p = tmp_path / f"im{k}.png"
        Image.fromarray(rng.integers(0, 255, (40, 48, 3), dtype=np.uint8)).save(p)
        paths.append(str(p))
    caps = ["a red cube", "two dogs", "a red cube"]
    scores = scorer.score(paths + [str(tmp_path / "missing.png")], caps + ["x"])
    assert scores[3] is None and all(-1.0 <= s <= 1.0 for s in scores[:3])
    assert scorer.score(paths, caps) == scores[:3]  # deterministic
    # reference: the model's own embeddings, cosine
    with torch.no_grad():
        px = torch.as_tensor(clip_preprocess([Image.open(paths[1])], 32))
        iv = model.get_image_features(pixel_values=px)
        tv = model.get_text_features(**tokenize([caps[1]]))
        iv = getattr(iv, "pooler_output", iv)
        tv = getattr(tv, "pooler_output", tv)
        ref = torch.nn.functional.cosine_similarity(iv, tv).item()
    assert scores[1] == pytest.approx(ref, abs=1e-5)
    assert scorer.name == "tiny-random-clip" and "CLIP" in scorer.label
