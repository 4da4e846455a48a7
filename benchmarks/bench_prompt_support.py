"""Benchmark: prompt-pool support at paper scale (reference-spec §3.2 defaults).

Runs ``compare_pairs_file`` (what ``capaudit prompt-support`` runs: pairs streamed block run by
block run, pool counts streamed and cached) with 1 and ``--workers`` processes, cold and warm;
``peak_rss_mib_process_tree`` sums the main process and its workers.

250,000 caption pairs (local = resampled long descriptions from ImageInWords / DOCCI, reference =
resampled COCO Karpathy + nocaps captions) against a 1,000,000-prompt pool (resampled real
prompts: DiffusionDB via ImageReward, DSG, PartiPrompts, T2I-CompBench, Gecko, DPG-Bench), B = 64,
n = 2, 262,144 buckets, blocks of 5,000, 2,000 bootstrap reps.

The measured part runs in a fresh subprocess (pinned to ``--cpus`` cores): once *cold* (pool
counts computed and cached as ``.npy``) per worker count, then ``--repeat`` times *warm* (cache
reused, as for a second comparison), one and two workers interleaved; the warm run of median
time is the one reported.
Beside them, in the same run, the *bare pass*: one ``json.loads`` + ``LEX_RE.findall(text.lower())``
loop over every pool prompt and both captions of every pair (what Python must do merely to
tokenize these inputs once). The targets (issue 34) are the *cold* ones: one worker at most 0.36x
the bare pass (10x the reference), two workers at most 0.55x one worker, peak RSS at most the
reference's 247 MB; the warm figures are reported beside them, named as warm.
Each reports wall time per phase and peak RSS (``resource.getrusage``): the largest single
process (``peak_rss_mib_largest_process``; main and largest worker are listed too) and, labelled
as an upper bound, the sum of the main process's and the largest worker's peaks (the two peaks
need not coincide in time). A last ``summary`` line (JSON) and one plain line per case give the one- and
two-worker seconds, the ratio to the bare pass, the two-worker ratio, the speedup over the
reference's ``REFERENCE_S`` and the peak RSS of the process tree, cold and warm.

    .venv/bin/python benchmarks/bench_prompt_support.py [--pairs 250000 --prompts 1000000 --cpus 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import List


def _data_dir() -> Path:
    return Path(os.environ.get("CAPAUDIT_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))


def _real_texts() -> tuple:
    d = _data_dir()
    long: List[str] = []
    for name, fields in (("IIW-400", ("IIW", "IIW-P5B")), ("DOCCI_Test", ("DOCCI", "IIW")), ("DCI_Test", ("IIW",)),
                         ("CM_3600", ("IIW-P5B",)), ("LocNar_Eval", ("IIW-P5B",))):
        for line in (d / "imageinwords" / name / "data.jsonl").read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            long += [obj[f] for f in fields if isinstance(obj.get(f), str)]
    short: List[str] = []
    for split in ("test", "val"):
        for caps in json.loads((d / "coco_karpathy_captions" / f"{split}_captions.json").read_text()).values():
            short += caps
    for item in json.loads((d / "nocaps_val" / "nocaps_corpus.json").read_text()):
        short += item["caption"]
    prompts: List[str] = [r["text"] for r in json.loads((d / "imagereward_diffusiondb_prompts" / "refl_data.json").read_text())]
    prompts += [r["prompt"] for r in json.loads((d / "imagereward_diffusiondb_prompts" / "test.json").read_text())]
    prompts += [line.split("\t")[0] for line in (d / "partiprompts" / "PartiPrompts.tsv").read_text().splitlines()[1:]]
    for f in sorted((d / "t2i_compbench" / "dataset").glob("*.txt")):
        prompts += [x for x in f.read_text().splitlines() if x.strip()]
    prompts += [p.read_text() for p in sorted((d / "dpg_bench" / "prompts").glob("*.txt"))]
    import csv

    with (d / "gecko_prompts" / "prompts.csv").open(encoding="utf-8") as fh:
        prompts += [r["prompt"] for r in csv.DictReader(fh)]
    return long, short, prompts


def make_inputs(workdir: Path, n_pairs: int, n_prompts: int, seed: int) -> tuple:
    import numpy as np

    pairs = workdir / f"pairs_{n_pairs}.jsonl"
    pool = workdir / f"pool_{n_prompts}.jsonl"
    stamp = workdir / f"inputs_{n_pairs}_{n_prompts}_{seed}.json"
    if pairs.exists() and pool.exists() and stamp.exists():  # same sizes and seed: same inputs, reused
        return pairs, pool, tuple(json.loads(stamp.read_text()))
    long, short, prompts = _real_texts()
    rng = np.random.default_rng(seed)
    li = rng.integers(0, len(long), n_pairs)
    ri = rng.integers(0, len(short), n_pairs)
    with pairs.open("w", encoding="utf-8") as fh:
        for a, b in zip(li, ri):
            fh.write(json.dumps({"local_caption": long[a], "reference_caption": short[b]}, ensure_ascii=False) + "\n")
    pi = rng.integers(0, len(prompts), n_prompts)
    with pool.open("w", encoding="utf-8") as fh:
        for i in pi:
            fh.write(json.dumps({"prompt": prompts[i]}, ensure_ascii=False) + "\n")
    stamp.write_text(json.dumps([len(long), len(short), len(prompts)]))
    return pairs, pool, (len(long), len(short), len(prompts))


BARE = r'''
import json, sys, time
sys.path.insert(0, sys.argv[3])
from capaudit.text.lexical import LEX_RE
findall = LEX_RE.findall
t = time.perf_counter()
units = texts = 0
with open(sys.argv[1], encoding="utf-8") as fh:
    for line in fh:
        units += len(findall(json.loads(line)["prompt"].lower()))
        texts += 1
with open(sys.argv[2], encoding="utf-8") as fh:
    for line in fh:
        obj = json.loads(line)
        units += len(findall(obj["local_caption"].lower())) + len(findall(obj["reference_caption"].lower()))
        texts += 2
print(json.dumps({"bare_s": round(time.perf_counter() - t, 2), "texts": texts, "units": units}))
'''


def measured(args: argparse.Namespace) -> None:
    """The timed part (runs in its own process)."""
    if args.cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cpus]))
    from capaudit.prompts.ngrams import load_pool_counts
    from capaudit.prompts.support import compare_pairs_file

    t0 = time.perf_counter()
    pool = load_pool_counts("bench_pool", args.pool, 2, 262144, None, None, 1_000_000, args.cache, args.workers)
    t1 = time.perf_counter()
    t2 = t1  # pairs are streamed by compare_pairs_file (what `capaudit prompt-support` runs)
    rows, pairs = compare_pairs_file(args.pairs_path, [pool], "bench", limit=250_000, ngram=2, budget=64,
                                     block_size=5000, reps=2000, seed=0, workers=args.workers)
    t3 = time.perf_counter()
    # ru_maxrss is per process: RUSAGE_CHILDREN is the largest single (waited-for) worker, not a sum
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(json.dumps({
        "pool_counts_s": round(t1 - t0, 2), "load_pairs_s": round(t2 - t1, 2), "blocks_and_bootstrap_s": round(t3 - t2, 2),
        "total_s": round(t3 - t0, 2),
        "peak_rss_mib_largest_process": round(max(self_kib, child_kib) / 1024, 1),
        "peak_rss_mib_main": round(self_kib / 1024, 1), "peak_rss_mib_largest_worker": round(child_kib / 1024, 1),
        "peak_rss_mib_main_plus_largest_worker_upper_bound": round((self_kib + child_kib) / 1024, 1),
        "pool_records": pool.records,
        "pairs": pairs.pairs, "blocks": rows[0].blocks,
        "rows": [(r.metric, round(r.local_block_mean, 4), round(r.reference_block_mean, 4), r.stable_direction) for r in rows],
    }))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=250_000)
    ap.add_argument("--prompts", type=int, default=1_000_000)
    ap.add_argument("--cpus", type=int, default=2, help="pin the measured process to this many cores (0 = no pin)")
    ap.add_argument("--workers", type=int, default=2, help="processes for pool counting and caption blocks")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per worker count (interleaved; median kept)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--_measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--pool", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--pairs-path", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._measure:
        measured(args)
        return 0
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench_prompt_support_"))
    workdir.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    pairs, pool, sizes = make_inputs(workdir, args.pairs, args.prompts, args.seed)
    print(f"inputs: {args.pairs} pairs, {args.prompts} prompts resampled from {sizes} real texts "
          f"in {time.perf_counter() - t:.1f} s ({workdir})")
    cache = workdir / "cache"
    import shutil

    # the pool's digest is remembered beside the cache only for a file unchanged for 2 s (a second
    # write within the file system's time tick could otherwise go unseen): measure as a user would,
    # on a pool file that is not brand new
    age = time.time() - pool.stat().st_ctime
    if age < 2.5:
        time.sleep(2.5 - age)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _corpus import run_measured

    results = {}
    warm_runs: dict = {}

    def measure(workers: int, label: str):
        cmd = [sys.executable, __file__, "--_measure", "--pool", str(pool), "--cache", str(cache),
               "--cpus", str(args.cpus), "--workers", str(workers), "--pairs-path", str(pairs)]
        r = run_measured(cmd)
        if r["returncode"] != 0:
            print(r["stderr"], file=sys.stderr)
            return None
        out = json.loads(r["stdout"])
        out.update(workers=workers, wall_s=r["wall_s"], cpu_s=r["cpu_s"], peak_rss_mib_process_tree=r["peak_rss_mb"])
        out["speedup_vs_reference_issue_figure"] = round(REFERENCE_S / out["total_s"], 1)
        print(label, json.dumps(out), flush=True)
        return out

    for workers in sorted({1, args.workers}):
        shutil.rmtree(cache, ignore_errors=True)  # the first run of each is cold
        out = measure(workers, "cold")
        if out is None:
            return 1
        results[workers, "cold"] = out
    # warm: one and two workers interleaved, --repeat times each; the run of median time is kept
    for _ in range(max(1, args.repeat)):
        for workers in sorted({1, args.workers}):
            out = measure(workers, "warm")
            if out is None:
                return 1
            warm_runs.setdefault(workers, []).append(out)
    for workers, runs in warm_runs.items():
        results[workers, "warm"] = sorted(runs, key=lambda o: o["total_s"])[len(runs) // 2]
        print(f"warm, {workers} worker(s): total_s of the {len(runs)} runs "
              f"{[o['total_s'] for o in runs]}, median {results[workers, 'warm']['total_s']}", flush=True)
    one = {label: results[1, label] for label in ("cold", "warm")}
    two = {label: results[args.workers, label] for label in ("cold", "warm")}
    lib = str(Path(__file__).resolve().parents[1] / "lib")
    bare_run = run_measured([sys.executable, "-c", BARE, str(pool), str(pairs), lib])
    bare = json.loads(bare_run["stdout"])["bare_s"]
    print("bare pass", bare_run["stdout"].strip(), flush=True)
    summary = {"reference_s": REFERENCE_S, "reference_peak_rss_mb": REFERENCE_RSS_MB, "bare_pass_s": bare,
               "workers": args.workers, "cpus": args.cpus}
    for label in ("cold", "warm"):
        summary[label] = {
            "one_worker_s": one[label]["total_s"], "two_worker_s": two[label]["total_s"],
            "one_over_bare": round(one[label]["total_s"] / bare, 3),
            "two_over_one": round(two[label]["total_s"] / one[label]["total_s"], 2),
            "speedup_vs_reference_one_worker": round(REFERENCE_S / one[label]["total_s"], 1),
            "pool_counts_s_one_worker": one[label]["pool_counts_s"],
            "cpu_s_one_worker": one[label]["cpu_s"], "cpu_s_two_workers": two[label]["cpu_s"],
            "peak_rss_mib_one_worker": one[label]["peak_rss_mib_process_tree"],
            "peak_rss_mib_two_workers": two[label]["peak_rss_mib_process_tree"],
        }
    print("summary", json.dumps(summary), flush=True)
    from _corpus import record_target

    # the targets are the cold run's (pool counted, as by a user's first comparison); warm is reported
    for label in ("cold", "warm"):
        w = summary[label]
        target = (lambda t: t) if label == "cold" else (lambda t: None)
        note = "pool counted in this run" if label == "cold" else "pool counts cached, as for a second comparison"
        record_target(f"prompt support, one worker / bare regex pass ({label})", w["one_over_bare"], target(0.36), "x",
                      f"{w['one_worker_s']:.2f} s vs bare {bare:.2f} s; {w['speedup_vs_reference_one_worker']}x the "
                      f"reference's {REFERENCE_S} s; {note}")
        record_target(f"prompt support, {args.workers} workers / one worker ({label})", w["two_over_one"],
                      target(0.55), "", f"{w['two_worker_s']:.2f} s vs {w['one_worker_s']:.2f} s")
        record_target(f"prompt support, peak RSS one worker, MiB ({label})", w["peak_rss_mib_one_worker"],
                      target(REFERENCE_RSS_MB), "", f"process tree; {args.workers} workers: "
                      f"{w['peak_rss_mib_two_workers']} MiB; the reference: {REFERENCE_RSS_MB} MB")
    for label in ("cold", "warm"):
        w = summary[label]
        print(f"{label}: one worker {w['one_worker_s']:.2f} s = {w['one_over_bare']:.2f}x the bare pass ({bare:.2f} s), "
              f"{w['speedup_vs_reference_one_worker']:.1f}x the reference's {REFERENCE_S} s; {args.workers} workers "
              f"{w['two_worker_s']:.2f} s (ratio {w['two_over_one']:.2f}); peak RSS {w['peak_rss_mib_one_worker']} MiB "
              f"(one worker), {w['peak_rss_mib_two_workers']} MiB ({args.workers} workers, process tree)")
    return 0


#: the reference script's time quoted by issue 24 for these inputs on 2 cores (interleaved runs):
#: 36.2 s (one process, peak RSS about 247 MB). Re-measure it beside this script for a same-machine ratio.
REFERENCE_S = 36.2
#: the reference script's peak RSS on these inputs (MB), the memory target
REFERENCE_RSS_MB = 247

if __name__ == "__main__":
    sys.exit(main())
