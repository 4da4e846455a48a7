"""Benchmark (not a test): the claims stage's CPU side at scale — ``claims build`` and ``claims
summarize`` on ``--n`` captions (default 1,000,000), each in a fresh ``python -m capaudit.cli``
process: wall time, CPU time and the peak RSS of the process tree.

Captions are the real-resampled corpus of ``benchmarks/_corpus.py`` (about 35 lexical units on
average). Between build and summarize (not timed) every request gets one answered response whose
``claimed_units`` are drawn from the caption's own words (``--units`` per caption, eight types,
some duplicates), as an extractor would return them.

**Parse floor** (issue 24): ``claims summarize`` against the bare parse of its two inputs — a fresh
``python -c`` process that reads the request file and the response file once, line by line, and
parses every line with the JSON parser capaudit uses (``orjson`` when installed, as
``capaudit.io.canonical_json.loads``; the standard library's ``json.loads`` otherwise), nothing else.
Summarize and the floor run ``--repeat`` times, interleaved (S F S F ...), so a busy machine slows
both alike; the line ``claims summarize / parse floor`` gives the median of the per-pair wall-time
ratios (target: at most 2x), the CPU-time ratio beside it, and the spread of the pairs. The same
ratio against a ``json.loads`` floor (slower than orjson; the reference's parser) is printed too,
for comparison with figures measured that way.

    .venv/bin/python benchmarks/bench_claims.py                 # 1,000,000 captions
    .venv/bin/python benchmarks/bench_claims.py --n 200000 --repeat 5
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

from _corpus import capaudit_measured, corpus, ratio_line, run_measured  # noqa: E402

CATS = ("object", "attribute", "relation", "count", "style", "camera", "lighting", "text_rendering")


cli = capaudit_measured

#: the parse floor: read each file once and parse every line, nothing else (argv: parser, files...)
FLOOR = r"""
import sys
if sys.argv[1] == "orjson":
    from orjson import loads
else:
    from json import loads
n = 0
for path in sys.argv[2:]:
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                loads(line)
                n += 1
print(n)
"""


def default_parser() -> str:
    """The parser ``capaudit.io.canonical_json.loads`` uses here: ``orjson`` when installed, else ``json``."""
    from capaudit.io.canonical_json import HAVE_ORJSON

    return "orjson" if HAVE_ORJSON else "json"


def parse_floor(parser: str, *paths: Path) -> dict:
    """Wall s, CPU s and peak RSS of the bare parse of ``paths`` in a fresh process."""
    r = run_measured([sys.executable, "-c", FLOOR, parser, *map(str, paths)])
    if r["returncode"] != 0:
        raise RuntimeError(f"parse floor failed:\n{r['stderr'][-3000:]}")
    return {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"], "peak_rss_mb": r["peak_rss_mb"], "rows": int(r["stdout"])}




def answer(requests: Path, responses: Path, units: int, seed: int = 0) -> int:
    """One ok response per request, units drawn from the caption window's words."""
    from capaudit.io.canonical_json import dumps_line, loads

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
    ap.add_argument("--repeat", type=int, default=3, help="interleaved summarize / parse-floor pairs (median)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the workdir's request/response files when present (skip build and answers)")
    ap.add_argument("--no-json-floor", action="store_true", help="skip the json.loads floor (comparison only)")
    ap.add_argument("--workdir", default=os.environ.get("CAPAUDIT_BENCH_DIR", tempfile.gettempdir() + "/capaudit_bench"))
    args = ap.parse_args()
    wd = Path(args.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    captions = corpus(wd, args.n)
    req, resp, out = wd / "claims_requests.jsonl", wd / "claims_responses.jsonl", wd / "claimed_summary.json"
    print(f"cpus={os.cpu_count()} captions={args.n:,} ({captions})", flush=True)
    if args.reuse and req.is_file() and resp.is_file():
        with open(resp, "rb") as fh:
            n = sum(1 for _ in fh)
        print(f"reusing {req} and {resp} ({n:,} responses)", flush=True)
    else:
        for p in (req, resp, out, Path(str(req) + ".manifest.json")):
            p.unlink(missing_ok=True)
        build = cli("claims", "build", "--input", str(captions), "--caption-field", "caption", "--surface", "bench",
                    "--budget", "64", "--model", "bench-extractor", "--out", str(req))
        print(json.dumps({"claims_build": {**build, "captions_per_s": round(args.n / build["wall_s"])}}), flush=True)
        t0 = time.perf_counter()
        n = answer(req, resp, args.units)
        print(f"answered {n:,} requests x {args.units} units in {time.perf_counter() - t0:.1f} s (not timed)", flush=True)
    parser = default_parser()
    runs, floors, json_floors = [], [], []
    for k in range(max(1, args.repeat)):
        runs.append(cli("claims", "summarize", "--responses", str(resp), "--requests", str(req), "--out", str(out),
                        "--bootstrap-reps", "0"))  # like for like: the reference summarizer draws no interval
        floors.append(parse_floor(parser, req, resp))
        if not args.no_json_floor and parser != "json" and k == 0:
            json_floors.append(parse_floor("json", req, resp))
    summ = runs[0]
    total = json.loads(out.read_text())["surfaces"]["__all__"]
    print(json.dumps({"claims_summarize": {**summ, "responses_per_s": round(n / summ["wall_s"]),
                                           "claimed_per_caption": round(total["claimed_per_caption"], 3)}}), flush=True)
    print(json.dumps({"claims_summarize_runs": runs, "parse_floor_runs": floors, "parser": parser,
                      "json_floor_runs": json_floors}), flush=True)
    print(ratio_line("claims summarize", runs, floors, 2.0, parser), flush=True)
    if json_floors:
        print("  comparison only: " + ratio_line("claims summarize", runs[:1], json_floors, 2.0, "json.loads"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
