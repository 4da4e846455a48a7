"""Checksummed data registry: coverage of shared/data, fetch, corrupt and missing files, CLI."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from capaudit.data import build_registry, registry
from capaudit.data.registry import DataError, entry, fetch

IIW = ("imageinwords", "IIW-400/data.jsonl")
IIW_SHA = "88809dde73731208fa98f72430225a9122c8f7e3c4ebcde98e255d62c5f203f2"  # PROVENANCE.md


@pytest.fixture(autouse=True)
def _private_hash_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPAUDIT_HASH_CACHE", str(tmp_path / "hash_cache.json"))


def _local_files(data_dir: Path):
    return sorted((p.parent.relative_to(data_dir).parts[0], p.relative_to(data_dir / p.relative_to(data_dir).parts[0]).as_posix())
                  for p in data_dir.rglob("*")
                  if p.is_file() and p.name not in ("PROVENANCE.md", "README.md") and p.parent != data_dir)


def test_registry_covers_every_shared_file(data_dir):
    local = _local_files(data_dir)
    registered = sorted((e.dataset, e.path) for e in registry.entries(kind="file"))
    assert len(local) == 1320  # README: 1,339 files incl. 19 PROVENANCE.md
    assert registered == local


def test_entry_fields_pinned_url_and_provenance_sha():
    e = entry(*IIW)
    assert e.sha256 == IIW_SHA and e.sha256_source == "provenance"
    assert e.bytes == 980175
    assert e.url == ("https://raw.githubusercontent.com/google/imageinwords/"
                     "96d393777e2528becd8a7afa1389eb4b65084793/datasets/IIW-400/data.jsonl")
    assert e.license == "CC BY 4.0"
    # multi-source folder: the repository prefix of the original path picks the source
    lv = entry("class_lists", "lvis_v1/lvis_v1_train_cat_info.json")
    assert lv.url.startswith("https://raw.githubusercontent.com/facebookresearch/Detic/436cda2a")
    assert lv.url.endswith("/datasets/metadata/lvis_v1_train_cat_info.json")
    # sha256sum-block layouts: dpg_bench prefixes 'dpg_bench/', coco_mini keeps the same path
    assert entry("dpg_bench", "prompts/0.txt").url.endswith("/3c228f1dc6c4d3cad0a47493816151a419f14db3/dpg_bench/prompts/0.txt")
    assert entry("dpg_bench", "prompts/0.txt").sha256 == "61009cf14af722b83ebe18bed9c48275c2ccb444733a90725ba15692b04dcb63"
    assert entry("coco_mini", "annotations/captions_val2017.json").url.endswith(
        "/644f29e7c1d2eefd9c4412d39bc5b0ee6fd0afd4/annotations/captions_val2017.json")


def test_hf_entries_marked_and_without_sha():
    hf = registry.entries(kind="hf")
    assert {e.dataset for e in hf} == {"hf_prompt_pools", "hf_surfaces", "hf_released"}
    assert len([e for e in hf if e.dataset == "hf_prompt_pools"]) == 8  # the paper's seven + the xzuyn sensitivity pool
    assert entry("hf_prompt_pools", "sd_prompts_dedup_xzuyn").extra["sensitivity_only"] is True
    released = [e for e in hf if e.dataset == "hf_released"]
    assert len(released) == 9 and all(e.extra["field"] == "caption_text" for e in released)
    assert entry("hf_released", "ours_cc12m").repository == "BootsofLagrangian/cc12m-recap-qwen3p5-35b-a3b"
    assert all(e.sha256 is None and e.repository for e in hf)
    assert entry("hf_surfaces", "ref_cc12m_llavanext").extra["field"] == "caption_llava"
    with pytest.raises(DataError, match="Hugging Face"):
        fetch("hf_surfaces", "ref_pd12m_full")


def test_unknown_entry_names_file():
    with pytest.raises(KeyError, match="imageinwords/nope.jsonl"):
        entry("imageinwords", "nope.jsonl")


def test_fetch_real_shared_file(data_dir, tmp_path, monkeypatch):
    p = fetch(*IIW)
    assert p == data_dir / "imageinwords" / "IIW-400" / "data.jsonl"
    assert hashlib.sha256(p.read_bytes()).hexdigest() == IIW_SHA
    # the first fetch hashed the file and remembered it in the sidecar ...
    cache = json.loads((tmp_path / "hash_cache.json").read_text())
    assert cache == {f"{p.resolve()}|980175|{p.stat().st_mtime_ns}": IIW_SHA}
    # ... so the second fetch must not hash it again: it fails if it does
    def no_hashing(path):
        raise AssertionError(f"re-hashed {path} although the sidecar knows it")

    monkeypatch.setattr(registry, "sha256_file", no_hashing)
    assert fetch(*IIW) == p
    # and a sidecar that disagrees with the registry is a mismatch, not a pass
    (tmp_path / "hash_cache.json").write_text(json.dumps({next(iter(cache)): "0" * 64}))
    with pytest.raises(DataError, match="sha256 mismatch"):
        fetch(*IIW)


def test_sidecar_beside_a_writable_data_dir_else_user_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("CAPAUDIT_HASH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(root))
    assert registry.hash_cache_path() == root / ".capaudit-verified-sha256.json"
    root.chmod(0o555)  # a read-only data folder: one sidecar per data folder in the user cache
    try:
        side = registry.hash_cache_path()
        assert side.name.startswith("verified_sha256-") and root not in side.parents
    finally:
        root.chmod(0o755)
    monkeypatch.delenv("CAPAUDIT_DATA_DIR")
    assert registry.hash_cache_path().name == "verified_sha256.json"


def test_hash_sidecar_keyed_by_size_and_mtime(tmp_path, monkeypatch, data_dir):
    root = tmp_path / "data"
    target = root / "imageinwords" / "IIW-400" / "data.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copyfile(data_dir / "imageinwords" / "IIW-400" / "data.jsonl", target)
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(root))
    fetch(*IIW)
    cache = json.loads((tmp_path / "hash_cache.json").read_text())
    assert list(cache.values()) == [IIW_SHA]
    assert next(iter(cache)).startswith(str(target.resolve()) + "|980175|")


def test_corrupt_copy_names_file_and_both_hashes(tmp_path, monkeypatch, data_dir):
    root = tmp_path / "data"
    target = root / "imageinwords" / "IIW-400" / "data.jsonl"
    target.parent.mkdir(parents=True)
    blob = bytearray((data_dir / "imageinwords" / "IIW-400" / "data.jsonl").read_bytes())
    blob[100] ^= 0x01  # flip one bit, same size
    target.write_bytes(bytes(blob))
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(root))
    actual = hashlib.sha256(bytes(blob)).hexdigest()
    with pytest.raises(DataError) as err:
        fetch(*IIW)
    msg = str(err.value)
    assert str(target) in msg and IIW_SHA in msg and actual in msg
    assert fetch(*IIW, verify=False) == target
    problems = [(s, e.name) for e, s, _ in registry.verify("imageinwords") if s != "ok"]
    assert ("corrupt", "imageinwords/IIW-400/data.jsonl") in problems


def test_missing_file_offline_error_gives_url_and_remedy(tmp_path, monkeypatch):
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("CAPAUDIT_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        fetch(*IIW)
    msg = str(err.value)
    assert isinstance(err.value, FileNotFoundError)
    assert "imageinwords/IIW-400/data.jsonl" in msg and IIW_SHA in msg
    assert entry(*IIW).url in msg and "CAPAUDIT_DATA_DIR" in msg


def test_failed_download_is_a_data_error(tmp_path, monkeypatch):
    """A refused connection (no network needed) ends in DataError and leaves no partial file."""
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("CAPAUDIT_OFFLINE", raising=False)
    e = entry(*IIW)
    bad = registry.RegistryEntry(**{**{k: getattr(e, k) for k in e.__dataclass_fields__}, "url": "http://127.0.0.1:9/x"})
    monkeypatch.setattr(registry, "entry", lambda *a, **k: bad)
    with pytest.raises(DataError, match="download failed") as err:
        fetch(*IIW)
    assert "http://127.0.0.1:9/x" in str(err.value)
    folder = tmp_path / "empty" / "imageinwords" / "IIW-400"
    assert not folder.exists() or list(folder.iterdir()) == []


def test_download_writes_verified_file(tmp_path, monkeypatch, data_dir):
    """file:// URL stands in for the network: download, verify, atomic rename."""
    src = data_dir / "imageinwords" / "IIW-400" / "data.jsonl"
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CAPAUDIT_OFFLINE", raising=False)
    e = entry(*IIW)
    good = registry.RegistryEntry(**{**{k: getattr(e, k) for k in e.__dataclass_fields__}, "url": src.as_uri()})
    monkeypatch.setattr(registry, "entry", lambda *a, **k: good)
    p = fetch(*IIW)
    assert p == tmp_path / "cache" / "imageinwords" / "IIW-400" / "data.jsonl"
    assert p.read_bytes() == src.read_bytes()


def test_build_registry_matches_committed(data_dir):
    built = build_registry.build(data_dir)
    committed = json.loads(registry.REGISTRY_PATH.read_text(encoding="utf-8"))
    assert built["entries"] == committed["entries"]
    assert json.loads(build_registry.dumps(built)) == built


def test_build_registry_fails_loudly_on_mismatch(tmp_path, data_dir):
    root = tmp_path / "data"
    shutil.copytree(data_dir / "drawbench", root / "drawbench")
    (root / "drawbench" / "drawbench.csv").write_text("tampered\n")
    with pytest.raises(build_registry.ProvenanceError, match=r"drawbench\.csv: sha256 .* != PROVENANCE\.md 5e135bae"):
        build_registry.build(root)


def test_build_registry_unlisted_file_gets_computed_sha(tmp_path, data_dir):
    root = tmp_path / "data"
    shutil.copytree(data_dir / "drawbench", root / "drawbench")
    (root / "drawbench" / "extra.txt").write_text("hello\n")
    reg = build_registry.build(root)
    extra = [e for e in reg["entries"] if e["path"] == "extra.txt"][0]
    assert extra["sha256_source"] == "computed"
    assert extra["sha256"] == hashlib.sha256(b"hello\n").hexdigest()


def test_cli_verify_and_path(capsys, tmp_path, monkeypatch, data_dir):
    from capaudit.cli import main

    assert main(["data", "verify", "--dataset", "imageinwords"]) == 0
    assert "5 ok, 0 corrupt" in capsys.readouterr().out
    assert main(["data", "path", *IIW]) == 0
    assert capsys.readouterr().out.strip() == str(data_dir / "imageinwords" / "IIW-400" / "data.jsonl")
    assert main(["data", "list", "--dataset", "drawbench"]) == 0
    assert "5e135bae590252ac2913fb6f4bd551699dd8211e856943385321c59b896d5efb" in capsys.readouterr().out
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(tmp_path / "empty"))
    assert main(["data", "verify", "--dataset", "imageinwords"]) == 1


def test_fetch_registered_folder(data_dir):
    p = fetch("dpg_bench", "prompts")
    assert p == data_dir / "dpg_bench" / "prompts"
    assert len(list(p.glob("*.txt"))) == 1065


def test_fetch_folder_reports_corrupt_member(tmp_path, monkeypatch, data_dir):
    root = tmp_path / "data"
    shutil.copytree(data_dir / "tifa", root / "tifa")
    (root / "tifa" / "sample" / "sample_text_inputs.json").write_text("[]")
    monkeypatch.setenv("CAPAUDIT_DATA_DIR", str(root))
    with pytest.raises(DataError, match=r"sample_text_inputs\.json: sha256 mismatch .*expected f3ad068f"):
        fetch("tifa", "sample")
