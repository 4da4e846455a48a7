"""The ``cc12m:`` params section: typed values, one line per bad key, Hub copies named by preflight."""

from __future__ import annotations

from pathlib import Path

import pytest

from capaudit.cc12m.stage import fetch_from_hub, HubFiles, is_present, parse_params
from capaudit.errors import InputError, OfflineError

SURFACES = [{"name": "llava", "path": "a.parquet", "join": "key", "key": "key", "url": "url", "caption": ["c1", "c2"]},
            {"name": "pixel", "path": "b.jsonl", "join": "url", "url": "url", "caption": "vlm_caption",
             "hub": {"repo": "org/pixel", "allow": "*.parquet"}}]


def test_the_section_becomes_typed_params_with_the_reference_defaults() -> None:
    p = parse_params({"surfaces": SURFACES, "shards": "wds/*.tar"})
    assert [s.name for s in p.surfaces] == ["llava", "pixel"] and p.surfaces[0].caption_fields == ("c1", "c2")
    assert (p.max_rows, p.seed, p.key_normalization, p.skip_incomplete, p.allow_missing) == (5000, 0, "zfill9", True, True)
    assert p.surface_hubs == (("pixel", HubFiles("org/pixel", None, ("*.parquet",))),)


@pytest.mark.parametrize("section, where", [
    ({"surfaces": SURFACES[:1], "shards": "x"}, "cc12m.surfaces: at least two"),
    ({"surfaces": [SURFACES[0], {**SURFACES[1], "join": "name"}], "shards": "x"}, "cc12m.surfaces[1].join"),
    ({"surfaces": [SURFACES[0], {**SURFACES[1], "url": None}], "shards": "x"}, "cc12m.surfaces[1]: join: url needs 'url'"),
    ({"surfaces": [SURFACES[0], {**SURFACES[1], "caption": []}], "shards": "x"}, "cc12m.surfaces[1].caption"),
    ({"surfaces": SURFACES}, "cc12m.shards"),
    ({"surfaces": SURFACES, "shards": "x", "shards_hub": {"revision": "r"}}, "cc12m.shards_hub: expected a mapping"),
])
def test_a_bad_key_is_one_line_naming_it(section: dict, where: str) -> None:
    with pytest.raises(InputError) as e:
        parse_params(section)
    assert where in str(e.value) and "\n" not in str(e.value)


def test_a_missing_hub_copy_offline_is_one_line_naming_the_repository(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    pattern = str(tmp_path / "pixel" / "*.parquet")
    assert not is_present(pattern)
    with pytest.raises(OfflineError, match=r"org/pixel.*HF_HUB_OFFLINE is set.*huggingface-cli download --repo-type "
                                           r"dataset org/pixel --local-dir .*pixel"):
        fetch_from_hub(pattern, HubFiles("org/pixel"))
    assert not (tmp_path / "pixel").exists()
    (tmp_path / "pixel").mkdir()
    (tmp_path / "pixel" / "x.parquet").write_bytes(b"")
    used = fetch_from_hub(pattern, HubFiles("org/pixel"))  # present but not checkable: used and said so
    assert used["checked_against_hub"] is False and "HF_HUB_OFFLINE" in used["why"]


def test_preflight_names_the_hub_copies_that_are_not_here(tmp_path: Path) -> None:
    from capaudit.config import load_config
    from capaudit.preflight import needs

    import yaml

    (tmp_path / "here.parquet").write_bytes(b"")
    cfg = {"run": "x", "notebooks": [], "cc12m": {"surfaces": [
        {**SURFACES[0], "path": str(tmp_path / "here.parquet"), "hub": {"repo": "org/llava"}},
        {**SURFACES[1], "path": str(tmp_path / "gone" / "*.parquet")}],
        "shards": str(tmp_path / "wds" / "*.tar"), "shards_hub": {"repo": "org/wds", "revision": "abc"}}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    got = {(n.target, n.where) for n in needs(load_config(tmp_path / "p.yaml"))}
    assert got == {("org/pixel", "cc12m.surfaces[pixel]"), ("org/wds@abc", "cc12m.shards")}


@pytest.mark.parametrize("key, value, expect", [
    ("match", "URL", "cc12m.match: one of url, key"), ("naming", "x", "cc12m.naming"),
    ("key_normalization", "zfill8", "cc12m.key_normalization"), ("allow_missing", "false", "true or false"),
    ("max_rows", 0, "cc12m.max_rows: a positive whole number"), ("max_rows", -5, "cc12m.max_rows"),
    ("seed", "0", "cc12m.seed"),
])
def test_bad_choices_and_flags_are_refused(key: str, value, expect: str) -> None:
    with pytest.raises(InputError, match=expect):
        parse_params({"surfaces": SURFACES, "shards": "x", key: value})


def test_double_star_patterns_search_every_depth(tmp_path: Path) -> None:
    from capaudit.cc12m.surface_loading import expand_inputs

    for rel in ("top.parquet", "a/mid.parquet", "a/b/deep.parquet"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    found = expand_inputs(str(tmp_path / "**" / "*.parquet"), "s")
    assert sorted(p.name for p in found) == ["deep.parquet", "mid.parquet", "top.parquet"]
    assert is_present(str(tmp_path / "**" / "deep.parquet"))
