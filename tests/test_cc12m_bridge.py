"""``capaudit cc12m bridge`` and ``manifest``: the reference's normalisation and join, counted."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from capaudit.cc12m.urls import file_stem_for, normalize_key, normalize_url
from capaudit.cli import main
from test_cc12m_data import JOINED, coco_images, member_key, surface_args, write_shards, write_surfaces


@pytest.mark.parametrize("raw, expected", [
    (" HTTP://Example.COM:8080/A/b?Q=1#frag ", "http://example.com:8080/A/b?Q=1"),
    ("https://x.org/a/", "https://x.org/a/"),            # trailing slash kept
    ("https://x.org/a", "https://x.org/a"),
    ("http://x.org/a", "http://x.org/a"),                # http and https stay different
    ("http://x.org/a?", "http://x.org/a"),               # urlunsplit drops an empty query
    ("http://x.org/a?b=2&a=1", "http://x.org/a?b=2&a=1"),  # query order and case untouched
    ("http://x.org/PATH", "http://x.org/PATH"),          # path case untouched
    ("http://User@X.ORG/p", "http://user@x.org/p"),      # the whole netloc is lower-cased
    ("example.com/a", "example.com/a"),                  # no scheme: kept as written
    ("//Host.COM/p", "//Host.COM/p"),                    # no scheme: kept (host case too)
    ("mailto:A@B.COM", "mailto:A@B.COM"),                # no host: kept
    ("", None), ("   ", None), (None, None), (123, None),
])
def test_url_normalisation_is_the_references(raw, expected) -> None:
    assert normalize_url(raw) == expected


@pytest.mark.parametrize("raw, mode, expected", [
    (139, "zfill9", "000000139"), (" 139 ", "zfill9", "000000139"), ("000000139", "zfill9", "000000139"),
    ("abc", "zfill9", "000000abc"), ("1234567890", "zfill9", "1234567890"), (139, "zfill12", "000000000139"),
    (" 0139 ", "str", "0139"), (None, "zfill9", None), ("  ", "zfill9", None), (True, "zfill9", None),
])
def test_key_normalisation(raw, mode, expected) -> None:
    assert normalize_key(raw, mode) == expected


def test_file_stems_are_safe_and_distinct() -> None:
    assert file_stem_for("000000139") == "000000139"
    a, b = file_stem_for("a/b"), file_stem_for("a_b")
    assert "/" not in a and a != b and b == "a_b"


@pytest.fixture
def surfaces(tmp_path: Path):
    images = coco_images()
    return images, write_surfaces(tmp_path / "in", images)


def _bridge(tmp_path: Path, files, *extra: str) -> int:
    return main(["cc12m", "bridge", *surface_args(files), "--out", str(tmp_path / "out"), *extra])


def test_join_keeps_the_images_in_every_surface_with_their_captions(tmp_path: Path, surfaces, capsys) -> None:
    images, files = surfaces
    assert _bridge(tmp_path, files) == 0
    rows = [json.loads(x) for x in (tmp_path / "out" / "joined.jsonl").read_text().splitlines()]
    want = {member_key(images[i]): images[i] for i in JOINED}
    assert sorted(r["image_id"] for r in rows) == sorted(want)
    for r in rows:
        im = want[r["image_id"]]
        assert r["key"] == r["image_id"] == str(im["id"]).zfill(9)
        assert r["url"] == im["url"]  # the anchor's normalised URL
        assert r["caption_llava"] == im["captions"][1]  # the first of two rows with one key
        assert r["caption_qwen"] == im["captions"][2]
        assert r["caption_alttext"] == im["captions"][0]
        assert r["caption_pixelprose"] == im["captions"][3]  # image 2: via the fallback field
        assert r["key_llava"] == str(im["id"]) and r["key_qwen"] == str(im["id"]).zfill(9)
        assert r["url_alttext"].startswith("HTTP://IMAGES.COCODATASET.ORG/") and r["url_alttext"].endswith("#from-alt-text")
        assert r["url_pixelprose"] == im["url"].replace("images.cocodataset.org", "Images.CocoDataset.ORG")
        assert r["key_pixelprose"] == f"pp{images.index(im)}"
    # the row order is the reference's: sorted candidates shuffled with Random(seed)
    order = sorted(want)
    random.Random(0).shuffle(order)
    assert [r["image_id"] for r in rows] == order
    s = json.loads((tmp_path / "out" / "bridge_summary.json").read_text())
    assert s["join"] == {"anchor_rows": 10, "anchor_rows_unmatched_by_surface": {"qwen": 1, "alttext": 2, "pixelprose": 1},
                         "candidates": 6, "candidates_sharing_a_url": 0, "cut_by_max_rows": 0, "rows": 6}
    got = {n: {k: v for k, v in st.items() if k not in ("files", "unmatched_examples", "join_field")}
           for n, st in s["surfaces"].items()}
    assert got == {
        "llava": {"join": "key", "seen": 11, "loaded": 10, "duplicate_keys": 1, "skipped_missing_key": 0,
                  "skipped_missing_caption": 0, "matched": 6, "unmatched": 4},
        "qwen": {"join": "key", "seen": 10, "loaded": 9, "duplicate_keys": 1, "skipped_missing_key": 0,
                 "skipped_missing_caption": 0, "matched": 6, "unmatched": 3},
        "alttext": {"join": "url", "seen": 10, "loaded": 10, "duplicate_urls": 0, "skipped_missing_url": 0,
                    "skipped_missing_caption": 0, "matched": 6, "unmatched": 4},
        "pixelprose": {"join": "url", "seen": 10, "loaded": 10, "duplicate_urls": 0, "skipped_missing_url": 0,
                       "skipped_missing_caption": 0, "matched": 6, "unmatched": 4},
    }
    # the unmatched examples are the broken images: https, trailing slash, query string, no qwen row
    assert s["surfaces"]["qwen"]["unmatched_examples"] == sorted(member_key(images[i]) for i in (6, 7, 9))
    assert s["surfaces"]["pixelprose"]["unmatched_examples"] == sorted(
        [images[6]["url"].replace("http://images.cocodataset.org", "https://images.cocodataset.org"),
         *[images[i]["url"] for i in (7, 8, 9)]])
    assert images[7]["url"] + "/" in s["surfaces"]["alttext"]["unmatched_examples"]
    assert images[9]["url"] + "?size=large" in s["surfaces"]["alttext"]["unmatched_examples"]
    err = capsys.readouterr().err
    assert "qwen: seen 10, loaded 9 (duplicate keys 1, skipped incomplete 0), matched 6, unmatched 3" in err
    assert "join: 6 images in every surface" in err


def test_max_rows_and_seed_cut_the_shuffled_join(tmp_path: Path, surfaces) -> None:
    _, files = surfaces
    assert main(["cc12m", "bridge", *surface_args(files), "--out", str(tmp_path / "a"), "--max-rows", "4",
                 "--seed", "3", "--format", "parquet"]) == 0
    assert main(["cc12m", "bridge", *surface_args(files), "--out", str(tmp_path / "b"), "--seed", "3"]) == 0
    cut = pd.read_parquet(tmp_path / "a" / "joined.parquet")
    full = [json.loads(x) for x in (tmp_path / "b" / "joined.jsonl").read_text().splitlines()]
    assert list(cut["image_id"]) == [r["image_id"] for r in full][:4]
    s = json.loads((tmp_path / "a" / "bridge_summary.json").read_text())
    assert (s["join"]["candidates"], s["join"]["cut_by_max_rows"], s["join"]["rows"]) == (6, 2, 4)


def test_missing_caption_is_refused_or_counted_with_skip_incomplete(tmp_path: Path, surfaces, capsys) -> None:
    images, files = surfaces
    lines = files["llava"].read_text().splitlines()
    row = json.loads(lines[3])
    del row["caption_llava"]
    lines[3] = json.dumps(row)
    files["llava"].write_text("\n".join(lines) + "\n")
    assert _bridge(tmp_path, files) == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and f"{files['llava']}: line 4: field 'caption_llava'" in err[0]
    assert not (tmp_path / "out").exists()
    assert _bridge(tmp_path, files, "--skip-incomplete") == 0
    s = json.loads((tmp_path / "out" / "bridge_summary.json").read_text())
    assert s["surfaces"]["llava"]["skipped_missing_caption"] == 1
    assert s["join"]["rows"] == 5 and member_key(images[3]) not in [
        json.loads(x)["image_id"] for x in (tmp_path / "out" / "joined.jsonl").read_text().splitlines()]


def test_anchor_without_url_is_refused_or_kept_unmatched(tmp_path: Path, surfaces, capsys) -> None:
    images, files = surfaces
    lines = files["llava"].read_text().splitlines()
    row = json.loads(lines[0])
    row["url"] = ""
    lines[0] = json.dumps(row)
    files["llava"].write_text("\n".join(lines) + "\n")
    assert _bridge(tmp_path, files) == 1
    assert f"{files['llava']}: line 1: field 'url'" in capsys.readouterr().err
    assert _bridge(tmp_path, files, "--skip-incomplete") == 0
    s = json.loads((tmp_path / "out" / "bridge_summary.json").read_text())
    # kept as the reference keeps it: its key blocks the later duplicate row, and it matches no URL
    assert s["surfaces"]["llava"]["loaded_without_url"] == 1 and s["surfaces"]["llava"]["duplicate_keys"] == 1
    assert s["join"]["anchor_rows_unmatched_by_surface"] == {"qwen": 1, "alttext": 3, "pixelprose": 2}
    assert s["join"]["rows"] == 5


def test_float_keys_are_refused(tmp_path: Path, surfaces, capsys) -> None:
    _, files = surfaces
    df = pd.read_parquet(files["qwen"])
    df["key"] = df["key"].astype(float)
    df.to_parquet(files["qwen"])
    assert _bridge(tmp_path, files) == 1
    err = capsys.readouterr().err
    assert f"{files['qwen']}: row 1: field 'key'" in err and "float" in err


def test_key_normalisation_str_leaves_padded_and_unpadded_keys_apart(tmp_path: Path, surfaces) -> None:
    images, files = surfaces
    assert main(["cc12m", "bridge", *surface_args(files)[:4], "--key-normalization", "str",
                 "--out", str(tmp_path / "out")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "out" / "joined.jsonl").read_text().splitlines()]
    # only qwen's one unpadded row (no longer a duplicate) meets llava's unpadded key
    assert [(r["image_id"], r["caption_qwen"]) for r in rows] == [
        (str(images[1]["id"]), "a second qwen row of the same key (after padding)")]


def test_no_common_image_is_an_error_naming_the_counts(tmp_path: Path, surfaces, capsys) -> None:
    _, files = surfaces
    df = pd.read_parquet(files["qwen"])
    df["key"] = "x" + df["key"]
    df.to_parquet(files["qwen"])
    assert main(["cc12m", "bridge", *surface_args(files)[:4], "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "no image has all 2 surfaces" in err and "qwen: 10 of 10 anchor rows unmatched" in err
    assert not (tmp_path / "out").exists()


def test_manifest_has_one_row_per_image_and_locates_them_in_shards(tmp_path: Path, surfaces, capsys) -> None:
    images, files = surfaces
    assert _bridge(tmp_path, files) == 0
    write_shards(tmp_path / "shards", images[:4] + images[10:], without_json=[1])
    joined = tmp_path / "out" / "joined.jsonl"
    assert main(["cc12m", "manifest", "--joined", str(joined), "--out", str(tmp_path / "m.jsonl")]) == 0
    rows = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["image_id"] for r in rows] == [json.loads(x)["image_id"] for x in joined.read_text().splitlines()]
    r0 = next(r for r in rows if r["image_id"] == member_key(images[0]))
    assert r0 == {"image_id": member_key(images[0]), "key": member_key(images[0]), "normalized_url": images[0]["url"],
                  "url_llava": images[0]["url"], "url_alttext": r0["url_alttext"],
                  "url_pixelprose": images[0]["url"].replace("images.cocodataset.org", "Images.CocoDataset.ORG"),
                  "shard": None, "member": None, "image": None, "sha256": None, "bytes": None, "width": None,
                  "height": None, "status": "pending"}
    capsys.readouterr()
    # by URL: image 1 has no sidecar, images 4 and 5 are in no shard
    assert main(["cc12m", "manifest", "--joined", str(joined), "--shards", str(tmp_path / "shards"),
                 "--out", str(tmp_path / "m.parquet")]) == 0
    m = {r["image_id"]: r for r in pq.read_table(tmp_path / "m.parquet").to_pylist()}
    located = {k for k, r in m.items() if r["member"] is not None}
    assert located == {member_key(images[i]) for i in (0, 2, 3)}
    assert m[member_key(images[2])]["shard"] == "00000.tar"
    assert (m[member_key(images[3])]["shard"], m[member_key(images[3])]["member"]) == (
        "00001.tar", member_key(images[3]) + ".jpg")
    assert "located 3 in 2 shard(s) by url (3 not located" in capsys.readouterr().err
    # by key: the sidecar-less image is found too
    assert main(["cc12m", "manifest", "--joined", str(joined), "--shards", str(tmp_path / "shards"), "--match", "key",
                 "--out", str(tmp_path / "k.jsonl")]) == 0
    k = [json.loads(x) for x in (tmp_path / "k.jsonl").read_text().splitlines()]
    assert {r["image_id"] for r in k if r["member"]} == {member_key(images[i]) for i in range(4)}
