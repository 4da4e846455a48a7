"""Fair slices (reference-spec §11.1): join, first-caption-wins, seeded sampling, manifest, CLI, stage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from capaudit.config import load_config
from capaudit.surfaces import build_fair_slice, load_surface
from capaudit.surfaces.slices import SliceExistsError, SliceManifest, pair_id, slice_dir


@pytest.fixture(autouse=True)
def _private_hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPAUDIT_HASH_CACHE", str(tmp_path / "hash_cache.json"))


def _surface(tmp_path: Path, name: str, rows) -> object:
    f = tmp_path / f"{name}.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return load_surface({"name": name, "file": str(f), "caption_field": "c", "key_field": "k"})


@pytest.fixture
def ab(tmp_path):
    a = _surface(tmp_path, "a", [{"k": k, "c": f"a{k}"} for k in ("1", "2", "3", "4")])
    # key 3: an empty caption first (skipped), then two captions: the first non-empty one wins
    b = _surface(tmp_path, "b", [{"k": "2", "c": "b2"}, {"k": "3", "c": "  "}, {"k": "3", "c": "b3-first"},
                                 {"k": "3", "c": "b3-second"}, {"k": "4", "c": "b4"}, {"k": "5", "c": "b5"}])
    return a, b


def test_join_all_matched_sorted(ab, tmp_path):
    m = build_fair_slice(list(ab), None, 0, tmp_path / "out", "ab")
    assert m.dir == tmp_path / "out" / "ab" / "nall_seed0"
    pairs = m.pairs()
    assert pairs.columns.tolist() == ["pair_id", "key", "a_caption", "b_caption", "local_caption", "reference_caption"]
    assert pairs[["key", "a_caption", "b_caption"]].values.tolist() == [
        ["2", "a2", "b2"], ["3", "a3", "b3-first"], ["4", "a4", "b4"]]
    assert pairs["local_caption"].tolist() == ["a2", "a3", "a4"]
    assert pairs["reference_caption"].tolist() == ["b2", "b3-first", "b4"]
    assert pairs["pair_id"][0] == hashlib.sha1(b"ab\x002\x002").hexdigest() == pair_id("ab", "2", 2)
    jsonl = [json.loads(x) for x in (m.dir / "pairs.jsonl").read_text().splitlines()]
    assert jsonl == pairs.to_dict(orient="records")


def test_manifest_counts_and_unmatched(ab, tmp_path):
    m = build_fair_slice(list(ab), None, 0, tmp_path / "out", "ab")
    d = json.loads((m.dir / "manifest.json").read_text())
    assert d["counts"] == {"matched": 3, "sampled": 3, "a_records": 4, "b_records": 5}
    assert d["per_surface"]["a"]["unmatched_keys"] == ["1"] and d["per_surface"]["b"]["unmatched_keys"] == ["5"]
    assert d["per_surface"]["b"]["rows_read"] == 6 and d["per_surface"]["b"]["rows_without_caption"] == 1
    assert d["per_surface"]["b"]["keys"] == 4
    assert d["per_surface"]["a"]["inputs"][0]["sha256"] == hashlib.sha256(
        (tmp_path / "a.jsonl").read_bytes()).hexdigest()
    assert d["roles"] == {"local": "a", "reference": "b"} and d["seed"] == 0 and d["n"] is None
    assert d["files"]["pairs.parquet"] == hashlib.sha256((m.dir / "pairs.parquet").read_bytes()).hexdigest()


def test_sampling_is_seeded_and_reproducible(ab, tmp_path):
    m = build_fair_slice(list(ab), 2, 0, tmp_path / "out", "ab")
    # sorted matched ['2','3','4'], random.Random(0).shuffle → ['2','4','3'], keep 2
    assert m.pairs()["key"].tolist() == ["2", "4"]
    again = build_fair_slice(list(ab), 2, 0, tmp_path / "again", "ab")
    assert again.pairs().equals(m.pairs()) and again.fingerprint == m.fingerprint
    assert json.loads((m.dir / "manifest.json").read_text())["sampling"] == \
        "random.Random(0).shuffle(sorted matched keys)[:2]"
    # n >= matched: no shuffle, all keys in sorted order
    assert build_fair_slice(list(ab), 3, 5, tmp_path / "out", "ab").pairs()["key"].tolist() == ["2", "3", "4"]


def test_sampling_larger_example(tmp_path):
    a = _surface(tmp_path, "a", [{"k": str(i), "c": f"a{i}"} for i in range(10)])
    b = _surface(tmp_path, "b", [{"k": str(i), "c": f"b{i}"} for i in reversed(range(10))])
    m = build_fair_slice([a, b], 4, 7, tmp_path / "out", "ab")
    assert m.pairs()["key"].tolist() == ["8", "3", "1", "4"]  # Random(7) over sorted keys, independent of file order


def test_unmatched_list_truncated(tmp_path):
    a = _surface(tmp_path, "a", [{"k": f"{i:05d}", "c": "x"} for i in range(1502)])
    b = _surface(tmp_path, "b", [{"k": "00000", "c": "y"}, {"k": "00001", "c": "z"}])
    m = build_fair_slice([a, b], None, 0, tmp_path / "out", "t")
    ua = m.per_surface["a"]
    assert (ua["unmatched_count"], len(ua["unmatched_keys"]), ua["unmatched_truncated"]) == (1500, 1000, 500)
    assert ua["unmatched_keys"][:2] == ["00002", "00003"]


def test_three_surfaces_have_no_local_reference_columns(ab, tmp_path):
    c = _surface(tmp_path, "c", [{"k": "4", "c": "c4"}, {"k": "3", "c": "c3"}])
    m = build_fair_slice([*ab, c], None, 0, tmp_path / "out", "abc")
    assert m.pairs().columns.tolist() == ["pair_id", "key", "a_caption", "b_caption", "c_caption"]
    assert m.pairs()["key"].tolist() == ["3", "4"] and m.raw["roles"] is None


def test_refuses_to_overwrite_a_different_slice(ab, tmp_path):
    a, b = ab
    m = build_fair_slice([a, b], None, 0, tmp_path / "out", "ab")
    assert build_fair_slice([a, b], None, 0, tmp_path / "out", "ab").reused  # identical: reused, untouched
    c = _surface(tmp_path, "b2", [{"k": "2", "c": "other"}])
    c.name = "b"
    with pytest.raises(SliceExistsError, match="already exists"):
        build_fair_slice([a, c], None, 0, tmp_path / "out", "ab")
    assert m.pairs()["key"].tolist() == ["2", "3", "4"]  # still the old slice
    new = build_fair_slice([a, c], None, 0, tmp_path / "out", "ab", overwrite=True)
    assert new.pairs()["b_caption"].tolist() == ["other"]
    assert SliceManifest.load(new.dir).fingerprint == new.fingerprint
    assert sorted(p.name for p in new.dir.parent.iterdir()) == ["nall_seed0"]  # no temp folders left


def test_bad_arguments(ab, tmp_path):
    a, b = ab
    with pytest.raises(ValueError, match="at least 2 surfaces"):
        build_fair_slice([a], None, 0, tmp_path, "x")
    with pytest.raises(ValueError, match="distinct"):
        build_fair_slice([a, a], None, 0, tmp_path, "x")
    with pytest.raises(ValueError, match="positive integer"):
        build_fair_slice([a, b], 0, 0, tmp_path, "x")


# --- real data ------------------------------------------------------------------------------------

def test_real_iiw400_human_vs_p5b(tmp_path):
    spec = {"dataset": "imageinwords", "path": "IIW-400/data.jsonl", "format": "jsonl", "key_field": "image/key"}
    human = load_surface({**spec, "name": "iiw_human", "caption_field": "IIW"})
    p5b = load_surface({**spec, "name": "iiw_p5b", "caption_field": "IIW-P5B", "on_missing": "skip"})
    m = build_fair_slice([human, p5b], None, 0, tmp_path, "iiw400")
    # IIW-400 has 400 human descriptions but only 100 rows with an IIW-P5B description
    assert (m.matched, m.sampled) == (100, 100)
    assert m.per_surface["iiw_human"]["unmatched_count"] == 300 and m.per_surface["iiw_p5b"]["unmatched_count"] == 0
    assert m.pairs()["key"].iloc[0] == "aar_test_04600"


def test_real_docci_vs_iiw(tmp_path):
    spec = {"dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl", "format": "jsonl", "key_field": "image"}
    docci = load_surface({**spec, "name": "docci", "caption_field": "DOCCI"})
    iiw = load_surface({**spec, "name": "iiw", "caption_field": "IIW"})
    m = build_fair_slice([docci, iiw], None, 0, tmp_path, "docci_vs_iiw")
    assert (m.matched, m.sampled) == (100, 100)
    pairs = m.pairs()
    row = pairs[pairs["key"] == "test_00731"].iloc[0]
    assert row["local_caption"].startswith("A white toilet in an alcove on beige glossy tiles")
    assert row["reference_caption"].startswith("A clean, modern white toilet and hotel towels")


# --- CLI and stage ----------------------------------------------------------------------------------

def test_cli_slice(tmp_path, capsys):
    from capaudit.cli import main

    (tmp_path / "l.jsonl").write_text("".join(json.dumps({"id": i, "cap": f"l{i}"}) + "\n" for i in range(5)))
    (tmp_path / "r.csv").write_text("id,text\n3,r3\n1,r1\n9,r9\n")
    args = ["slice", "--surface", f"loc={tmp_path / 'l.jsonl'}:cap:id", "--surface", f"ref={tmp_path / 'r.csv'}::id",
            "--n", "5", "--seed", "1", "--out", str(tmp_path / "out")]
    assert main(args) == 0
    assert "2 sampled of 2 matched keys" in capsys.readouterr().out
    pairs = pd.read_parquet(slice_dir(tmp_path / "out", "loc_vs_ref", 5, 1) / "pairs.parquet")
    assert pairs[["key", "local_caption", "reference_caption"]].values.tolist() == [["1", "l1", "r1"], ["3", "l3", "r3"]]
    assert main(args) == 0  # identical: reused
    assert "reused" in capsys.readouterr().out
    (tmp_path / "r.csv").write_text("id,text\n3,changed\n")
    assert main(args) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main(args + ["--overwrite"]) == 0


def test_cli_surfaces_show_and_stage_run(tmp_path, capsys):
    from capaudit.cli import main
    from capaudit.surfaces.stage import run, slice_dirs

    params = {
        "run": "t",
        "surfaces": [
            {"name": "docci", "dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl", "format": "jsonl",
             "caption_field": "DOCCI", "key_field": "image"},
            {"name": "iiw", "dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl", "format": "jsonl",
             "caption_field": "IIW", "key_field": "image"},
            {"name": "coco", "dataset": "coco_karpathy_captions", "path": "test_captions.json", "format": "json"},
        ],
        "slices": [{"name": "docci_vs_iiw", "local": "docci", "reference": "iiw", "n": 10, "seed": 0}],
    }
    pfile = tmp_path / "p.yaml"
    pfile.write_text(yaml.safe_dump(params))
    assert main(["surfaces", "show", str(pfile)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["surface", "source", "caption_field", "key_field", "rows", "records", "skipped", "keys"]
    assert out[3].split() == ["coco", "coco_karpathy_captions/test_captions.json", "auto", "5000", "25010", "0", "5000"]

    cfg = load_config(pfile, out_root=tmp_path / "outputs")
    res = run(cfg)
    assert res["slices"]["docci_vs_iiw"].sampled == 10
    assert res["slices"]["docci_vs_iiw"].dir == slice_dirs(cfg)["docci_vs_iiw"]
    table = pd.read_csv(tmp_path / "outputs" / "t" / "tables" / "surfaces.csv")
    assert table["records"].tolist() == [100, 100, 25010]
    assert run(cfg)["slices"]["docci_vs_iiw"].reused  # re-running the stage reuses the identical slice
