"""capaudit.engine on a local Ray cluster (num_cpus=2, no dashboard): same numbers as local runs,
and the sharded model-call fan-out (``capaudit llm run --engine ray``)."""

from __future__ import annotations

import json
from functools import partial

import pytest

ray = pytest.importorskip("ray")

from capaudit.engine import list_shards, map_merge, summary_json  # noqa: E402
from capaudit.llm.fanout import run_requests_sharded  # noqa: E402
from capaudit.errors import InputError  # noqa: E402
from capaudit.llm.client import run_requests  # noqa: E402
from capaudit.llm.requests import write_requests  # noqa: E402
from capaudit.llm.store import merge  # noqa: E402
from _ray import local_ray  # noqa: E402,F401  (module-scoped local Ray cluster fixture)
from test_engine import concat, count_words, merge_counters, ordered_ids, rows, write_jsonl  # noqa: E402
from test_llm_support import FaultServer, make_rows  # noqa: E402

TIMING = ("started_at", "elapsed_sec")
FAST = dict(timeout=2.0, backoff_base=0.005, backoff_max=0.05)


def without_timing(store) -> dict:
    return {rid: {k: v for k, v in row.items() if k not in TIMING} for rid, row in merge(store).items()}


def test_ray_map_merge_identical_to_local(local_ray, tmp_path):
    f = write_jsonl(tmp_path / "c.jsonl", rows(500))
    local = map_merge(list_shards(f, num_shards=1), count_words, merge_counters)
    two = map_merge(list_shards(f, num_shards=2), count_words, merge_counters, engine="ray", workers=2)
    many = map_merge(list_shards(f, num_shards=64), count_words, merge_counters, engine="ray", workers=2)
    assert summary_json(dict(local)) == summary_json(dict(two)) == summary_json(dict(many))
    assert local["caption"] == 500
    # merge order is shard order, however the tasks finish
    assert map_merge(list_shards(f, num_shards=16), ordered_ids, concat, engine="ray", workers=2,
                     merge_every=3) == list(range(500))
    # a task's error is raised as itself
    with pytest.raises(ZeroDivisionError):
        map_merge([1, 0], partial(divmod, 1), list, engine="ray", workers=2)


def test_llm_run_sharded_on_ray_equals_local_run_and_resumes_per_shard(local_ray, tmp_path):
    reqs = make_rows(120)
    path = tmp_path / "req.jsonl"
    write_requests(path, reqs)
    bad = {reqs[7]["request_id"]: "400", reqs[50]["request_id"]: "schema"}
    with FaultServer(always=bad) as srv:
        local = tmp_path / "local.jsonl"
        s0 = run_requests(str(path), local, [srv.url], "fault-model", concurrency=8, progress=False, **FAST)
        out = tmp_path / "sharded"
        s1 = run_requests_sharded(path, out, [srv.url], "fault-model", shards=5, engine="ray", workers=2,
                                  concurrency=8, **FAST)
        assert (s1.answered, s1.failed, s1.sent, s1.input_rows) == (s0.answered, s0.failed, 120, 120) == (118, 2, 120, 120)
        assert sorted(p.name for p in out.glob("*.jsonl")) == [f"shard-{i:05d}-of-00005.jsonl" for i in range(5)]
        assert without_timing(out) == without_timing(local)
        # resume per shard: nothing answered is asked again; failures are re-asked
        s2 = run_requests_sharded(path, out, [srv.url], "fault-model", shards=5, engine="ray", workers=2,
                                  concurrency=8, **FAST)
        assert (s2.skipped_answered, s2.sent) == (118, 2)
        srv.always.clear()
        s3 = run_requests_sharded(path, out, [srv.url], "fault-model", shards=5, engine="ray", workers=2,
                                  concurrency=8, only_failed=True, **FAST)
        assert (s3.sent, s3.answered) == (2, 2)
        assert all(r["ok"] for r in merge(out).values()) and len(merge(out)) == 120
        # a different cut of the same store is refused
        with pytest.raises(InputError, match="same request file and --shards 5"):
            run_requests_sharded(path, out, [srv.url], "fault-model", shards=7, engine="ray", workers=2, **FAST)
    manifest = json.loads((out / "_shards.json").read_text())
    assert manifest == {"requests": "req.jsonl", "size": path.stat().st_size, "shards": 5}


def test_text_stats_byte_identical_local_ray2_ray64(local_ray, tmp_path, data_dir):
    """The issue's acceptance test: local, 2-worker Ray and 64-shard Ray runs of the survey on the
    same input give byte-identical sorted-key JSON (and so does the CLI with --engine ray)."""
    from capaudit.cli import main
    from capaudit.text.survey import SurveyConfig, survey_captions, survey_files

    caps = []
    for line in open(data_dir / "imageinwords" / "IIW-400" / "data.jsonl", encoding="utf-8"):
        row = json.loads(line)
        caps += [row[k] for k in ("IIW", "IIW-P5B") if isinstance(row.get(k), str) and row[k].strip()]
    for v in list(json.loads((data_dir / "coco_karpathy_captions" / "test_captions.json").read_text()).values())[:800]:
        caps += v
    path = tmp_path / "captions.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for c in caps:
            fh.write(json.dumps({"caption": c}, ensure_ascii=False) + "\n")
    cfg = SurveyConfig()
    local = summary_json(survey_captions([c.strip() for c in caps], cfg).finalize())
    ray2 = summary_json(survey_files(path, cfg, engine="ray", workers=2, caption_field="caption").finalize())
    ray64 = summary_json(survey_files(path, cfg, engine="ray", workers=2, shards=64, caption_field="caption").finalize())
    assert local == ray2 == ray64
    out_l, out_r = tmp_path / "l.json", tmp_path / "r.json"
    assert main(["text-stats", str(path), "--caption-field", "caption", "--detail", "--out", str(out_l)]) == 0
    assert main(["text-stats", str(path), "--caption-field", "caption", "--detail", "--engine", "ray",
                 "--workers", "2", "--shards", "64", "--out", str(out_r)]) == 0
    assert out_l.read_bytes() == out_r.read_bytes()
