"""Image–text retrieval margins (reference-spec §8.2): hand-checked metrics, and the CLIP code path on a tiny
randomly initialised transformers CLIPModel (built here) over COCO-MINI images. The random model's numbers
measure nothing; the tests check the code path and that every output says the model is random."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from capaudit.embed.encoders import EncoderUnavailable
from capaudit.embed.retrieval import (EOT, SOT, TSV_COLUMNS, bootstrap_mean_ci, clip_bpe_batch, retrieval_margins,
                                      tsv_row)


def _circle(degrees):
    r = np.radians(np.asarray(degrees, dtype=np.float64))
    return np.stack([np.cos(r), np.sin(r)], axis=1)


def cos(deg: float) -> float:
    return math.cos(math.radians(deg))


IMG, TXT = [0, 90, 180], [60, 100, 170]


def test_margins_and_ranks_hand_checked():
    r = retrieval_margins(_circle(IMG), _circle(TXT), reps=0)
    pos = [cos(60), cos(10), cos(10)]
    # image i against the other texts: best other cosines cos(100), cos(30), cos(80)
    i2t = [pos[0] - cos(100), pos[1] - cos(30), pos[2] - cos(80)]
    # text i against the other images: best other cosines cos(30) (img 90° beats the pair), cos(80), cos(80)
    t2i = [pos[0] - cos(30), pos[1] - cos(80), pos[2] - cos(80)]
    assert r["pos_mean"] == pytest.approx(np.mean(pos))
    assert r["i2t_margin_mean"] == pytest.approx(np.mean(i2t))
    assert r["t2i_margin_mean"] == pytest.approx(np.mean(t2i))
    assert (r["i2t_r1"], r["i2t_r5"]) == (1.0, 1.0)
    assert r["t2i_r1"] == pytest.approx(2 / 3) and r["t2i_r5"] == 1.0  # text 0 ranks its image 2nd
    assert r["pos_ci95"] is None


def test_bootstrap_shares_one_generator_in_order():
    rng = np.random.default_rng(0)
    x = _circle(rng.uniform(0, 360, 30))
    y = _circle(rng.uniform(0, 360, 30))
    r = retrieval_margins(x, y, reps=200, seed=5, token_counts=list(range(240, 270)), max_length=248)
    assert r == retrieval_margins(x, y, reps=200, seed=5, token_counts=list(range(240, 270)), max_length=248)
    gen = np.random.default_rng(5)
    pos = np.einsum("ij,ij->i", x, y)
    assert r["pos_ci95"] == pytest.approx(bootstrap_mean_ci(pos, gen, 200))
    bootstrap_mean_ci(pos, gen, 200)  # the i2t interval consumed the generator next
    sims = y @ x.T
    np.fill_diagonal(sims, -np.inf)
    t2i = pos - sims.max(axis=1)
    assert r["t2i_margin_ci95"] == pytest.approx(bootstrap_mean_ci(t2i, gen, 200))
    assert r["pos_ci95"][0] <= r["pos_mean"] <= r["pos_ci95"][1]
    assert r["trunc_gt_248"] == pytest.approx(21 / 30)  # 249..269 are over 248
    assert r["tok_mean"] == pytest.approx(254.5) and r["tok_p95"] == pytest.approx(np.percentile(range(240, 270), 95))
    row = tsv_row("ours", r)
    assert list(row) == list(TSV_COLUMNS) and row["trunc_gt_248"] == "0.7000" and row["pos_ci95"].startswith("[")


def test_inputs_must_align():
    with pytest.raises(ValueError, match="aligned"):
        retrieval_margins(np.ones((3, 2)), np.ones((4, 2)))


def test_clip_bpe_batch_truncates_like_open_clip():
    pytest.importorskip("instant_clip_tokenizer")
    ids, mask = clip_bpe_batch(["a photo of a cat.", "word " * 100], 77)
    assert ids.shape == (2, 77)
    assert ids[0, :8].tolist() == [SOT, 320, 1125, 539, 320, 2368, 269, EOT] and mask[0].sum() == 8
    assert ids[1, 0] == SOT and ids[1, 76] == EOT and mask[1].sum() == 77  # SOT + first 75 + EOT


def test_open_clip_loader_message_when_missing(monkeypatch):
    pytest.importorskip("torch")
    from capaudit.embed.retrieval import load_open_clip

    monkeypatch.setitem(sys.modules, "open_clip", None)
    with pytest.raises(EncoderUnavailable, match="pip install open_clip_torch"):
        load_open_clip("ViT-B-32")


@pytest.fixture(scope="module")
def coco_rows(data_dir):
    if not (data_dir / "coco_mini").is_dir():
        pytest.skip("COCO-MINI not found")
    from capaudit.embed.retrieval import coco_mini_pairs

    a, b = coco_mini_pairs(0)[:12], coco_mini_pairs(1)[:12]
    assert [x["image_id"] for x in a] == [x["image_id"] for x in b]
    return a, b


def _tiny_clip(max_length: int = 77):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.CLIPConfig(
        text_config=dict(vocab_size=49408, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, max_position_embeddings=max_length, bos_token_id=SOT,
                         eos_token_id=EOT, pad_token_id=0, projection_dim=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=32, patch_size=8, projection_dim=16),
        projection_dim=16)
    torch.manual_seed(0)
    return transformers.CLIPModel(cfg)


def test_random_init_clip_on_coco_mini(coco_rows, tmp_path):
    pytest.importorskip("instant_clip_tokenizer")
    from capaudit.embed.retrieval import hf_clip_scorer, load_hf_clip, score_surfaces

    model = _tiny_clip(max_length=248)
    scorer = hf_clip_scorer(model, name="tiny-random-clip (test)", revision="random", max_length=248, image_size=32,
                            random_init=True)
    a, b = coco_rows
    long_caption = a[0]["caption"] + " and" * 300
    out = score_surfaces(scorer, [x["image_path"] for x in a],
                         {"coco_a": [x["caption"] for x in a], "coco_b": [long_caption] + [x["caption"] for x in b[1:]]},
                         reps=50, seed=0)
    assert out["model"]["random_init"] is True and "measure nothing" in out["model"]["warning"]
    r = out["surfaces"]["coco_a"]
    assert r["rows"] == 12 and 0 <= r["i2t_r1"] <= r["i2t_r5"] <= 1 and -1 <= r["pos_mean"] <= 1
    assert r["trunc_gt_248"] == 0.0 and out["surfaces"]["coco_b"]["trunc_gt_248"] == pytest.approx(1 / 12)
    # the HF loader reads a saved CLIPModel folder and carries the weights' sha256 as revision
    model.save_pretrained(tmp_path / "clip")
    loaded = load_hf_clip(str(tmp_path / "clip"))
    assert loaded.revision.startswith("sha256:") and loaded.max_length == 248
    same = loaded.encode_texts([x["caption"] for x in a[:3]])
    assert np.allclose(same, scorer.encode_texts([x["caption"] for x in a[:3]]), atol=1e-5)


def test_library_random_tiny_clip_is_seeded_and_leaves_torch_rng(coco_rows):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from capaudit.embed.retrieval import random_tiny_clip

    state = torch.random.get_rng_state()
    s1, s2 = random_tiny_clip(seed=3), random_tiny_clip(seed=3)
    assert torch.equal(state, torch.random.get_rng_state())
    caps = [x["caption"] for x in coco_rows[0][:4]]
    assert np.allclose(s1.encode_texts(caps), s2.encode_texts(caps))
    assert s1.describe()["random_init"] is True


def test_cli_retrieval_with_random_tiny_clip(tmp_path, coco_rows, capsys):
    pytest.importorskip("transformers")
    from capaudit.cli import main

    src = tmp_path / "pairs.jsonl"
    src.write_text("".join(json.dumps({"image_path": x["image_path"], "caption": x["caption"]}) + "\n"
                           for x in coco_rows[0][:6]), encoding="utf-8")
    out = tmp_path / "r.json"
    assert main(["embed", "retrieval", "--model", "capaudit-random-tiny-clip", "--surface", f"a={src}",
                 "--reps", "20", "--max-length", "248", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["model"]["name"] == "capaudit-random-tiny-clip" and data["model"]["random_init"] is True
    assert data["surfaces"]["a"]["rows"] == 6 and data["model"]["max_length"] == 248
