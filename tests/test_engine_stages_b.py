"""The alt-text stage on the engine (issue 15): ``capaudit coverage`` and ``capaudit alttext filter``
with ``--engine local|ray``, ``--workers``, ``--shards`` give byte-identical outputs to a
single-process run on real data (the img2dataset alt-text sample, COCO Karpathy captions)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from capaudit.alttext.blocks import RareWords
from capaudit.alttext.coverage import HypernymCounts, hypernym_share
from capaudit.alttext.rows import RowSource
from capaudit.alttext.sharded import Shared, _owned, alttext_shards, shard_files, shard_rows
from capaudit.cli import main
from capaudit.errors import InputError

ALT_ROWS = 1000
OVERRIDE = ["--set", "rare_words.min_count=2",  # a rare-word rule that needs the whole input's table
            "--set", "pos_required.require=[noun]"]  # product titles without a determiner reach the transforms


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, data_dir):
    """A slice of the alt-text sample as JSONL and as Parquet with 97-row row groups, and COCO test
    captions as JSONL (a list of captions per image)."""
    d = tmp_path_factory.mktemp("inputs")
    table = pq.read_table(data_dir / "img2dataset_alttext_sample" / "test_10000.parquet").slice(0, ALT_ROWS)
    rows = table.to_pylist()
    rows[3]["TEXT"] = None          # an empty text: the funnel's empty_text step
    with open(d / "alt.jsonl", "w", encoding="utf-8") as fh:
        for i, r in enumerate(rows):
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            if i == 10:
                fh.write("\n")      # a blank line is not a row
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), d / "alt.parquet", row_group_size=97)
    caps = json.loads((data_dir / "coco_karpathy_captions" / "test_captions.json").read_text(encoding="utf-8"))
    with open(d / "coco.jsonl", "w", encoding="utf-8") as fh:
        for k, v in list(caps.items())[:600]:
            fh.write(json.dumps({"image": k, "captions": v}, ensure_ascii=False) + "\n")
    return d


def _filter(inp: Path, out: Path, pipeline: str, *extra: str) -> bytes:
    out.mkdir(parents=True, exist_ok=True)
    rc = main(["alttext", "filter", "--input", str(inp), "--text-field", "TEXT", "--pipeline", pipeline,
               "--out", str(out / "kept.jsonl"), "--funnel", str(out / "funnel.csv"), "--batch-size", "100",
               *OVERRIDE, *extra])
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == ["funnel.csv", "kept.dropped.jsonl", "kept.jsonl"]  # no parts left
    return b"\0".join((out / n).read_bytes() for n in ("kept.jsonl", "kept.dropped.jsonl", "funnel.csv"))


def _coverage(inp: Path, out: Path, field: str, vocab: str, *extra: str) -> bytes:
    rc = main(["coverage", "--input", str(inp), "--text-field", field, "--vocabulary", vocab, "--detail",
               "--out", str(out), *extra])
    assert rc == 0
    return out.read_bytes()


@pytest.fixture(scope="module")
def single(inputs, tmp_path_factory):
    """Single-process outputs (the reference)."""
    d = tmp_path_factory.mktemp("single")
    out = {p: _filter(inputs / "alt.jsonl", d / p, p) for p in ("cc12m", "cc3m")}
    out["parquet"] = _filter(inputs / "alt.parquet", d / "pq", "cc12m")
    out["coco"] = _coverage(inputs / "coco.jsonl", d / "coco.json", "captions", "lvis")
    out["alt"] = _coverage(inputs / "alt.parquet", d / "alt.json", "TEXT", "nocaps_ood", "--url-field", "URL")
    return out


def test_single_process_references_are_meaningful(single, inputs, data_dir):
    """The references exercise what sharding could break: rows kept after spaCy blocks and
    transformations, the whole-input rare-word table, an empty text, URLs and list captions."""
    kept = [json.loads(l) for l in single["cc12m"].split(b"\0")[0].decode().splitlines()]
    funnel = {r.split(",")[1]: r.split(",") for r in single["cc12m"].split(b"\0")[2].decode().splitlines()[1:]}
    assert funnel["empty_text"][5] == "1" and funnel["rare_words"][4] != "0"             # dropped
    assert 10 < len(kept) < ALT_ROWS and int(funnel["person_substitution"][8]) > 0       # changed
    assert kept[0]["alttext_row"] < kept[-1]["alttext_row"] <= ALT_ROWS - 1
    assert single["parquet"] == single["cc12m"]        # JSONL and Parquet copies of the same rows
    coco = json.loads(single["coco"])
    caps = json.loads((data_dir / "coco_karpathy_captions" / "test_captions.json").read_text(encoding="utf-8"))
    assert coco["records"] == sum(len(v) for v in list(caps.values())[:600]) > 3000 and coco["instances_total"] > 1000 and coco["top_tokens"][0][0] == "a"
    assert json.loads(single["alt"])["domains"]["urls"] == ALT_ROWS - 1       # the empty text is no record


def test_local_workers_and_shards_byte_identical(single, inputs, tmp_path):
    """local 2 workers (default shards), local 1 worker x 64 shards, local 2 workers x 64 shards."""
    for i, flags in enumerate((["--workers", "2"], ["--shards", "64"], ["--workers", "2", "--shards", "64"])):
        assert _filter(inputs / "alt.jsonl", tmp_path / f"f{i}", "cc12m", *flags) == single["cc12m"]
        assert _coverage(inputs / "coco.jsonl", tmp_path / f"c{i}.json", "captions", "lvis", *flags) == single["coco"]
    assert _filter(inputs / "alt.jsonl", tmp_path / "cc3m", "cc3m", "--workers", "2", "--shards", "13") == single["cc3m"]
    assert _filter(inputs / "alt.parquet", tmp_path / "pq", "cc12m", "--workers", "2", "--shards", "64") == single["parquet"]
    assert _coverage(inputs / "alt.parquet", tmp_path / "alt.json", "TEXT", "nocaps_ood", "--url-field", "URL",
                     "--workers", "2", "--shards", "9") == single["alt"]


def test_shards_read_rows_like_the_single_process_reader(inputs):
    for name in ("alt.jsonl", "alt.parquet"):
        src = RowSource.from_spec({"file": str(inputs / name)})
        whole = [(r, str(w)) for r, w in src]
        parts = alttext_shards(shard_files(src), shards=64)
        assert len(parts) > 10 and [p.index for p in parts] == list(range(len(parts)))
        assert [(r, str(w)) for p in parts for r, w in shard_rows(p)] == whole
    assert whole[11][1].endswith("alt.parquet: row 12")
    src = RowSource.from_spec({"file": str(inputs / "alt.jsonl")})
    assert [w for _, w in src][11].endswith("alt.jsonl: line 13")      # after the blank line 12


def test_owned_batches_tile_the_input():
    # shards of 5, 0, 1, 250, 3 rows; batches of 100: every batch is filtered by the shard it starts in
    counts = [5, 0, 1, 250, 3]
    offsets = [0, 5, 5, 6, 256]
    ranges = [_owned(i, offsets, counts, 259, 100) for i in range(5)]
    assert ranges == [(0, 100), (100, 100), (100, 100), (100, 259), (259, 259)]


def test_rare_word_tables_merge_exactly():
    texts = ["a red dog", "a red fox 42", "a blue fox", "the dog"]
    for params in ({}, {"hash_buckets": 64}):
        whole = RareWords(min_count=2, **params)
        for t in texts:
            whole.observe(t)
        parts = []
        for chunk in (texts[:1], texts[1:3], texts[3:]):
            b = RareWords(min_count=2, **params)
            for t in chunk:
                b.observe(t)
            parts.append(b.state())
        merged = RareWords(min_count=2, **params)
        merged.load_state(merged.merge_states(parts))
        assert merged.observed == whole.observed == 4 and merged.table_size() == whole.table_size()
        counts = [merged.count(w) for w in ("a", "red", "dog", "fox", "blue", "the", "42")]
        assert counts == [whole.count(w) for w in ("a", "red", "dog", "fox", "blue", "the", "42")]
        if not params:
            assert counts == [3, 2, 2, 2, 1, 1, 0]          # digits are not counted


def test_hypernym_counts_match_hypernym_share_and_merge():
    texts = ["painting by artist", "a dog", "actor and person by the sea", "photo by artist"]
    hyp = ["artist", "actor", "person"]
    whole = HypernymCounts(tuple(hyp))
    for t in texts:
        whole.add(t)
    h = hypernym_share(texts, hyp)
    row = whole.row()
    assert (row["records"], row["share_with_hypernym"], row["hypernyms_per_1k_words"]) == \
        (h["records"], h["share_with_hypernym"], h["per_1k_words"]) == (4, 0.75, 1000 * 4 / 14)
    assert row["by_bigrams"] == 3 and row["by_followed_by_hypernym"] == 2 / 3
    assert row["top_hypernyms"] == "artist 2, actor 1, person 1"
    a, b = HypernymCounts(tuple(hyp)), HypernymCounts(tuple(hyp))
    for t in texts[:2]:
        a.add(t)
    for t in texts[2:]:
        b.add(t)
    assert a.merge(b).row() == row


def test_shared_payload_is_unpickled_once_per_process():
    import pickle

    s = Shared({"table": list(range(5))})
    one, two = pickle.loads(pickle.dumps(s)), pickle.loads(pickle.dumps(s))
    assert one is two and one.payload == {"table": [0, 1, 2, 3, 4]}


def test_errors_name_file_line_field_and_formats(inputs, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    lines = (inputs / "alt.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:300]
    lines[200] = lines[200][:-3] + "\n"      # line 201: cut JSON
    lines[280] = "[1, 2]\n"                  # line 281 (a later shard): not an object; the first error is reported
    bad.write_text("".join(lines), encoding="utf-8")
    for flags in ([], ["--workers", "2", "--shards", "6"]):
        rc = main(["alttext", "filter", "--input", str(bad), "--text-field", "TEXT", "--pipeline", "cc12m",
                   "--out", str(tmp_path / "k.jsonl"), "--funnel", str(tmp_path / "f.csv"), *flags])
        err = capsys.readouterr().err
        assert rc == 1 and f"{bad}: line 201: not valid JSON" in err, err
        rc = main(["coverage", "--input", str(inputs / "alt.jsonl"), "--text-field", "CAPTION", "--vocabulary", "lvis",
                   "--out", str(tmp_path / "c.json"), *flags])
        err = capsys.readouterr().err
        assert rc == 1 and "alt.jsonl: line 1: no field 'CAPTION' (fields: TEXT, URL)" in err, err
    assert not list(tmp_path.glob("k.jsonl*")) and not (tmp_path / "f.csv").exists()
    assert not [p for p in tmp_path.iterdir() if ".parts-" in p.name]
    tsv = tmp_path / "in.tsv"
    tsv.write_text("caption\nA dog on a beach\n", encoding="utf-8")
    for cmd in (["alttext", "filter", "--pipeline", "cc12m", "--funnel", str(tmp_path / "f.csv")], ["coverage", "--vocabulary", "lvis"]):
        rc = main([*cmd, "--input", str(tsv), "--text-field", "caption", "--out", str(tmp_path / "o.json"),
                   "--engine", "ray"])
        err = capsys.readouterr().err.strip()
        assert rc == 1 and len(err.splitlines()) == 1 and str(tsv) in err and "JSONL" in err and "Parquet" in err, err
    # a row limit keeps a local run in one process; on Ray it is refused
    rc = main(["coverage", "--input", str(inputs / "alt.jsonl"), "--text-field", "TEXT", "--vocabulary", "lvis",
               "--out", str(tmp_path / "o.json"), "--max-rows", "10", "--engine", "ray"])
    assert rc == 1 and "--max-rows" in capsys.readouterr().err


def test_stage_engine_params_same_artifacts(inputs, tmp_path, monkeypatch):
    """run_filters / run_coverage with ``alttext: {workers: 2, shards: 5}`` write the same artifacts
    as the default single-process run (filtered corpora and the hypernym check included)."""
    from capaudit.alttext.stage import run_coverage, run_filters
    from capaudit.config import load_config

    small = tmp_path / "small.jsonl"
    small.write_text("".join((inputs / "alt.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:400]),
                     encoding="utf-8")
    from capaudit.alttext import sharded

    calls = []
    real = sharded.map_merge
    monkeypatch.setattr(sharded, "map_merge", lambda *a, **k: calls.append(k["workers"]) or real(*a, **k))
    arts = {}
    for tag, eng in (("one", {}), ("many", {"workers": 2, "shards": 5})):
        params = {"run": tag, "out_root": str(tmp_path / "outputs"), "notebooks": [], "surfaces": [],
                  "alttext": {**eng, "batch_size": 64,
                              "filters": {"pipelines": ["cc12m"], "overrides": {"cc12m": {"rare_words": {"min_count": 2}}},
                                          "corpora": [{"name": "raw", "file": str(small), "text_field": "TEXT",
                                                       "url_field": "URL"}]},
                              "coverage": {"vocabularies": ["nocaps_ood", "lvis"], "filtered": ["raw"],
                                           "corpora": [{"name": "raw", "file": str(small), "text_field": "TEXT",
                                                        "url_field": "URL"}],
                                           "hypernym_check": ["raw", "raw:cc12m"]}}}
        p = tmp_path / f"{tag}.yaml"
        p.write_text(yaml.safe_dump(params))
        cfg = load_config(p)
        run_filters(cfg)
        cov = run_coverage(cfg)
        assert len(cov["hypernym_check"]) == 2
        base = tmp_path / "outputs" / tag
        arts[tag] = {str(f.relative_to(base)): f.read_bytes() for f in sorted(base.rglob("*"))
                     if f.is_file() and "manifest" not in f.name and "numbers" not in str(f)}
    assert arts["one"] == arts["many"] and len(arts["one"]) > 15
    assert {"artifacts/tables/alttext_funnel_raw.json", "artifacts/tables/alttext_coverage.json",
            "artifacts/tables/alttext_hypernym_check.json"} <= set(arts["one"])  # table rows, the same too
    # the engine ran: filter (2 passes), coverage of the corpus and of the filtered rows
    assert calls == [2, 2, 2, 2]


# --- Ray ---------------------------------------------------------------------------------------------------

from _ray import local_ray  # noqa: E402,F401  (module-scoped local Ray cluster fixture)


def test_ray_2_workers_and_64_shards_byte_identical(single, inputs, local_ray, tmp_path):
    """The issue's acceptance test for the alt-text stage: Ray with 2 workers (default shards) and
    with 64 shards writes the bytes of the single-process run (filter outputs and COVERAGE.json)."""
    for i, flags in enumerate((["--engine", "ray", "--workers", "2"], ["--engine", "ray", "--workers", "2", "--shards", "64"])):
        assert _filter(inputs / "alt.jsonl", tmp_path / f"f{i}", "cc12m", *flags) == single["cc12m"]
        assert _coverage(inputs / "coco.jsonl", tmp_path / f"c{i}.json", "captions", "lvis", *flags) == single["coco"]
    assert _coverage(inputs / "alt.parquet", tmp_path / "alt.json", "TEXT", "nocaps_ood", "--url-field", "URL",
                     "--engine", "ray", "--workers", "2", "--shards", "64") == single["alt"]
    # a bad row inside a Ray task is reported as on one machine
    bad = tmp_path / "bad.jsonl"
    bad.write_text((inputs / "alt.jsonl").read_text(encoding="utf-8").replace('"TEXT": ', '"T": ', 1), encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl: line 1: no field 'TEXT'"):
        from capaudit.alttext.file_runs import filter_file

        filter_file({"file": str(bad)}, "TEXT", "cc12m", tmp_path / "k.jsonl", tmp_path / "f.csv", engine="ray",
                    workers=2, shards=8)
