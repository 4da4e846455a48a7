"""Benchmark (not a test): the claims stage's CPU side at scale — ``claims build`` and ``claims
summarize`` on ``--n`` captions (default 1,000,000), each in a fresh ``python -m capaudit.cli``
process: wall time, CPU time and the peak RSS of the process tree.

Captions are the real-resampled corpus of ``benchmarks/_corpus.py`` (about 35 lexical units on
average). Between build and summarize (not timed) every request gets one answered response whose
``claimed_units`` are drawn from the caption's own words (``--units`` per caption, eight types,
some duplicates), as an extractor would return them.

    .venv/bin/python benchmarks/bench_claims.py                 # 1,000,000 captions
    .venv/bin/python benchmarks/bench_claims.py --n 100000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "lib"))

from _corpus import capaudit_measured, corpus  # noqa: E402

CATS = ("object", "attribute", "relation", "count", "style", "camera", "lighting", "text_rendering")


cli = capaudit_measured


def answer(requests: Path, responses: Path, units: int, seed: int = 0) -> int:
    """One ok response per request, units drawn from the caption window's words."""
    from capaudit.llm._json import dumps_line, loads

    rng = random.Random(seed)
    n = 0
    with open(requests, "rb") as fi, open(responses, "wb") as fo:
        for line in fi:
            req = loads(line)
            inp = req["input"]
            words = inp["caption"].split() or ["thing"]
            claimed = []
            for k in range(units):
                w = words[rng.randrange(len(words))]
                claimed.append({"category": CATS[rng.randrange(len(CATS))], "unit": w if k % 7 else f"a {w}",
                                "span": w, "target": words[0] if k % 3 == 0 else ""})
            fo.write(dumps_line({"request_id": req["request_id"], "ok": True, "status": 200, "attempts": 1,
                                 "model": req["model_hint"], "parsed": {"caption_id": inp["caption_id"],
                                                                   "claimed_units": claimed}}))
            n += 1
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--units", type=int, default=8, help="claimed units per caption")
    ap.add_argument("--workdir", default=os.environ.get("CAPAUDIT_BENCH_DIR", tempfile.gettempdir() + "/capaudit_bench"))
    args = ap.parse_args()
    wd = Path(args.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    captions = corpus(wd, args.n)
    req, resp, out = wd / "claims_requests.jsonl", wd / "claims_responses.jsonl", wd / "claimed_summary.json"
    for p in (req, resp, out, Path(str(req) + ".manifest.json")):
        p.unlink(missing_ok=True)
    print(f"cpus={os.cpu_count()} captions={args.n:,} ({captions})", flush=True)
    build = cli("claims", "build", "--input", str(captions), "--caption-field", "caption", "--surface", "bench",
                "--budget", "64", "--model", "bench-extractor", "--out", str(req))
    print(json.dumps({"claims_build": {**build, "captions_per_s": round(args.n / build["wall_s"])}}), flush=True)
    t0 = time.perf_counter()
    n = answer(req, resp, args.units)
    print(f"answered {n:,} requests x {args.units} units in {time.perf_counter() - t0:.1f} s (not timed)", flush=True)
    summ = cli("claims", "summarize", "--responses", str(resp), "--requests", str(req), "--out", str(out))
    total = json.loads(out.read_text())["surfaces"]["__all__"]
    print(json.dumps({"claims_summarize": {**summ, "responses_per_s": round(n / summ["wall_s"]),
                                           "claimed_per_caption": round(total["claimed_per_caption"], 3)}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
