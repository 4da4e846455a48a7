"""Streaming image inputs and the image id rules of reference-spec §6."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from capaudit.errors import FieldNotFoundError, InputError
from capaudit.recap.inputs import load_metadata, open_images

CTX = ("general_tags", "character_tags", "confirmed_characters", "copyright_tags", "rating")


def _png(color=(10, 20, 30), size=(4, 3)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


def test_folder_ids_are_stems_recursive_paths_below(tmp_path: Path):
    (tmp_path / "b.PNG").write_bytes(_png())
    (tmp_path / "a.jpg").write_bytes(_png())
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / ".hidden.jpg").write_bytes(_png())
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "sub" / "c.webp").write_bytes(_png())
    (tmp_path / "sub" / "deeper" / "d.heic").write_bytes(b"unsupported body")
    inp = open_images(tmp_path)
    jobs = list(inp)
    assert inp.kind == "folder"
    assert [j.image_id for j in jobs] == ["a", "b", "sub/c", "sub/deeper/d"]
    assert jobs[0].image_path == str((tmp_path / "a.jpg").resolve()) and jobs[0].data is None
    assert inp.stats.skipped_non_image == 1  # notes.txt; hidden files are not counted


def test_folder_with_manifest_uses_it(tmp_path: Path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "x.png").write_bytes(_png())
    (tmp_path / "_manifest.jsonl").write_text(
        json.dumps({"image_path": "img/x.png", "image_id": "post-17", "general_tags": "1girl long_hair",
                    "artist_tags": "someone", "rating": "g"}) + "\n\n"
        + json.dumps({"path": "img/missing.png"}) + "\n")
    inp = open_images(tmp_path, context_fields=CTX)
    jobs = list(inp)
    assert inp.kind == "manifest"
    assert [(j.image_id, j.file) for j in jobs] == [("post-17", str(tmp_path / "img" / "x.png")),
                                                     ("missing", str(tmp_path / "img" / "missing.png"))]
    assert jobs[0].context == {"general_tags": "1girl long_hair", "rating": "g"}  # artist tags never carried


def test_manifest_errors_name_file_line_field(tmp_path: Path):
    m = tmp_path / "m.jsonl"
    m.write_text('{"image_path": "a.png"}\n{not json}\n')
    with pytest.raises(InputError, match=r"m\.jsonl:2: invalid JSON"):
        list(open_images(m))
    m.write_text('{"image_path": "a.png"}\n{"caption": "x"}\n')
    with pytest.raises(InputError, match=r"m\.jsonl:2 field 'image_path': no image path"):
        list(open_images(m))


def _tar(path: Path, members) -> None:
    with tarfile.open(path, "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def test_webdataset_shards_member_stems_and_json_context(tmp_path: Path):
    _tar(tmp_path / "shard-000.tar", [
        ("000001.jpg", _png()), ("000001.json", json.dumps({"general_tags": ["smile"], "rating": "s"}).encode()),
        ("000001.txt", b"alt text"), ("dir/000002.png", _png()), ("000003.seg.png", _png()),
    ])
    _tar(tmp_path / "shard-001.tar", [("000004.webp", _png())])
    inp = open_images(str(tmp_path / "shard-*.tar"), context_fields=CTX)
    jobs = list(inp)
    assert inp.kind == "tar" and inp.stats.shards == 2
    assert [j.image_id for j in jobs] == ["000001", "000002", "000003.seg", "000004"]
    assert jobs[0].context == {"general_tags": ["smile"], "rating": "s"} and jobs[1].context == {}
    assert jobs[1].image_path == f"{tmp_path / 'shard-000.tar'}#dir/000002.png" and jobs[1].data == _png()
    assert inp.stats.skipped_non_image == 1  # the .txt member


def test_truncated_shard_is_a_failed_entry(tmp_path: Path):
    _tar(tmp_path / "s.tar", [("a.png", _png()), ("b.png", _png() * 300)])
    raw = (tmp_path / "s.tar").read_bytes()
    (tmp_path / "s.tar").write_bytes(raw[:2000])  # inside b.png's data (a's header+data end at 1024)
    jobs = list(open_images(tmp_path / "s.tar"))
    assert [j.image_id for j in jobs] == ["a", "s#shard"] and jobs[0].error is None
    assert "corrupt or truncated tar shard" in jobs[1].error and str(tmp_path / "s.tar") in jobs[1].error


def test_parquet_bytes_paths_structs_and_ids(tmp_path: Path):
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "p1.png").write_bytes(_png())
    pq.write_table(pa.table({"key": ["k0", "k1"], "jpg": [_png(), _png((1, 2, 3))], "rating": ["g", None]}),
                   tmp_path / "bytes.parquet")
    jobs = list(open_images(tmp_path / "bytes.parquet", context_fields=CTX))
    assert [(j.image_id, j.data is not None, j.context) for j in jobs] == [("k0", True, {"rating": "g"}),
                                                                           ("k1", True, {})]
    assert jobs[1].image_path == f"{tmp_path / 'bytes.parquet'}#row=1"
    pq.write_table(pa.table({"image_path": ["imgs/p1.png", None]}), tmp_path / "paths.parquet")
    jobs = list(open_images(tmp_path / "paths.parquet"))
    assert jobs[0].image_id == "p1" and jobs[0].file == str(tmp_path / "imgs" / "p1.png")
    assert jobs[1].image_id == "paths:1" and "empty image cell" in jobs[1].error
    hf = pa.table({"image": [{"bytes": _png(), "path": "orig/name.png"}, {"bytes": None, "path": "imgs/p1.png"}]})
    pq.write_table(hf, tmp_path / "hf.parquet")
    jobs = list(open_images(tmp_path / "hf.parquet"))
    assert [(j.image_id, j.data is not None, j.file) for j in jobs] == [
        ("name", True, None), ("p1", False, str(tmp_path / "imgs" / "p1.png"))]
    with pytest.raises(FieldNotFoundError, match=r"field 'nope'.*fields present: jpg, key, rating"):
        list(open_images(tmp_path / "bytes.parquet", image_column="nope"))
    pq.write_table(pa.table({"caption": ["x"]}), tmp_path / "noimg.parquet")
    with pytest.raises(FieldNotFoundError, match="--image-column"):
        list(open_images(tmp_path / "noimg.parquet"))


def test_parquet_is_streamed_in_batches(tmp_path: Path, monkeypatch):
    import capaudit.recap.inputs as inputs

    pq.write_table(pa.table({"image_id": [str(i) for i in range(200)], "image": [_png()] * 200}),
                   tmp_path / "many.parquet", row_group_size=50)
    seen = []
    real = pq.ParquetFile.iter_batches

    def spy(self, *a, **kw):
        seen.append(kw.get("batch_size"))
        return real(self, *a, **kw)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    it = iter(open_images(tmp_path / "many.parquet"))
    assert next(it).image_id == "0" and seen == [inputs.PARQUET_BATCH]


def test_bad_specs(tmp_path: Path):
    with pytest.raises(InputError, match="no such file or folder"):
        open_images(tmp_path / "nope")
    (tmp_path / "x.csv").write_text("a")
    with pytest.raises(InputError, match="cannot tell the input kind"):
        open_images(tmp_path / "x.csv")
    with pytest.raises(InputError, match="no file matches"):
        open_images(str(tmp_path / "*.tar"))
    with pytest.raises(InputError, match="Parquet inputs only"):
        open_images(tmp_path, id_column="id")


def test_metadata_join_file(tmp_path: Path):
    m = tmp_path / "meta.jsonl"
    m.write_text(json.dumps({"image_id": "a", "general_tags": "x y", "artist_tags": "z", "rating": "e"}) + "\n")
    assert load_metadata(m, CTX) == {"a": {"general_tags": "x y", "rating": "e"}}
    m.write_text(json.dumps({"general_tags": "x"}) + "\n")
    with pytest.raises(InputError, match=r"meta\.jsonl:1 field 'image_id': missing key"):
        load_metadata(m, CTX)
