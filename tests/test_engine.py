"""capaudit.engine: shard listing/splitting, reading, local map + merge (no Ray needed)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from functools import partial
from pathlib import Path

import pytest

from capaudit.engine import (expand_inputs, iter_shard_captions, iter_shard_records, list_shards, map_merge,
                             summary_json)
from capaudit.engine.executors import check_engine, engine_from_params
from capaudit.engine.shards import iter_shard_lines
from capaudit.errors import EmptyInputError, InputError
from capaudit.surfaces import row_captions


def write_jsonl(path: Path, rows) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def rows(n: int, start: int = 0):
    return [{"id": i, "caption": f"caption number {i} " + "long " * (i % 7) + ("héllo wörld" if i % 5 == 0 else "")}
            for i in range(start, start + n)]


# ---- map functions (module level: they must pickle for process pools and Ray) -------------------

def count_words(shard) -> Counter:
    c = Counter()
    for cap in iter_shard_captions(shard, row_captions, "caption"):
        c.update(cap.lower().split())
    c["__captions__"] += 0
    return c


def merge_counters(parts):
    out = Counter()
    for p in parts:
        out.update(p)
    return out


def ordered_ids(shard):
    return [row["id"] for row, _ in iter_shard_records(shard)]


def concat(parts):
    return [x for p in parts for x in p]


# ---- listing -------------------------------------------------------------------------------------

def test_expand_inputs_folder_glob_and_errors(tmp_path):
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    write_jsonl(d / "b.jsonl", rows(3))
    write_jsonl(d / "sub" / "a.jsonl", rows(3))
    (d / "notes.txt").write_text("not an input")
    assert expand_inputs(d) == [str(d / "b.jsonl"), str(d / "sub" / "a.jsonl")]
    assert expand_inputs(str(d / "**" / "*.jsonl")) == [str(d / "b.jsonl"), str(d / "sub" / "a.jsonl")]
    assert expand_inputs(f"file://{d / 'b.jsonl'}") == [str(d / "b.jsonl")]
    with pytest.raises(InputError, match="no such file or folder"):
        expand_inputs(tmp_path / "missing.jsonl")
    with pytest.raises(InputError, match="no file matches"):
        expand_inputs(str(tmp_path / "*.parquet"))
    with pytest.raises(EmptyInputError):
        expand_inputs([])
    with pytest.raises(InputError, match="cannot shard"):
        list_shards(d / "notes.txt")


@pytest.mark.parametrize("k", [1, 2, 3, 7, 64, 500])
def test_jsonl_byte_ranges_cover_every_line_once(tmp_path, k):
    f = write_jsonl(tmp_path / "c.jsonl", rows(137))
    shards = list_shards(f, num_shards=k)
    assert len(shards) == k and [s.index for s in shards] == list(range(k)) and {s.count for s in shards} == {k}
    ids = [i for s in shards for i in ordered_ids(s)]
    assert ids == list(range(137))  # each line exactly once, in file order


def test_shards_allocated_by_size_and_gzip_kept_whole(tmp_path):
    big = write_jsonl(tmp_path / "a.jsonl", rows(300))
    small = write_jsonl(tmp_path / "b.jsonl", rows(30, 300))
    gz = tmp_path / "c.jsonl.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        for r in rows(10, 330):
            fh.write(json.dumps(r) + "\n")
    shards = list_shards([tmp_path], num_shards=12)
    per = Counter(Path(s.path).name for s in shards)
    assert per["c.jsonl.gz"] == 1 and per["a.jsonl"] > per["b.jsonl"] >= 1 and len(shards) == 12
    ids = [i for s in shards for i in ordered_ids(s)]
    assert sorted(ids) == list(range(340))
    # gzip rows name the line number
    gz_shard = next(s for s in shards if s.format == "jsonl.gz")
    assert list(iter_shard_records(gz_shard))[2][1].endswith("(line 3)")
    # target size instead of a count
    assert len(list_shards(big, target_bytes=-(-big.stat().st_size // 4))) == 4
    assert len(list_shards(small)) == 1


def test_line_offsets_and_bad_rows_name_file_and_offset(tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_bytes(b'{"caption": "a"}\n\n{"caption": "b"}\nnot json\n')
    (shard,) = list_shards(f, num_shards=1)
    assert [off for off, _ in iter_shard_lines(shard)] == [0, 17, 18, 35]
    with pytest.raises(InputError, match=r"x\.jsonl \(byte 35\).*not valid JSON"):
        list(iter_shard_records(shard))
    f.write_bytes(b'{"caption": "a"}\n{"text": "b"}\n')
    (shard,) = list_shards(f, num_shards=1)
    with pytest.raises(InputError, match=r"\(byte 17\) field 'caption': caption field is missing"):
        list(iter_shard_captions(shard, row_captions, "caption"))
    # auto-detection (spec §2.1 field order) when no field is named
    assert list(iter_shard_captions(shard, row_captions)) == ["a", "b"]
    f.write_bytes(b'{"caption": " a "}\n{"text": "b", "caption": ""}\n{"caption": ["c", " ", "d"]}\n')
    (shard,) = list_shards(f, num_shards=1)
    assert list(iter_shard_captions(shard, row_captions)) == ["a", "b"]
    assert list(iter_shard_captions(shard, row_captions, "caption")) == ["a", "c", "d"]


def test_parquet_row_group_shards(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.table({"id": list(range(100)), "caption": [f"c {i}" for i in range(100)]})
    path = tmp_path / "p.parquet"
    pq.write_table(table, path, row_group_size=10)
    shards = list_shards(path, num_shards=4)
    assert len(shards) == 4 and all(s.format == "parquet" for s in shards)
    assert [i for s in shards for i in ordered_ids(s)] == list(range(100))
    assert list(iter_shard_records(shards[0]))[0][1].endswith("row group 0 row 0")
    # never more shards than row groups
    assert len(list_shards(path, num_shards=50)) == 10


# ---- map + merge -----------------------------------------------------------------------------------

def test_map_merge_local_same_result_for_any_workers_and_shards(tmp_path):
    f = write_jsonl(tmp_path / "c.jsonl", rows(400))
    base = map_merge(list_shards(f, num_shards=1), count_words, merge_counters)
    assert base["caption"] == 400 and base["héllo"] == 80
    for k, w in ((5, 1), (16, 2), (64, 2)):
        got = map_merge(list_shards(f, num_shards=k), count_words, merge_counters, engine="local", workers=w)
        assert summary_json(dict(got)) == summary_json(dict(base))
    # parts are merged in shard order whatever finishes first
    ids = map_merge(list_shards(f, num_shards=9), ordered_ids, concat, workers=2, merge_every=2)
    assert ids == list(range(400))


def test_map_merge_errors():
    with pytest.raises(EmptyInputError):
        map_merge([], len, sum)
    with pytest.raises(InputError, match="unknown engine 'spark'"):
        map_merge([[1]], len, sum, engine="spark")
    with pytest.raises(InputError, match="workers must be >= 1"):
        map_merge([[1]], len, sum, workers=0)
    # a map error surfaces as itself, from a worker process too
    with pytest.raises(ZeroDivisionError):
        map_merge([1, 0, 2], partial(divmod, 1), list, workers=2)


def test_engine_params_and_summary_json():
    assert check_engine(" Ray ") == "ray"
    assert engine_from_params({"engine": "ray", "workers": 4, "address": "auto"}, "text_stats") == {
        "engine": "ray", "workers": 4, "address": "auto", "shards": None}
    with pytest.raises(InputError, match=r"text_stats\.workers"):
        engine_from_params({"workers": 0}, "text_stats")
    with pytest.raises(InputError, match=r"text_stats\.shards"):
        engine_from_params({"shards": "many"}, "text_stats")
    import numpy as np

    text = summary_json({"b": np.float64(0.1), "a": [np.int64(3), (1, 2)], "c": {"z": 1, "y": float("nan")}})
    assert text == ('{\n  "a": [\n    3,\n    [\n      1,\n      2\n    ]\n  ],\n  "b": 0.1,\n'
                    '  "c": {\n    "y": "nan",\n    "z": 1\n  }\n}\n')


def test_engine_cli_shards_and_info(tmp_path, capsys):
    from capaudit.cli import main

    f = write_jsonl(tmp_path / "c.jsonl", rows(50))
    assert main(["engine", "shards", str(f), "--shards", "3", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["index"] for s in listed] == [0, 1, 2] and listed[0]["start"] == 0 and listed[-1]["stop"] == -1
    assert main(["engine", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["engines"] == ["local", "ray"]


def test_llm_run_sharded_local_engine_equals_single_store(tmp_path):
    from capaudit.llm.fanout import run_requests_sharded
    from capaudit.llm.client import run_requests
    from capaudit.llm.requests import write_requests
    from capaudit.llm.store import merge
    from test_llm_support import FaultServer, make_rows

    reqs = make_rows(40)
    path = tmp_path / "req.jsonl"
    write_requests(path, reqs)
    fast = dict(timeout=2.0, backoff_base=0.005, backoff_max=0.05)
    strip = lambda store: {k: {f: v for f, v in r.items() if f not in ("started_at", "elapsed_sec")}  # noqa: E731
                           for k, r in merge(store).items()}
    with FaultServer(always={reqs[3]["request_id"]: "400"}) as srv:
        run_requests(str(path), tmp_path / "one.jsonl", [srv.url], "fault-model", progress=False, **fast)
        st = run_requests_sharded(path, tmp_path / "many", [srv.url], "fault-model", shards=3, engine="local",
                                  workers=2, **fast)
        assert (st.answered, st.failed, st.sent) == (39, 1, 40)
        with pytest.raises(InputError, match="already has rows"):
            run_requests_sharded(path, tmp_path / "many", [srv.url], "fault-model", shards=3, engine="local",
                                 resume=False, **fast)
    assert strip(tmp_path / "many") == strip(tmp_path / "one.jsonl")


# ---- spilling and sketches -----------------------------------------------------------------------

def test_spilled_counts_exact_whatever_the_runs(tmp_path):
    import numpy as np

    from capaudit.engine.spill import SpilledCounts, aggregate

    rng = np.random.default_rng(0)
    keys = rng.integers(0, 5000, 40_000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    counts = rng.integers(0, 4, (40_000, 3))
    want_k, want_c = aggregate(keys, counts)
    assert want_k.size == np.unique(keys).size and (want_c.sum(0) == counts.sum(0)).all()
    for runs in (1, 3, 7):
        sc = SpilledCounts(tmp_path / f"r{runs}", "t", ncols=3, partitions=8)
        for part in np.array_split(np.arange(keys.size), runs):
            sc.spill(keys[part], counts[part])
        got = [sc.partition(i) for i in range(8)]
        k = np.concatenate([g[0] for g in got])
        c = np.concatenate([g[1] for g in got])
        order = np.argsort(k)
        assert np.array_equal(k[order], want_k) and np.array_equal(c[order], want_c)
        assert all(np.all(g[0][1:] > g[0][:-1]) for g in got)  # sorted, unique inside a partition
    with pytest.raises(ValueError, match="power of two"):
        SpilledCounts(tmp_path, "x", 1, partitions=6)


def test_hyperloglog_error_and_merge():
    import numpy as np

    from capaudit.engine.hll import HyperLogLog

    rng = np.random.default_rng(1)
    se = HyperLogLog.relative_error(14)
    assert abs(se - 0.008125) < 1e-6
    for n in (0, 7, 3_000, 200_000):
        keys = rng.integers(0, 2**63, n, dtype=np.uint64)
        dup = np.concatenate([keys, keys[: n // 2]])  # duplicates do not change the estimate
        h = HyperLogLog().add(dup)
        est = h.estimate()
        assert est == HyperLogLog().add(keys).estimate()
        assert abs(est - n) <= max(1.0, 4 * se * n), (n, est)  # 4 standard errors
        # merging shards gives the registers of the whole
        parts = [HyperLogLog().add(p) for p in np.array_split(dup, 5)]
        merged = parts[0]
        for p in parts[1:]:
            merged = merged.merge(p)
        assert np.array_equal(merged.registers, h.registers)
    with pytest.raises(ValueError):
        HyperLogLog(3)


def test_cli_llm_run_engine_local_and_text_stats_flags(tmp_path, capsys):
    from capaudit.cli import main
    from capaudit.llm.requests import write_requests
    from capaudit.llm.store import merge
    from test_llm_support import FaultServer, make_rows

    reqs = make_rows(30)
    path = tmp_path / "req.jsonl"
    write_requests(path, reqs)
    with FaultServer() as srv:
        args = ["llm", "run", "--requests", str(path), "--out", str(tmp_path / "store"), "--url", srv.url,
                "--model", "fault-model", "--no-progress", "--engine", "local", "--shards", "3", "--workers", "2",
                "--timeout", "5", "--stats-json", str(tmp_path / "st.json")]
        assert main(args) == 0
        assert json.loads((tmp_path / "st.json").read_text())["answered"] == 30
        assert main(args + ["--resume"]) == 0  # nothing left to ask
        assert json.loads((tmp_path / "st.json").read_text())["sent"] == 0
        assert main(args[:-2] + ["--transport", "openai", "--overwrite"]) == 0
    assert len(merge(tmp_path / "store")) == 30
    assert sorted(p.name for p in (tmp_path / "store").glob("*.jsonl")) == [
        f"shard-{i:05d}-of-00003.jsonl" for i in range(3)]
    # text-stats: the same JSON from the streaming loader, sharded local runs and hll/spill flags
    f = write_jsonl(tmp_path / "c.jsonl", rows(300))
    outs = {}
    for name, extra in (("plain", []), ("shards", ["--shards", "5", "--workers", "2"]),
                        ("spill", ["--spill-dir", str(tmp_path / "sp"), "--max-keys", "50"]),
                        ("stream", ["--max-records", "100000"])):
        out = tmp_path / f"{name}.json"
        assert main(["text-stats", str(f), "--caption-field", "caption", "--out", str(out), *extra]) == 0
        outs[name] = json.loads(out.read_text())
    assert outs["plain"] == outs["shards"] == outs["stream"]
    assert outs["spill"]["budgets"]["64"]["distinct"] == outs["plain"]["budgets"]["64"]["distinct"]
    assert main(["text-stats", str(f), "--caption-field", "caption", "--distinct", "hll", "--out",
                 str(tmp_path / "h.json")]) == 0
