"""``capaudit cc12m materialize``: real COCO JPEGs out of WebDataset shards, verified, resumable."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from capaudit.cli import main
from test_cc12m_data import JOINED, coco_images, member_key, surface_args, write_shards, write_surfaces


@pytest.fixture
def study(tmp_path: Path):
    """Joined table + manifest of images 0..5; shards hold images 0..5 and two unrequested ones."""
    images = coco_images()
    files = write_surfaces(tmp_path / "in", images)
    assert main(["cc12m", "bridge", *surface_args(files), "--out", str(tmp_path / "bridge")]) == 0
    joined = tmp_path / "bridge" / "joined.jsonl"
    assert main(["cc12m", "manifest", "--joined", str(joined), "--out", str(tmp_path / "manifest.jsonl")]) == 0
    return images, joined, tmp_path / "manifest.jsonl"


def _rows(path: Path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def _materialize(manifest: Path, shards: Path, out: Path, *extra: str) -> int:
    return main(["cc12m", "materialize", "--manifest", str(manifest), "--shards", str(shards), "--out", str(out),
                 *extra])


def test_images_are_written_verified_and_usable_by_judges_build(tmp_path: Path, study, capsys) -> None:
    images, joined, manifest = study
    shards = tmp_path / "shards"
    write_shards(shards, [images[i] for i in (*JOINED, 10, 11)])
    out = tmp_path / "mat"
    assert _materialize(manifest, shards, out, "--joined", str(joined)) == 0
    rows = {r["image_id"]: r for r in _rows(out / "manifest.jsonl")}
    assert set(rows) == {member_key(images[i]) for i in JOINED}
    for i in JOINED:
        im, r = images[i], rows[member_key(images[i])]
        assert r["status"] == "materialized" and r["image"] == f"images/{member_key(im)}.jpg"
        assert r["sha256"] == im["sha256"] == hashlib.sha256((out / r["image"]).read_bytes()).hexdigest()
        assert r["bytes"] == im["path"].stat().st_size
        assert (r["shard"], r["member"]) == (("00000.tar", "00001.tar")[JOINED.index(i) % 2], f"{member_key(im)}.jpg")
        assert r["width"] > 0 and r["height"] > 0
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted(f"{member_key(images[i])}.jpg" for i in JOINED)
    s = json.loads((out / "materialize_summary.json").read_text())
    assert (s["requested"], s["materialized"], s["found_in_shards"], s["files_written"], s["missing"], s["corrupt"]) \
        == (6, 6, 6, 6, 0, 0)
    assert s["shard_index"]["samples"] == 8
    assert not (out / ".materialize-journal.jsonl").exists()
    # per-surface caption files: the judges' caption index and image resolver accept them
    from capaudit.judges.requests import ImageResolver, read_caption_index

    for surface in ("llava", "qwen", "alttext", "pixelprose"):
        caps = _rows(out / f"{surface}.jsonl")
        assert len(caps) == 6 and s["caption_files"][surface] == {"rows": 6, "without_image": 0,
                                                                   "without_manifest_row": 0}
        index = read_caption_index(out / f"{surface}.jsonl", "caption_id", "image")
        resolver = ImageResolver("file", base_dir=out)
        for c in caps:
            _, img = index[c["caption_id"]]
            url, key, local = resolver.resolve(img)
            assert key == "sha256:" + rows[c["image_id"]]["sha256"] and Path(local) == (out / img).resolve()
    joined_rows = {r["image_id"]: r for r in _rows(joined)}
    assert all(c["caption"] == joined_rows[c["image_id"]]["caption_qwen"] for c in _rows(out / "qwen.jsonl"))
    assert "requested 6: materialized 6" in capsys.readouterr().err


def test_a_second_run_rewrites_nothing(tmp_path: Path, study) -> None:
    images, _, manifest = study
    shards = tmp_path / "shards"
    write_shards(shards, [images[i] for i in JOINED])
    out = tmp_path / "mat"
    assert _materialize(manifest, shards, out) == 0
    mtimes = {p.name: p.stat().st_mtime_ns for p in (out / "images").iterdir()}
    assert _materialize(manifest, shards, out) == 0
    s = json.loads((out / "materialize_summary.json").read_text())
    assert (s["already_present"], s["found_in_shards"], s["files_written"], s["shard_index"]) == (6, 0, 0, None)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "images").iterdir()} == mtimes
    # a file damaged since: found again in the shards and rewritten; the others stay untouched
    victim = out / "images" / f"{member_key(images[2])}.jpg"
    victim.write_bytes(b"not the image")
    assert _materialize(manifest, shards, out) == 0
    s = json.loads((out / "materialize_summary.json").read_text())
    assert (s["already_present"], s["found_in_shards"], s["files_written"]) == (5, 1, 1)
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == images[2]["sha256"]


def test_an_interrupted_run_resumes_from_its_journal(tmp_path: Path, study, monkeypatch) -> None:
    images, _, manifest = study
    shards = tmp_path / "shards"
    write_shards(shards, [images[i] for i in JOINED])
    out = tmp_path / "mat"
    import capaudit.cc12m.materialize as mat

    real, calls = mat.write_bytes_atomic, []

    def dies_on_the_fourth(path, data):
        calls.append(path)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(path, data)

    monkeypatch.setattr(mat, "write_bytes_atomic", dies_on_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        mat.materialize(str(manifest), str(shards), str(out))
    assert len(list((out / "images").iterdir())) == 3 and not (out / "manifest.jsonl").exists()
    assert len((out / ".materialize-journal.jsonl").read_text().splitlines()) == 3
    monkeypatch.setattr(mat, "write_bytes_atomic", real)
    assert _materialize(manifest, shards, out) == 0
    s = json.loads((out / "materialize_summary.json").read_text())
    assert (s["already_present"], s["found_in_shards"], s["files_written"], s["materialized"]) == (3, 3, 3, 6)
    for r in _rows(out / "manifest.jsonl"):
        assert hashlib.sha256((out / r["image"]).read_bytes()).hexdigest() == r["sha256"]
    assert not list((out / "images").glob(".*"))  # no temporary left by the interruption


def test_missing_images_fail_unless_allowed_and_are_counted(tmp_path: Path, study, capsys) -> None:
    images, joined, manifest = study
    shards = tmp_path / "shards"
    write_shards(shards, [images[i] for i in (0, 1, 2, 3)])
    out = tmp_path / "mat"
    assert _materialize(manifest, shards, out) == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "2 of 6 requested images are in none of the 2 shard(s)" in err[0]
    assert f"{manifest}: line" in err[0] and "--allow-missing" in err[0]
    assert not out.exists()
    assert _materialize(manifest, shards, out, "--allow-missing", "--joined", str(joined)) == 0
    rows = {r["image_id"]: r for r in _rows(out / "manifest.jsonl")}
    assert {i for i, r in rows.items() if r["status"] == "missing"} == {member_key(images[i]) for i in (4, 5)}
    assert all(rows[member_key(images[i])]["image"] is None for i in (4, 5))
    s = json.loads((out / "materialize_summary.json").read_text())
    assert (s["materialized"], s["missing"], s["caption_files"]["llava"]["without_image"]) == (4, 2, 2)
    assert len(_rows(out / "llava.jsonl")) == 4


def test_a_corrupt_image_fails_naming_shard_and_member_and_writes_nothing(tmp_path: Path, study, capsys) -> None:
    images, _, manifest = study
    shards = tmp_path / "shards"
    write_shards(shards, [images[i] for i in JOINED], corrupt=[3])
    out = tmp_path / "mat"
    assert _materialize(manifest, shards, out) == 1
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and f"{shards / '00001.tar'}: member '{member_key(images[3])}.jpg'" in err[0]
    assert "does not decode" in err[0] and not out.exists()
    assert _materialize(manifest, shards, out, "--allow-missing") == 0
    rows = {r["image_id"]: r for r in _rows(out / "manifest.jsonl")}
    assert rows[member_key(images[3])]["status"] == "corrupt"
    assert json.loads((out / "materialize_summary.json").read_text())["corrupt"] == 1


def test_match_by_key_and_a_recorded_location(tmp_path: Path, study, capsys) -> None:
    images, joined, _ = study
    shards = tmp_path / "shards"
    write_shards(shards, [images[i] for i in JOINED], without_json=list(range(6)))
    out = tmp_path / "mat"
    assert _materialize(study[2], shards, out, "--allow-missing") == 1  # by URL: no sidecar, nothing found
    assert "none of the 6 requested images was found" in capsys.readouterr().err
    assert _materialize(study[2], shards, out, "--match", "key", "--naming", "sha256") == 0
    rows = _rows(out / "manifest.jsonl")
    assert all(r["image"] == f"images/{r['sha256']}.jpg" for r in rows)
    # a manifest that records shard and member reads only that member; an unknown one is refused
    located = tmp_path / "located.parquet"
    assert main(["cc12m", "manifest", "--joined", str(joined), "--shards", str(shards), "--match", "key",
                 "--out", str(located)]) == 0
    out2 = tmp_path / "mat2"
    assert _materialize(located, shards, out2, "--naming", "shard-member") == 0
    import pyarrow.parquet as pq

    rows2 = pq.read_table(out2 / "manifest.parquet").to_pylist()
    assert {r["image"] for r in rows2} == {f"images/{('00000', '00001')[i % 2]}__{member_key(images[i])}.jpg"
                                          for i in JOINED}
    bad = [dict(r) for r in _rows(out / "manifest.jsonl")]
    bad[2]["member"] = "999999999.jpg"
    bad_path = tmp_path / "bad.jsonl"
    bad_path.write_text("".join(json.dumps(r) + "\n" for r in bad))
    capsys.readouterr()
    assert _materialize(bad_path, shards, tmp_path / "mat3") == 1
    err = capsys.readouterr().err
    assert f"{bad_path}: line 3: field 'member': '999999999.jpg'" in err and "unknown shard member" in err
    assert not (tmp_path / "mat3").exists()
