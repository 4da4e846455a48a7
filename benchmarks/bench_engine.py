"""Benchmark (not a test): text-stats side by side with the bare regex pass, on 1 and 2 local
workers and on a local Ray cluster; peak RSS at 1M (and, with ``--rss-n``, 10M) captions; the
per-core throughputs and the cost table of the README's "Scaling out" section.

Every configuration runs the real CLI in a fresh process (``python -m capaudit.cli text-stats``)
on the same JSONL corpus (real captions resampled, about 35 lexical units per caption on
average: ``benchmarks/_corpus.py``); wall time, CPU time and the peak RSS of the whole process
tree (pool workers, Ray's raylet and workers) are measured from outside. The bare pass is one
``json.loads`` + ``LEX_RE.findall`` loop over the same file in one process (the issue's
definition). Ratios are taken within one run of this script: on a shared machine compare
ratios, not absolute seconds.

    .venv/bin/python benchmarks/bench_engine.py                  # 1M captions: bare, local 1/2, ray 2
    .venv/bin/python benchmarks/bench_engine.py --n 200000 --no-ray
    .venv/bin/python benchmarks/bench_engine.py --rss-n 10000000 # also peak RSS at 10M (exact, spilled)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "lib"))

from _corpus import corpus, record_target, run_measured  # noqa: E402

BARE = r'''
import json, sys, time
from capaudit.text.lexical import LEX_RE
findall = LEX_RE.findall
out = {}
for label, lower in (("s", False), ("s_lower", True)):
    t = time.perf_counter()
    n = units = 0
    with open(sys.argv[1], encoding="utf-8") as fh:
        for line in fh:
            c = json.loads(line)["caption"]
            units += len(findall(c.lower() if lower else c))
            n += 1
    out[label] = time.perf_counter() - t
out.update(captions=n, units=units)
print(json.dumps(out))
'''


def text_stats(path: Path, out: Path, engine: str, workers: int, extra=()) -> dict:
    cmd = [sys.executable, "-m", "capaudit.cli", "text-stats", str(path), "--caption-field", "caption",
           "--engine", engine, "--workers", str(workers), "--out", str(out), *extra]
    env = dict(os.environ, PYTHONPATH=str(HERE.parent / "lib"), RAY_DISABLE_IMPORT_WARNING="1")
    r = run_measured(cmd, env=env)
    if r["returncode"] != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r['stderr'][-3000:]}")
    return {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_mb")}


def cost_table(captions_per_core_s: dict, req_per_s: float | None = None) -> list:
    """Core-hours for 10M, 100M, 500M captions from measured per-core throughputs."""
    rows = []
    for stage, rate in captions_per_core_s.items():
        rows.append({"stage": stage, "captions_per_core_s": round(rate),
                     **{f"core_h_{label}": round(n / rate / 3600, 2)
                        for label, n in (("10M", 10_000_000), ("100M", 100_000_000), ("500M", 500_000_000))}})
    if req_per_s:
        rows.append({"stage": "llm run (client process)", "requests_per_s": round(req_per_s),
                     **{f"client_h_{label}": round(n / req_per_s / 3600, 2)
                        for label, n in (("10M", 10_000_000), ("100M", 100_000_000), ("500M", 500_000_000))}})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--rss-n", type=int, default=0, help="also measure peak RSS at this many captions")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--workdir", default=os.environ.get("CAPAUDIT_BENCH_DIR", tempfile.gettempdir() + "/capaudit_bench"))
    args = ap.parse_args()
    wd = Path(args.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    path = corpus(wd, args.n)
    print(f"cpus={os.cpu_count()} corpus={path} ({path.stat().st_size / 2**20:.0f} MiB)", flush=True)
    bare = run_measured([sys.executable, "-c", BARE, str(path)],
                        env=dict(os.environ, PYTHONPATH=str(HERE.parent / "lib")))
    b = json.loads(bare["stdout"])
    res = {"bare_pass": {"wall_s": round(b["s"], 2), "wall_s_with_lower": round(b["s_lower"], 2),
                         "peak_rss_mb": bare["peak_rss_mb"], "captions": b["captions"],
                         "units_per_caption": round(b["units"] / b["captions"], 1)}}
    print(json.dumps({"bare_pass": res["bare_pass"]}), flush=True)
    out = wd / "text_stats.json"
    configs = [("local", 1), ("local", 2)] + ([] if args.no_ray else [("ray", 2)])
    for engine, workers in configs:
        r = text_stats(path, out, engine, workers)
        r["ratio_to_bare"] = round(r["wall_s"] / b["s"], 2)
        r["ratio_to_bare_with_lower"] = round(r["wall_s"] / b["s_lower"], 2)
        res[f"text_stats_{engine}_{workers}"] = r
        print(json.dumps({f"text_stats_{engine}_{workers}": r}), flush=True)
        if engine == "local":  # issue 34's goals: 1.5x the bare pass on one worker, 1.0x on two
            record_target(f"text-stats ({workers} local worker{'s' if workers > 1 else ''}) / bare regex pass",
                          r["ratio_to_bare"], 1.5 if workers == 1 else 1.0, "x wall",
                          f"{r['wall_s']} s vs {b['s']:.2f} s, {b['captions']:,} captions")
    one = res["text_stats_local_1"]
    per_core = {"bare regex pass (json + findall)": b["captions"] / b["s"],
                "text-stats (1 worker, wall)": b["captions"] / one["wall_s"],
                "text-stats (CPU time, all processes)": b["captions"] / max(one["cpu_s"], 1e-9)}
    if args.rss_n:
        big = corpus(wd, args.rss_n)
        for label, extra in (("exact_in_memory", ()), ("exact_spilled", ("--spill-dir", str(wd / "spill"))),
                             ("hll", ("--distinct", "hll"))):
            r = text_stats(big, out, "local", 2, extra)
            res[f"rss_{args.rss_n}_{label}"] = r
            print(json.dumps({f"text_stats_{args.rss_n}_{label}": r}), flush=True)
    res["cost_table"] = cost_table(per_core)
    print(json.dumps({"cost_table": res["cost_table"]}, indent=1))
    (wd / "bench_engine.json").write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
