"""Surface loaders (reference-spec §2.1), key normalisation (§11.1) and the demo surfaces."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from capaudit.surfaces import (CAPTION_FIELDS, detect_caption, iter_captions, load_surface, normalize_key,
                               resolve_sources)
from capaudit.surfaces import readers


@pytest.fixture(autouse=True)
def _private_hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPAUDIT_HASH_CACHE", str(tmp_path / "hash_cache.json"))


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


# --- caption auto-detection (§2.1) ---------------------------------------------------------------

def test_caption_field_order_is_the_spec_list():
    assert CAPTION_FIELDS == ("recap_caption", "re_caption", "caption", "caption_long_llama32", "caption_llava",
                              "caption_llava_short", "llava_next_caption", "synthetic_caption", "phi3_caption",
                              "parsed", "text", "txt")


def test_detect_caption_first_non_empty_string_wins():
    row = {"txt": "t", "text": "x", "caption": "   ", "re_caption": 7, "parsed": " p  ", "recap_caption": None}
    # recap_caption None, re_caption not a string, caption blank → 'parsed' (before text/txt), stripped
    assert detect_caption(row) == ("parsed", "p")
    assert detect_caption({"caption_llava": "a", "caption": "b"}) == ("caption", "b")
    assert detect_caption({"url": "u"}) == (None, None)


def test_autodetect_skips_rows_without_caption(tmp_path):
    f = _jsonl(tmp_path / "a.jsonl", [{"caption": " one "}, {"caption": ""}, {"other": "x"}, {"text": "two"}])
    s = load_surface({"name": "a", "file": str(f)})
    assert s.captions == ["one", "two"]
    assert s.frame["key"].tolist() == ["0", "3"]  # default key = 0-based row ordinal
    assert (s.stats.rows, s.stats.rows_without_caption, s.stats.records) == (4, 2, 2)


# --- JSONL errors ---------------------------------------------------------------------------------

def test_jsonl_malformed_line_names_file_and_line(tmp_path):
    f = _jsonl(tmp_path / "bad.jsonl", [{"caption": "a"}, "", '{"caption": "b"', {"caption": "c"}])
    with pytest.raises(ValueError, match=r"bad\.jsonl: line 3: not valid JSON"):
        list(iter_captions(str(f)))


def test_jsonl_non_object_line(tmp_path):
    f = _jsonl(tmp_path / "bad.jsonl", [{"caption": "a"}, "[1, 2]"])
    with pytest.raises(ValueError, match=r"bad\.jsonl: line 2: expected a JSON object, got list"):
        list(iter_captions(str(f)))


def test_missing_caption_field_names_file_line_field(tmp_path):
    f = _jsonl(tmp_path / "m.jsonl", [{"k": 1, "IIW": "a"}, {"k": 2}])
    with pytest.raises(ValueError, match=r"m\.jsonl: line 2: caption field 'IIW' is missing"):
        list(iter_captions({"file": str(f), "caption_field": "IIW", "key_field": "k"}))
    s = load_surface({"name": "m", "file": str(f), "caption_field": "IIW", "key_field": "k", "on_missing": "skip"})
    assert s.frame["key"].tolist() == ["1"] and s.stats.rows_without_caption == 1


def test_missing_key_field_and_bad_caption_type(tmp_path):
    f = _jsonl(tmp_path / "k.jsonl", [{"id": 1, "c": "a"}, {"c": "b"}])
    with pytest.raises(ValueError, match=r"k\.jsonl: line 2: key field 'id' is missing"):
        list(iter_captions({"file": str(f), "caption_field": "c", "key_field": "id"}))
    g = _jsonl(tmp_path / "t.jsonl", [{"c": {"x": 1}}])
    with pytest.raises(ValueError, match=r"t\.jsonl: line 1: caption field 'c' must be a string or a list"):
        list(iter_captions({"file": str(g), "caption_field": "c"}))


def test_streaming_is_lazy(tmp_path):
    """Records before a bad line are yielded; the error only comes when the bad line is read."""
    f = _jsonl(tmp_path / "lazy.jsonl", [{"caption": "a"}, {"caption": "b"}, "{oops"])
    first_two = [r.caption for r in itertools.islice(iter_captions(str(f)), 2)]
    assert first_two == ["a", "b"]
    assert [r.caption for r in iter_captions(str(f), max_records=1)] == ["a"]


def test_unknown_spec_field_is_rejected(tmp_path):
    f = _jsonl(tmp_path / "a.jsonl", [{"caption": "a"}])
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['caption_feild'\]"):
        load_surface({"name": "a", "file": str(f), "caption_feild": "x"})


# --- other formats --------------------------------------------------------------------------------

def test_json_mapping_key_to_caption_list(tmp_path):
    f = tmp_path / "caps.json"
    f.write_text(json.dumps({"img1.jpg": ["a cat ", "", "a dog"], "img2.jpg": ["x"], "img3.jpg": []}))
    s = load_surface({"name": "c", "file": str(f)})
    assert s.frame[["key", "caption", "caption_index"]].values.tolist() == [
        ["img1.jpg", "a cat", 0], ["img1.jpg", "a dog", 2], ["img2.jpg", "x", 0]]
    assert s.first_caption_per_key() == {"img1.jpg": "a cat", "img2.jpg": "x"}


def test_json_records_with_caption_lists_and_meta(tmp_path):
    f = tmp_path / "nc.json"
    f.write_text(json.dumps([{"split": "in_domain", "image_id": "0.jpg", "caption": ["a", "b"]},
                             {"split": "out_domain", "image_id": "1.jpg", "caption": ["c"]}]))
    s = load_surface({"name": "n", "file": str(f), "key_field": "image_id", "caption_field": "caption"})
    assert s.frame["key"].tolist() == ["0.jpg", "0.jpg", "1.jpg"]
    assert [m["split"] for m in s.frame["meta"]] == ["in_domain", "in_domain", "out_domain"]
    assert "image_id" not in s.frame["meta"][0]


def test_json_records_field_coco_format_with_zfill12(tmp_path):
    f = tmp_path / "captions_val.json"
    f.write_text(json.dumps({"images": [], "annotations": [{"id": 9, "image_id": 42, "caption": "A cat."}]}))
    s = load_surface({"name": "coco", "file": str(f), "records_field": "annotations", "key_field": "image_id",
                      "key_normalization": "zfill12"})
    assert s.frame["key"].tolist() == ["000000000042"]
    assert s.frame["meta"][0] == {"id": 9}


def test_csv_and_tsv(tmp_path):
    f = tmp_path / "a.csv"
    f.write_text('id,caption,url\n1,"a, quoted caption",http://x\n2,,http://y\n')
    s = load_surface({"name": "a", "file": str(f), "key_field": "id", "image_field": "url", "meta_fields": []})
    assert s.frame[["key", "caption", "image"]].values.tolist() == [["1", "a, quoted caption", "http://x"]]
    g = tmp_path / "b.tsv"
    g.write_text("cap one\thttp://u1\ncap two\thttp://u2\n")
    t = load_surface({"name": "b", "file": str(g), "header": False, "columns": ["caption", "url"],
                      "key_field": "url", "key_normalization": "url"})
    assert t.frame["key"].tolist() == ["http://u1", "http://u2"]
    bom = tmp_path / "bom.csv"  # drawbench.csv starts with a UTF-8 byte-order mark
    bom.write_bytes("\ufeffPrompt,Category\nA red car.,Colors\n".encode("utf-8"))
    assert [r.caption for r in iter_captions({"file": str(bom), "caption_field": "Prompt"})] == ["A red car."]
    h = tmp_path / "c.csv"
    h.write_text("id,caption\n1,a,extra\n")
    with pytest.raises(ValueError, match=r"c\.csv: line 2: 3 fields, header has 2"):
        list(iter_captions(str(h)))


def test_parquet_batches_and_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(readers, "PARQUET_BATCH_ROWS", 2)
    d = tmp_path / "pq"
    d.mkdir()
    pd.DataFrame({"key": ["a", "b", "c"], "caption": ["x", "y", None]}).to_parquet(d / "part-0.parquet")
    pd.DataFrame({"key": ["d"], "caption": ["z"]}).to_parquet(d / "part-1.parquet")
    s = load_surface({"name": "p", "file": str(d), "format": "parquet", "key_field": "key", "caption_field": "caption"})
    assert s.frame[["key", "caption"]].values.tolist() == [["a", "x"], ["b", "y"], ["d", "z"]]
    with pytest.raises(ValueError, match=r"part-0\.parquet field 'nope': no row has this field \(fields present: "
                                         r"caption, key\)"):
        list(iter_captions({"file": str(d / "part-0.parquet"), "caption_field": "nope"}))
    with pytest.raises(ValueError, match=r"column\(s\) \['nope'\] not in the file"):
        list(iter_captions({"file": str(d / "part-0.parquet"), "caption_field": "nope", "meta_fields": []}))


def test_txt_lines_and_files(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("first prompt\n\n  second  \n")
    assert [(r.key, r.caption) for r in iter_captions(str(f))] == [("0", "first prompt"), ("1", "second")]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x1.txt").write_text("one")
    (tmp_path / "d" / "x2.txt").write_text("two\n")
    s = load_surface({"name": "t", "file": str(tmp_path / "d" / "*.txt"), "format": "txt_files"})
    assert s.frame[["key", "caption"]].values.tolist() == [["x1", "one"], ["x2", "two"]]


def test_hf_streaming_local_json(tmp_path):
    f = _jsonl(tmp_path / "hf.jsonl", [{"key": "k1", "re_caption": "one"}, {"key": "k2", "re_caption": " two "}])
    spec = {"name": "hf", "format": "hf", "hf_path": "json", "data_files": str(f), "split": "train", "key_field": "key"}
    recs = list(iter_captions(spec))
    assert [(r.key, r.caption) for r in recs] == [("k1", "one"), ("k2", "two")]
    s = load_surface(spec)
    assert s.sources[0].hf["hf_path"] == "json" and len(s) == 2


def test_hf_load_from_disk_and_parquet_builder(tmp_path):
    import datasets

    ds = datasets.Dataset.from_dict({"id": [1, 2], "caption": ["a", "b"]})
    ds.save_to_disk(str(tmp_path / "saved"))
    s = load_surface({"name": "d", "format": "hf_disk", "file": str(tmp_path / "saved"), "key_field": "id",
                      "key_normalization": "zfill9"})
    assert s.frame[["key", "caption"]].values.tolist() == [["000000001", "a"], ["000000002", "b"]]
    ds.to_parquet(str(tmp_path / "x.parquet"))
    p = load_surface({"name": "p", "format": "hf", "hf_path": "parquet", "data_files": str(tmp_path / "x.parquet"),
                      "key_field": "id"})
    assert p.frame["key"].tolist() == ["1", "2"]


# --- key normalisation (§11.1) --------------------------------------------------------------------

def test_key_normalization():
    assert normalize_key(" 123 ", "str") == "123"
    assert normalize_key(123, "zfill9") == "000000123"
    assert normalize_key(123.0, "zfill12") == "000000000123"
    assert normalize_key("1234567890", "zfill9") == "1234567890"
    assert normalize_key("  HTTP://Example.COM:80/A/b.jpg?x=Y#frag ", "url") == "http://example.com:80/A/b.jpg?x=Y"
    assert normalize_key("", "str") is None and normalize_key(None, "url") is None
    with pytest.raises(ValueError, match="unknown key_normalization 'lower'"):
        normalize_key("a", "lower")


# --- registry resolution and the demo surfaces ----------------------------------------------------

def test_registry_glob_and_file_prefix(data_dir):
    srcs = resolve_sources({"dataset": "dpg_bench", "path": "prompts/*.txt"})
    assert len(srcs) == 1065 and all(s.sha256 and s.dataset == "dpg_bench" for s in srcs)
    p = data_dir / "drawbench" / "drawbench.csv"
    s = load_surface({"name": "db", "path": f"file:{p}", "caption_field": "Prompt", "meta_fields": []})
    assert len(s) == 200
    assert s.sources[0].sha256 == "5e135bae590252ac2913fb6f4bd551699dd8211e856943385321c59b896d5efb"


def test_text_stage_call_signature(data_dir):
    """capaudit.text.cli streams a plain file path with caption_field/max_records overrides."""
    f = data_dir / "imageinwords" / "DOCCI_Test" / "data.jsonl"
    caps = [r.caption for r in iter_captions(str(f), caption_field="DOCCI", max_records=3)]
    assert len(caps) == 3 and caps[0].startswith("A white toilet in an alcove")


DEMO_SURFACES = [
    {"name": "iiw400_human", "dataset": "imageinwords", "path": "IIW-400/data.jsonl", "format": "jsonl",
     "caption_field": "IIW", "key_field": "image/key"},
    {"name": "iiw400_p5b", "dataset": "imageinwords", "path": "IIW-400/data.jsonl", "format": "jsonl",
     "caption_field": "IIW-P5B", "key_field": "image/key", "on_missing": "skip"},
    {"name": "docci_test_docci", "dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl", "format": "jsonl",
     "caption_field": "DOCCI", "key_field": "image"},
    {"name": "coco_karpathy_test", "dataset": "coco_karpathy_captions", "path": "test_captions.json", "format": "json"},
    {"name": "nocaps_val", "dataset": "nocaps_val", "path": "nocaps_corpus.json", "format": "json",
     "key_field": "image_id", "caption_field": "caption"},
]


def test_demo_surfaces_load_with_provenance_counts():
    s = {spec["name"]: load_surface(spec) for spec in DEMO_SURFACES}
    assert (len(s["iiw400_human"]), s["iiw400_human"].frame["key"].nunique()) == (400, 400)
    # only 100 of the 400 IIW-400 rows carry an IIW-P5B description
    assert (len(s["iiw400_p5b"]), s["iiw400_p5b"].stats.rows_without_caption) == (100, 300)
    assert len(s["docci_test_docci"]) == 100 and s["docci_test_docci"].frame["key"][0] == "test_00731"
    coco = s["coco_karpathy_test"]  # PROVENANCE: 5,000 images / 25,010 captions
    assert (len(coco), coco.frame["key"].nunique()) == (25010, 5000)
    assert coco.frame["key"][0] == "COCO_val2014_000000391895.jpg"
    assert coco.frame["caption"][0] == "A man with a red helmet on a small moped on a dirt road."  # stripped
    nc = s["nocaps_val"]  # PROVENANCE: 4,500 images / 45,000 captions; 417 in, 2,670 near, 1,413 out
    assert (len(nc), nc.frame["key"].nunique()) == (45000, 4500)
    per_image = nc.frame.drop_duplicates("key")["meta"].map(lambda m: m["split"])
    assert Counter(per_image) == {"in_domain": 417, "near_domain": 2670, "out_domain": 1413}
    assert s["iiw400_human"].sources[0].sha256 == "88809dde73731208fa98f72430225a9122c8f7e3c4ebcde98e255d62c5f203f2"


def test_real_parquet_and_headerless_tsv():
    alt = load_surface({"name": "alt", "dataset": "img2dataset_alttext_sample", "path": "test_10000.parquet",
                        "caption_field": "TEXT", "key_field": "URL", "key_normalization": "url", "meta_fields": []})
    assert len(alt) == 10000
    cc3m = load_surface({"name": "cc3m", "dataset": "cc3m_validation", "path": "Validation_GCC-1.1.0-Validation.tsv",
                         "header": False, "columns": ["caption", "url"], "image_field": "url", "meta_fields": []})
    assert len(cc3m) == 15833
    assert cc3m.frame["caption"][0] == "author : a life in photography -- in pictures"
