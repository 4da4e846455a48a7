"""Prompt-pool preparation (reference-spec §3.1) and prompt-file readers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from capaudit.prompts.io import iter_prompt_records, load_pairs, load_prompts
from capaudit.prompts.pools import (
    PoolFile,
    PoolSource,
    UnionSpec,
    normalize_prompt,
    parse_source_arg,
    prepare_pools,
    prompt_hash,
    read_prepared,
    safety_reason,
    source_from_params,
)


def test_normalize_and_hash():
    assert normalize_prompt("  a\x00red \t\n car  ") == "a red car"
    assert normalize_prompt("\x00 \n") == ""
    assert prompt_hash("A Red Car") == hashlib.blake2b(b"a red car", digest_size=16).hexdigest()
    assert prompt_hash("A Red Car") == prompt_hash("a red car")


@pytest.mark.parametrize(
    "prompt, reason",
    [
        ("see https://example.com for more", "url"),
        ("visit www.example.org", "url"),
        ("mail me at someone@example.com", "email"),
        ("call +1 555-123-4567 now", "phone"),
        ("an NSFW painting", "keyword"),
        ("a nude statue", "keyword"),
        ("a red car at 1920 1080 resolution", None),
        ("a photo of Sussex countryside", None),
        ("8 k, unreal engine 5, artstation", None),
    ],
)
def test_safety_filter(prompt, reason):
    assert safety_reason(prompt) == reason


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_prepare_counts_and_files(tmp_path: Path):
    raw = _write(
        tmp_path / "raw.txt",
        "A red car parked outside\n"  # kept
        "\n"  # empty
        "a  RED car parked\x00outside\n"  # duplicate after normalisation + lower-casing
        "two words\n"  # too short (2 lex units)
        + " ".join(["w"] * 6)
        + "\n"  # too long with max_tokens=5
        "nsfw art of a cat\n"  # kept raw, dropped by the safety filter
        "blue sky over sea\n",  # kept
    )
    out = tmp_path / "pools"
    prepared = prepare_pools([PoolSource("toy", (PoolFile(raw),))], out, min_tokens=3, max_tokens=5)
    entry = prepared.manifest["sources"]["toy"]
    assert entry["stats"] == {
        "read": 7, "empty": 1, "duplicate": 1, "too_short": 1, "too_long": 1,
        "filtered_safety": 1, "raw_written": 3, "filtered_written": 2,
    }
    assert entry["safety_reasons"]["keyword"] == 1
    # histogram over non-empty de-duplicated prompts: 5, 2, 6, 5, 4 lex units
    assert entry["token_histogram"] == {"2": 1, "4": 1, "5": 2, "6": 1}
    raw_rows = read_prepared(out / "toy.prompt_only.jsonl")
    assert [r["raw_index"] for r in raw_rows] == [0, 5, 6]
    assert raw_rows[0] == {
        "source": "toy", "prompt": "A red car parked outside", "prompt_hash": prompt_hash("a red car parked outside"),
        "tokens_lexical": 5, "raw_index": 0,
    }
    assert [r["prompt"] for r in read_prepared(out / "toy.filtered.jsonl")] == ["A red car parked outside", "blue sky over sea"]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["sources"]["toy"]["stats"]["raw_written"] == 3


def test_histogram_capped_at_512(tmp_path: Path):
    raw = _write(tmp_path / "long.txt", " ".join(["w"] * 600) + "\n" + " ".join(["v"] * 700) + "\n")
    prepared = prepare_pools([PoolSource("long", (PoolFile(raw),))], tmp_path / "o")
    entry = prepared.manifest["sources"]["long"]
    assert entry["token_histogram"] == {"512": 2}
    assert entry["stats"]["too_long"] == 2


def test_cross_pool_overlap_and_union(tmp_path: Path):
    a = _write(tmp_path / "a.txt", "a red car parked\nblue sky over sea\nthree cats on a mat\n")
    b = _write(tmp_path / "b.txt", "Blue  sky over sea\na dog in the park\n")
    prepared = prepare_pools(
        [PoolSource("a", (PoolFile(a),)), PoolSource("b", (PoolFile(b),))],
        tmp_path / "o",
        unions=[UnionSpec("ab", ("a", "b"))],
    )
    assert prepared.overlap == [
        {"pool_a": "a", "pool_b": "b", "prompts_a": 3, "prompts_b": 2, "shared": 1,
         "share_of_a": round(1 / 3, 6), "share_of_b": 0.5}
    ]
    ov = prepared.manifest["overlap"]
    assert (ov["prompts_total"], ov["distinct_prompts"], ov["cross_pool_duplicates"]) == (5, 4, 1)
    assert ov["pools"]["b"] == {"prompts": 2, "unique_to_pool": 1, "shared_with_others": 1}
    union = prepared.manifest["sources"]["ab"]
    assert union["stats"]["raw_written"] == 4 and union["stats"]["duplicate"] == 1
    assert union["members"]["b"] == {"taken": 1, "duplicate_of_earlier_member": 1}
    assert [r["source"] for r in read_prepared(tmp_path / "o" / "ab.filtered.jsonl")] == ["a", "a", "a", "b"]
    assert (tmp_path / "o" / "pool_overlap.tsv").read_text().startswith("pool_a\tpool_b\t")


def test_readers_all_formats(tmp_path: Path):
    _write(tmp_path / "p.jsonl", '{"prompt": "one two three"}\n\n{"prompt": null}\n')
    _write(tmp_path / "p.json", '[{"text": "x y z", "id": "diffusiondb_1"}, {"text": "q r s", "id": "other_2"}]')
    _write(tmp_path / "p.csv", "\ufeffPrompt,Category\n\"a, b, c\",Colors\n")
    _write(tmp_path / "p.tsv", "Prompt\tCategory\nbond\tAbstract\n")
    (tmp_path / "d").mkdir()
    _write(tmp_path / "d" / "2.txt", "second prompt")
    _write(tmp_path / "d" / "1.txt", "first prompt")
    assert list(iter_prompt_records(tmp_path / "p.jsonl")) == ["one two three", ""]
    assert list(iter_prompt_records(tmp_path / "p.json", "text", where_prefix={"id": "diffusiondb_"})) == ["x y z"]
    assert list(iter_prompt_records(tmp_path / "p.csv", "Prompt")) == ["a, b, c"]
    assert list(iter_prompt_records(tmp_path / "p.tsv", "Prompt")) == ["bond"]
    assert list(iter_prompt_records(tmp_path / "d")) == ["first prompt", "second prompt"]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"prompts": ["alpha beta gamma", None, "  "]}), tmp_path / "p.parquet")
    assert load_prompts(tmp_path / "p.parquet", "prompts") == ["alpha beta gamma"]
    assert load_prompts(tmp_path / "p.jsonl", limit=1) == ["one two three"]


def test_reader_errors_name_file_row_field(tmp_path: Path):
    bad = _write(tmp_path / "bad.jsonl", '{"prompt": "ok"}\n{"text": "no prompt"}\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl: row 2: field 'prompt' is missing"):
        list(iter_prompt_records(bad))
    bad = _write(tmp_path / "bad2.jsonl", '{"prompt": 3}\n')
    with pytest.raises(ValueError, match=r"bad2\.jsonl: row 1, field 'prompt': expected a string"):
        load_prompts(bad)
    bad = _write(tmp_path / "bad.csv", "Caption\nx\n")
    with pytest.raises(ValueError, match=r"bad\.csv: row 1 \(header\): column 'Prompt' is missing"):
        list(iter_prompt_records(bad, "Prompt"))
    bad = _write(tmp_path / "bad3.jsonl", '{"prompt": "ok"}\n{not json}\n')
    with pytest.raises(ValueError, match=r"bad3\.jsonl: row 2: not valid JSON"):
        list(iter_prompt_records(bad))


def test_load_pairs(tmp_path: Path):
    pairs = _write(tmp_path / "pairs.jsonl", '{"L": "a", "R": "b"}\n{"L": "c"}\n{"L": null, "R": "d"}\n')
    with pytest.raises(ValueError, match=r"pairs\.jsonl: row 2: field 'R' is missing"):
        load_pairs(pairs, "L", "R")
    got = load_pairs(pairs, "L", "R", skip_incomplete=True)
    assert (got.local, got.reference, got.skipped) == (["a"], ["b"], 2)
    assert load_pairs(pairs, "L", "R", limit=1).local == ["a"]


def test_source_specs(tmp_path: Path, data_dir: Path):
    src = source_from_params({"name": "parti", "dataset": "partiprompts", "path": "PartiPrompts.tsv", "field": "Prompt"})
    assert src.files[0].path == data_dir / "partiprompts" / "PartiPrompts.tsv"
    with pytest.raises(ValueError, match="pool name"):
        source_from_params({"name": "bad name", "path": "x.txt"})
    f = _write(tmp_path / "x.jsonl", "")
    assert parse_source_arg(f"x={f}:text").files[0] == PoolFile(f, "text")
    assert parse_source_arg(f"x={f}").files[0] == PoolFile(f, None)


def test_real_benchmark_pools(data_dir: Path, tmp_path: Path):
    """DrawBench (BOM CSV) and the DSG DiffusionDB subset: counts from their PROVENANCE."""
    sources = [
        source_from_params({"name": "drawbench", "dataset": "drawbench", "path": "drawbench.csv", "field": "Prompt"}),
        source_from_params({"name": "dsg_diffusiondb", "dataset": "dsg", "path": "data/dsg-1k-anns.csv",
                            "field": "text", "where_prefix": {"item_id": "diffusiondb_"}}),
    ]
    prepared = prepare_pools(sources, tmp_path)
    assert prepared.manifest["sources"]["drawbench"]["stats"]["read"] == 200
    dsg = prepared.manifest["sources"]["dsg_diffusiondb"]["stats"]
    # 100 DiffusionDB items, one row per proposition → the rest are duplicates
    assert dsg["read"] - dsg["duplicate"] - dsg["empty"] == 100


# --- Hub pools (params `hub:`) and fair-slice comparisons (params `slice:`) ---------------------

def test_hub_source_resolves_the_registered_pool() -> None:
    txt = source_from_params({"name": "sd2m", "hub": "sd_prompts_2m_andyyang"})
    (pf,) = txt.files
    assert pf.hub is not None and pf.hub.repository == "andyyang/stable_diffusion_prompts_2m"
    assert (pf.hub.field, pf.hub.data_files, pf.hub.split) == ("text", "sd_promts_2m.txt", "train")  # datasets' text builder
    pq = source_from_params({"name": "falah", "hub": "sdxl_refiner_prompts_falah", "revision": "abc"}).files[0]
    assert (pq.hub.repository, pq.hub.field, pq.hub.revision) == ("Falah/1M_SDXL_Refiner_Prompts", "prompts", "abc")
    assert pq.provenance() == {"hub": "Falah/1M_SDXL_Refiner_Prompts", "revision": "abc", "data_files": None,
                               "split": "train", "field": "prompts"}
    with pytest.raises(ValueError, match=r"sources\[x\]\.hub: hf_prompt_pools/no_such_pool is not in the data registry"):
        source_from_params({"name": "x", "hub": "no_such_pool"})


def test_hub_pool_offline_fails_in_one_line_and_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    from capaudit.errors import OfflineError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = source_from_params({"name": "sd2m", "hub": "sd_prompts_2m_andyyang"})
    out = tmp_path / "pools"
    with pytest.raises(OfflineError, match="andyyang/stable_diffusion_prompts_2m.*HF_HUB_OFFLINE is set"):
        prepare_pools([src], out)
    assert not out.exists() or not any(out.iterdir())


def test_slice_comparisons_take_the_slice_pairs_and_roles(tmp_path: Path) -> None:
    from capaudit.prompts.params import parse_params

    slices = {"s1": (tmp_path / "s1" / "pairs.parquet", "ours_a", "ref_b")}
    p = parse_params({"comparisons": [{"name": "c", "slice": "s1"}]}, slices=slices)
    (c,) = p.comparisons
    assert (c.pairs, c.local_surface, c.reference_surface) == (slices["s1"][0], "ours_a", "ref_b")
    assert (c.local_field, c.reference_field) == ("local_caption", "reference_caption")
    with pytest.raises(ValueError, match=r"comparisons\[0\]\.slice: 'nope' is not a slice of this run \(slices: \['s1'\]\)"):
        parse_params({"comparisons": [{"name": "c", "slice": "nope"}]}, slices=slices)
    with pytest.raises(ValueError, match="one of 'pairs'"):
        parse_params({"comparisons": [{"name": "c", "slice": "s1", "pairs": "x.jsonl"}]}, slices=slices)
