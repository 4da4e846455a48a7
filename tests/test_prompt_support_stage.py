"""The prompt-support stage ``run(cfg)`` and the command-line contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest
import yaml

from capaudit.config import load_config
from capaudit.paper.stage_tables import render_stage_tables
from capaudit.prompts.stage import run
from capaudit.prompts.params import parse_params
from capaudit.summaries.table_rows import read_table_rows
from capaudit.summaries.prompt_support import COLUMNS, read_prompt_support_tsv


def _params(tmp_path: Path, extra_pool: Path) -> Path:
    params = {
        "run": "ps_test",
        "notebooks": ["03_prompt_support"],
        "prompt_support": {
            "budget": 64,
            "ngram": 2,
            "block_size": 5000,
            "reps": 200,
            "seed": 0,
            "pools": {
                "prepare": {
                    "sources": [
                        {"name": "drawbench", "dataset": "drawbench", "path": "drawbench.csv", "field": "Prompt"},
                        {"name": "geneval", "dataset": "geneval", "path": "prompts/generation_prompts.txt"},
                    ],
                    "unions": [{"name": "bench_union", "members": ["drawbench", "geneval"]}],
                },
                "files": [{"name": "toy", "path": str(extra_pool)}],
            },
            "paper_pools": ["drawbench", "geneval", "toy"],
            "comparisons": [
                {"name": "docci_vs_iiw", "pairs": {"dataset": "imageinwords", "path": "DOCCI_Test/data.jsonl"},
                 "local_field": "DOCCI", "reference_field": "IIW", "local_surface": "docci",
                 "reference_surface": "iiw", "block_size": 20},
                {"name": "iiw_vs_p5b", "pairs": {"dataset": "imageinwords", "path": "IIW-400/data.jsonl"},
                 "local_field": "IIW", "reference_field": "IIW-P5B", "block_size": 30, "skip_incomplete": True},
            ],
            "sensitivity": {"budgets": [16, "full"], "ngrams": [1, 2]},
        },
    }
    path = tmp_path / "ps_test.yaml"
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def test_stage_run_writes_every_output(tmp_path: Path):
    pool = tmp_path / "toy.txt"
    pool.write_text("a white toilet in a bathroom\nthree towels on a rack\n", encoding="utf-8")
    cfg = load_config(_params(tmp_path, pool), out_root=tmp_path / "outputs")
    result = run(cfg)
    out = tmp_path / "outputs" / "ps_test"
    rows = read_prompt_support_tsv(out / "artifacts" / "prompt_support" / "prompt_support.tsv")
    assert rows == result.rows
    assert len(rows) == 2 * 4 * 2  # comparisons × pools × metrics
    by = {(r.comparison, r.prompt_pool, r.metric): r for r in rows}
    docci = by[("docci_vs_iiw", "toy", "jsd")]
    assert (docci.blocks, docci.block_size, docci.records, docci.local_surface) == (5, 20, 100, "docci")
    iiw = by[("iiw_vs_p5b", "toy", "jsd")]
    assert (iiw.blocks, iiw.records, iiw.local_surface) == (4, 100, "IIW")  # 100 complete pairs, last block of 10
    assert set(result.wins) == {"docci_vs_iiw", "iiw_vs_p5b"}
    assert all(m.pools == 3 for m in result.means)
    assert not (out / "tables" / "prompt_pool_wins.tex").exists()  # the stage writes rows; the paper renders them
    render_stage_tables(out / "artifacts", out / "tables", run_dir=out)
    tex = (out / "tables" / "prompt_pool_wins.tex").read_text()
    assert "docci\\_vs\\_iiw" in tex and "\\toprule" in tex
    assert "% 3 pools; B=64, n=2, 200 bootstrap replicates; block sizes: docci_vs_iiw 20, iiw_vs_p5b 30" in tex
    wins = {r["comparison"]: r for r in read_table_rows(out / "artifacts" / "tables" / "prompt_pool_wins.json")["rows"]}
    assert {k: (r["wins"], r["pools"]) for k, r in wins.items()} == {k: (v, 3) for k, v in result.wins.items()}
    overlap = (out / "tables" / "prompt_pool_overlap.csv").read_text().splitlines()
    assert overlap[0] == "pool_a,pool_b,prompts_a,prompts_b,shared,share_of_a,share_of_b" and len(overlap) == 2
    assert (out / "artifacts" / "prompt_support" / "direction_summary.csv").read_text().startswith("comparison,metric,")
    manifest = json.loads((out / "artifacts" / "prompt_pools" / "manifest.json").read_text())
    assert manifest["sources"]["drawbench"]["stats"]["read"] == 200
    assert "bench_union" in manifest["sources"]
    sens = (out / "artifacts" / "prompt_support" / "sensitivity.tsv").read_text().splitlines()
    assert len(sens) == 1 + 2 * 2 * 2 * 2 * 4  # comparisons × roles × budgets × n × pools
    run_info = json.loads((out / "artifacts" / "prompt_support" / "run.json").read_text())
    assert "blake2b" in run_info["bootstrap_seed_rule"]
    assert run_info["comparisons"][1]["incomplete_rows_skipped"] == 300
    assert list((tmp_path / "outputs" / "cache" / "prompt_counts").glob("toy.n2.*.npy"))
    # a second run reuses the cache and gives identical rows
    assert run(cfg).rows == rows


def test_params_errors_name_the_key():
    with pytest.raises(ValueError, match=r"prompt_support\.bugdet: unknown key \(known: .*budget"):
        parse_params({"bugdet": 64, "comparisons": [{"name": "x", "pairs": "p.jsonl"}]})
    with pytest.raises(ValueError, match=r"prompt_support.comparisons: at least one"):
        parse_params({})
    with pytest.raises(ValueError, match=r"prompt_support.budget"):
        parse_params({"budget": -1, "comparisons": [{"name": "x", "pairs": "p.jsonl"}]})
    assert parse_params({"budget": "full", "comparisons": [{"name": "x", "pairs": "p.jsonl"}]}).budget is None


def _cli(*args: str, cwd: Path, env: Optional[dict] = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "capaudit.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


def test_cli_pool_counts_persist_in_the_cache_folder(tmp_path: Path):
    """The second comparison against one pool reads its counts from $CAPAUDIT_CACHE/prompt_counts
    (same output bytes, said on stderr); a changed pool file is counted again; --no-cache reads
    and writes nothing; a cache folder that cannot be written is said, and the run still works."""
    import os

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"L": f"a red car {i} on a street", "R": f"a photo {i}"}) + "\n"
                             for i in range(6)), encoding="utf-8")
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in ["red car", "a photo of a dog", "  "]))
    env = dict(os.environ, CAPAUDIT_CACHE=str(tmp_path / "cache"))
    base = ["prompt-support", "--pairs", str(pairs), "--local-field", "L", "--reference-field", "R",
            "--pool", f"p={pool}", "--block-size", "3", "--reps", "50"]

    def run(name: str, *extra: str, environ: dict = env) -> tuple:
        proc = _cli(*base, *extra, "--out", str(tmp_path / name), cwd=tmp_path, env=environ)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr, (tmp_path / name).read_bytes()

    folder = tmp_path / "cache" / "prompt_counts"
    err1, out1 = run("cold.tsv")
    assert f"pool 'p': 2 prompts, counted, cached in {folder}" in err1
    assert len(list(folder.glob("p.n2.*.npy"))) == 1
    err2, out2 = run("warm.tsv")
    assert f"pool 'p': 2 prompts, read from the cache in {folder}" in err2 and out2 == out1
    err3, out3 = run("nocache.tsv", "--no-cache", environ=dict(env, CAPAUDIT_CACHE=str(tmp_path / "other")))
    assert "pool 'p': 2 prompts, counted (no cache)" in err3 and out3 == out1
    assert not (tmp_path / "other").exists()
    pool.write_text(json.dumps({"prompt": "a photo"}) + "\n")  # new content: counted again, never the old counts
    err4, out4 = run("changed.tsv")
    assert "counted, cached" in err4 and out4 != out1
    assert len(list(folder.glob("p.n2.*.npy"))) == 2
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    err5, out5 = run("blocked.tsv", environ=dict(env, CAPAUDIT_CACHE=str(blocked)))
    assert "cannot be written; pool counts are not cached" in err5 and "counted (no cache)" in err5
    assert out5 == out4


def test_cli_prompt_support_contract(tmp_path: Path):
    pairs = tmp_path / "pairs.jsonl"
    lines = [json.dumps({"L": f"a red car number {i} on a street", "R": f"a photo of object {i}"}) for i in range(7)]
    pairs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    txt = tmp_path / "pool.txt"
    txt.write_text("a red car on a street\na photo\n", encoding="utf-8")
    jl = tmp_path / "pool.jsonl"
    jl.write_text(json.dumps({"prompt": "red car"}) + "\n", encoding="utf-8")
    out = tmp_path / "out.tsv"
    proc = _cli("prompt-support", "--pairs", str(pairs), "--local-field", "L", "--reference-field", "R",
                "--pool", f"txt={txt}", "--pool", f"jl={jl}", "--budget", "64", "--ngram", "2",
                "--block-size", "3", "--reps", "100", "--seed", "0", "--comparison", "toy_cmp",
                "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.splitlines()[0] == "\t".join(COLUMNS)
    rows = read_prompt_support_tsv(out)
    assert [(r.prompt_pool, r.metric) for r in rows] == [
        ("jl", "jsd"), ("jl", "prompt_mass_on_caption_support"),
        ("txt", "jsd"), ("txt", "prompt_mass_on_caption_support"),
    ]
    assert all((r.blocks, r.block_size, r.records, r.comparison) == (3, 3, 7, "toy_cmp") for r in rows)
    assert rows[0].local_surface == "L" and rows[0].reference_surface == "R"
    mass = rows[1]  # the jl pool's only bigram "red car" is in every local caption, in no reference
    assert mass.local_block_mean == pytest.approx(1.0, abs=1e-6) and mass.reference_block_mean < 1e-6
    assert mass.stable_direction == "local_higher"
    # same command, same bytes (seeds do not depend on the process)
    out2 = tmp_path / "out2.tsv"
    proc = _cli("prompt-support", "--pairs", str(pairs), "--local-field", "L", "--reference-field", "R",
                "--pool", f"txt={txt}", "--pool", f"jl={jl}", "--block-size", "3", "--reps", "100",
                "--comparison", "toy_cmp", "--out", str(out2), cwd=tmp_path)
    assert proc.returncode == 0 and out2.read_text() == text


def test_cli_errors_are_clear(tmp_path: Path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"L": "a b c"}\n', encoding="utf-8")
    pool = tmp_path / "pool.txt"
    pool.write_text("a b c\n", encoding="utf-8")
    proc = _cli("prompt-support", "--pairs", str(pairs), "--local-field", "L", "--reference-field", "R",
                "--pool", f"p={pool}", "--out", str(tmp_path / "o.tsv"), cwd=tmp_path)
    assert proc.returncode == 1
    assert "pairs.jsonl: row 1: field 'R' is missing" in proc.stderr


def test_cli_prompt_pools_prepare(tmp_path: Path, data_dir: Path):
    raw = tmp_path / "raw.jsonl"
    raw.write_text("\n".join(json.dumps({"text": t}) for t in ["a red car parked", "A red car  parked", "hi"]) + "\n")
    parti = data_dir / "partiprompts" / "PartiPrompts.tsv"
    proc = _cli("prompt-pools", "prepare", "--source", f"toy={raw}:text", "--source", f"parti={parti}:Prompt",
                "--union", "all=toy,parti", "--out", str(tmp_path / "pools"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((tmp_path / "pools" / "manifest.json").read_text())
    toy = manifest["sources"]["toy"]["stats"]
    assert (toy["read"], toy["duplicate"], toy["too_short"], toy["raw_written"]) == (3, 1, 1, 1)
    assert manifest["sources"]["parti"]["stats"]["read"] == 1632
    assert (tmp_path / "pools" / "all.filtered.jsonl").exists()
