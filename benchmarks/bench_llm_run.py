"""Benchmark (not a test): throughput and memory of ``capaudit llm run``.

A zero-latency OpenAI-compatible endpoint (aiohttp, separate process, fixed schema-valid JSON
answer) is hammered by the real CLI (``python -m capaudit.cli llm run``) for N claims-like
requests at a given concurrency. Reported per size: the run's own rate (finished requests / run
time, from its statistics), wall time including start-up, and the client process's peak RSS
(``wait4`` rusage of that child only).

    .venv/bin/python benchmarks/bench_llm_run.py                   # 10,000 and 100,000 requests, c=512
    .venv/bin/python benchmarks/bench_llm_run.py --sizes 2000 --concurrency 64 --progress
    .venv/bin/python benchmarks/bench_llm_run.py --profile 20000   # cProfile of the client, top 25
    .venv/bin/python benchmarks/bench_llm_run.py --sizes 20000 --transports fast openai --engine ray

Each size runs once per transport (``--transport fast``: our HTTP/1.1 client; ``openai``: the
openai package's AsyncOpenAI), reporting requests/s and the client's CPU milliseconds per request.
With ``--engine`` the CPU is the driver's plus its waited-for children (Ray workers are not).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))

from _common import start_server as start_chat_server  # noqa: E402
from capaudit.llm.requests import make_request  # noqa: E402
from capaudit.io.canonical_json import dumps_line  # noqa: E402

SCHEMA = {
    "type": "object",
    "properties": {
        "caption_id": {"type": "string"},
        "claimed_units": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "category": {"enum": ["object", "attribute", "relation", "style", "camera", "lighting", "count",
                                      "text_rendering"]},
                "unit": {"type": "string", "maxLength": 80},
                "span": {"type": "string", "maxLength": 120},
                "target": {"type": "string", "maxLength": 80},
            },
            "required": ["category", "unit", "span", "target"],
            "additionalProperties": False,
        }},
    },
    "required": ["caption_id", "claimed_units"],
    "additionalProperties": False,
}
ANSWER = json.dumps({"caption_id": "bench", "claimed_units": [
    {"category": "object", "unit": "dog", "span": "a brown dog", "target": "dog"},
    {"category": "attribute", "unit": "brown", "span": "a brown dog", "target": "dog"},
    {"category": "relation", "unit": "dog chasing frisbee", "span": "chasing a red frisbee", "target": "dog"},
]})
CAPTION = ("A brown dog chasing a red frisbee across a sunlit beach, waves breaking behind it, "
           "footprints in the wet sand, a lighthouse on the distant headland under a pale blue sky.")

def write_requests(path: Path, n: int, model: str) -> None:
    with open(path, "wb") as fh:
        for i in range(n):
            fh.write(dumps_line(make_request(
                task="claimed_cbu_bench", task_version=1, model=model, revision=None, prompt_version=1, schema=SCHEMA,
                messages=[{"role": "system", "content": "Extract atomic controllable visual content units."},
                          {"role": "user", "content": f"caption_id=bench:{i}\ncaption={CAPTION}"}],
                decoding={"temperature": 0, "max_tokens": 1024}, input={"caption_id": f"bench:{i}", "caption": CAPTION},
            )))


def start_server() -> tuple:
    return start_chat_server(ANSWER, {"prompt_tokens": 90, "completion_tokens": 80, "total_tokens": 170})


def run_once(n: int, concurrency: int, url: str, tmp: Path, progress: bool, transport: str = "fast",
             extra: tuple = ()) -> dict:
    req = tmp / f"req_{n}.jsonl"
    out = tmp / f"resp_{n}.jsonl"
    stats = tmp / f"stats_{n}.json"
    if not req.exists():
        write_requests(req, n, "bench-model")
    if extra:
        out = tmp / f"resp_{n}_{transport}_sharded"
    if out.exists():
        import shutil

        shutil.rmtree(out) if out.is_dir() else out.unlink()
    cmd = [sys.executable, "-m", "capaudit.cli", "llm", "run", "--requests", str(req), "--out", str(out),
           "--url", url, "--model", "bench-model", "--concurrency", str(concurrency), "--timeout", "60",
           "--retries", "3", "--stats-json", str(stats), "--transport", transport, *extra]
    if not progress:
        cmd.append("--no-progress")
    env = dict(os.environ, PYTHONPATH=str(REPO / "lib"))
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stderr=None if progress else subprocess.DEVNULL)
    _, status, rusage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if status != 0:
        raise RuntimeError(f"llm run exited with status {status}")
    st = json.loads(stats.read_text())
    files = sorted(out.glob("*.jsonl")) if out.is_dir() else [out]
    lines = sum(1 for f in files for _ in open(f, "rb"))
    cpu = rusage.ru_utime + rusage.ru_stime
    return {"transport": transport, "engine": " ".join(extra) or "single process", "requests": n,
            "concurrency": concurrency, "answered": st["answered"], "failed": st["failed"],
            "rows": lines, "run_sec": round(st["elapsed_sec"], 2), "req_per_sec": round(st["rate_per_sec"]),
            "wall_sec": round(wall, 2), "client_cpu_sec": round(cpu, 2),
            "client_cpu_ms_per_request": round(1000 * cpu / max(1, n), 3),
            "peak_rss_mib": round(rusage.ru_maxrss / 1024, 1)}


def profile(n: int, concurrency: int, url: str, tmp: Path) -> None:
    import cProfile
    import pstats

    from capaudit.llm.client import run_requests

    req = tmp / f"req_{n}.jsonl"
    write_requests(req, n, "bench-model")
    pr = cProfile.Profile()
    pr.enable()
    st = run_requests(str(req), tmp / "prof.jsonl", [url], "bench-model", concurrency=concurrency, timeout=60,
                      progress=False)
    pr.disable()
    print(st.to_dict())
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--progress", action="store_true", help="show the client's progress bar")
    ap.add_argument("--profile", type=int, metavar="N", help="cProfile an in-process run of N requests instead")
    ap.add_argument("--transports", nargs="+", default=["fast", "openai"], choices=["fast", "openai"],
                    help="client transports to measure (default both)")
    ap.add_argument("--engine", choices=["local", "ray"], default=None,
                    help="also measure a sharded run (llm run --engine ... --shards 4 --workers 2)")
    args = ap.parse_args()
    server, url = start_server()
    try:
        with tempfile.TemporaryDirectory(prefix="bench_llm_") as d:
            tmp = Path(d)
            if args.profile:
                profile(args.profile, args.concurrency, url, tmp)
                return 0
            print(f"cpus={os.cpu_count()} python={sys.version.split()[0]}")
            for n in args.sizes:
                for transport in args.transports:
                    print(json.dumps(run_once(n, args.concurrency, url, tmp, args.progress, transport)), flush=True)
                    if args.engine:
                        extra = ("--engine", args.engine, "--shards", "4", "--workers", "2")
                        print(json.dumps(run_once(n, args.concurrency, url, tmp, args.progress, transport, extra)),
                              flush=True)
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
