"""Benchmark (not a test): the judges stage at scale, and the offline judges' throughput.

1. **build → summarize → cells** for ``--responses`` synthetic judge responses of ``--questions``
   questions each, split over two judges (one caption = one request per judge): synthetic claim
   requests/responses and a caption file over 16 small images are generated first (not timed); then
   each phase runs in its own processes (timed, wall clock): ``build`` (``judges build``, file
   mode) and ``summarize`` run one process per judge, the two at once (two cores, as two
   independent commands would), ``cells`` one process (intersection, 2,000-replicate caption
   bootstrap per cell, agreement), which forks workers for the judges' answers and the bootstrap
   blocks. Synthetic answers are generated from the built requests between build and summarize
   (not timed). Per phase: ``peak RSS`` = the largest process's ``getrusage`` peak plus that of
   its largest worker (an upper bound: copy-on-write pages shared with the worker count twice),
   ``peak_pss_mb`` = the sampled peak of all the phase's processes together (PSS, Linux),
   ``cpu_s`` (user + system, workers included) and ``steal_s`` (CPU time the hypervisor gave to
   other guests meanwhile, from ``/proc/stat``: a loaded host shows here).
   **Parse floor** (issue 24): ``parse_floor`` runs like ``summarize`` (one fresh process per judge,
   the two at once) but only reads that judge's request and response files once and parses every
   line with the JSON parser capaudit uses (``orjson`` when installed, as
   ``capaudit.io.canonical_json.loads``), nothing else; ``summarize`` and the floor run ``--repeat`` times
   interleaved, and the line ``judges summarize / parse floor`` gives the median of the per-pair
   wall-time ratios (target: at most 1.31x, the issue's figure: no regression), with the CPU-time
   ratio and the pairs' spread. The same ratio against a ``json.loads`` floor is printed for
   comparison only.
2. **offline judges**: images per second of each offline judge on the 159 COCO-MINI images (five
   questions per image, in-process calls), and through ``capaudit serve`` over HTTP.

    .venv/bin/python benchmarks/bench_judges.py                       # 1,000,000 responses (target < 60 s, < 2 GB)
    .venv/bin/python benchmarks/bench_judges.py --responses 100000    # a tenth of it
    .venv/bin/python benchmarks/bench_judges.py --skip-offline --keep /tmp/bench_judges
    .venv/bin/python benchmarks/bench_judges.py --responses 200000 --skip-offline --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _corpus import ratio_line  # noqa: E402

CATS = ("object", "attribute", "relation", "count", "style", "camera", "lighting", "text_rendering")
JUDGES = ("judge-a", "judge-b")


def generate(work: Path, captions: int, questions: int, seed: int = 0) -> None:
    """Claims requests/responses and the caption file (minimal fields the build reads)."""
    from PIL import Image

    from capaudit.io.canonical_json import dumps_line

    rng = random.Random(seed)
    imgs = []
    for i in range(16):
        p = work / "img" / f"{i:02d}.png"
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (32, 24), (i * 15, 80, 160)).save(p)
        imgs.append(str(p))
    with open(work / "cq.jsonl", "wb") as cq, open(work / "cr.jsonl", "wb") as cr, open(work / "captions.jsonl", "wb") as cp:
        for i in range(captions):
            cid = f"c{i:07d}"
            surface = "ours" if i % 2 == 0 else "ref"
            rid = f"{i:032x}"
            cq.write(dumps_line({"request_id": rid, "input": {"caption_id": cid, "surface": surface,
                                                              "caption": f"caption {i}"}, "decoding": {"max_tokens": 1024}}))
            units = [{"category": CATS[rng.randrange(8)], "unit": f"unit {k} of {i}", "span": f"unit {k}",
                      "target": "thing" if k % 3 else ""} for k in range(questions)]
            cr.write(dumps_line({"request_id": rid, "ok": True, "started_at": "2026-01-01T00:00:00.000Z",
                                 "parsed": {"caption_id": cid, "claimed_units": units}}))
            cp.write(dumps_line({"caption_id": cid, "image_path": imgs[i % 16], "caption": f"caption {i}"}))


def answer(work: Path, seed: int = 0) -> None:
    """Synthetic judge responses for every built request (one answer per question)."""
    from capaudit.io.canonical_json import dumps_line, loads

    rng = random.Random(seed)
    ans = ("yes", "yes", "yes", "no", "uncertain")
    for j in JUDGES:
        with open(work / f"{j}.req.jsonl", "rb") as fi, open(work / f"{j}.resp.jsonl", "wb") as fo:
            for line in fi:
                r = loads(line)
                qs = r["input"]["questions"]
                fo.write(dumps_line({"request_id": r["request_id"], "ok": True, "status": 200,
                                     "started_at": "2026-01-01T00:00:01.000Z", "model": j,
                                     "parsed": {"caption_id": r["input"]["caption_id"], "question_results": [
                                         {"question_id": q["question_id"], "answer": ans[rng.randrange(5)], "confidence": 0.9}
                                         for q in qs]}}))


def phase(name: str, work: Path, judge: str = "") -> dict:
    """One timed phase (runs inside its own process); ``judge`` for build and summarize."""
    t0 = time.perf_counter()
    if name == "build":
        from capaudit.judges.requests import JudgeBuildParams, build_judge_requests

        c = build_judge_requests([work / "cr.jsonl"], [work / "cq.jsonl"], work / "captions.jsonl", "caption_id",
                                 "image_path", JudgeBuildParams(model=judge), work / f"{judge}.req.jsonl")
        out = {"requests": c.requests, "questions": c.questions}
    elif name == "summarize":
        from capaudit.judges.summarize import summarize_files

        s = summarize_files([work / f"{judge}.resp.jsonl"], [work / f"{judge}.req.jsonl"], work / f"{judge}.summary.json",
                            judge=judge)
        out = {"responses": s.responses, "ok": s.ok}
    elif name in ("parse_floor", "parse_floor_json"):
        # the bare parse of the two files summarize reads: every line once, nothing kept
        if name == "parse_floor_json":
            from json import loads
        else:
            from capaudit.io.canonical_json import loads
        rows = 0
        for path in (work / f"{judge}.req.jsonl", work / f"{judge}.resp.jsonl"):
            with open(path, "rb") as fh:
                for line in fh:
                    if line.strip():
                        loads(line)
                        rows += 1
        out = {"rows": rows}
    elif name == "cells":
        from capaudit.io.atomic import write_text_atomic
        from capaudit.judges.cells import build_cells
        from capaudit.summaries.cells import format_cells

        cells, report = build_cells("S", [(j, [work / f"{j}.resp.jsonl"]) for j in JUDGES],
                                    [work / f"{j}.req.jsonl" for j in JUDGES])
        write_text_atomic(work / "cells.json", format_cells(cells))
        out = {"cells": len(cells.cells), "captions": report["__intersection__"]["captions"]}
    else:
        raise SystemExit(f"unknown phase {name}")
    out["seconds"] = round(time.perf_counter() - t0, 2)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    # this process, plus its largest worker (cells forks one per judge / bootstrap block; they run
    # beside this one, so the sum bounds the peak of the pair)
    out["peak_rss_mb"] = round((me.ru_maxrss + kids.ru_maxrss) / 1024, 1)
    out["cpu_s"] = round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 2)
    return out


def steal_seconds() -> float:
    """CPU time the hypervisor gave to others (``steal`` of ``/proc/stat``), all CPUs; 0 elsewhere."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class PssSampler:
    """Peak of the summed proportional set size (PSS: shared pages split between their users) of a
    set of process trees, polled from ``/proc/<pid>/smaps_rollup`` (Linux; None elsewhere)."""

    def __init__(self, pids: list, every: float = 0.5):
        import threading

        self.pids, self.every, self.peak_kb = pids, every, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def _tree(pid: int) -> list:
        out = [pid]
        try:
            for t in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{t}/children") as fh:
                    for c in fh.read().split():
                        out += PssSampler._tree(int(c))
        except OSError:
            pass
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            total, seen = 0, False
            for root in self.pids:
                for pid in self._tree(root):
                    try:
                        with open(f"/proc/{pid}/smaps_rollup") as fh:
                            for line in fh:
                                if line.startswith("Pss:"):
                                    total += int(line.split()[1])
                                    seen = True
                                    break
                    except OSError:
                        pass
            if seen:
                self.peak_kb = max(self.peak_kb or 0, total)
            self._stop.wait(self.every)

    def stop(self) -> "float | None":
        self._stop.set()
        self._thread.join()
        return None if self.peak_kb is None else round(self.peak_kb / 1024, 1)


def run_phase(name: str, work: Path) -> dict:
    """Run a phase: per judge in parallel processes (build, summarize) or once (cells); wall time."""
    judges = JUDGES if name in ("build", "summarize", "parse_floor", "parse_floor_json") else ("",)
    st0 = steal_seconds()
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, __file__, "--phase", name, "--work", str(work), "--judge", j],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for j in judges]
    sampler = PssSampler([p.pid for p in procs])
    results = []
    for p in procs:
        out, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"phase {name} failed:\n{err[-3000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    merged = {"seconds": round(wall, 2), "peak_rss_mb": max(r["peak_rss_mb"] for r in results),
              "peak_pss_mb": sampler.stop(), "processes": len(results),
              "cpu_s": round(sum(r["cpu_s"] for r in results), 2), "steal_s": round(steal_seconds() - st0, 2)}
    merged.update({k: v for k, v in results[0].items() if k not in ("seconds", "peak_rss_mb", "cpu_s")})
    return merged




def offline_throughput(limit: int = 159) -> dict:
    """Images per second of each offline judge: in-process and through ``capaudit serve``."""
    from capaudit.data.coco import coco_mini
    from capaudit.standins import judges as O
    from capaudit.judges.prompts import user_prompt
    from capaudit.judges.questions import Question, question_text
    from capaudit.judges.answer_schema import vqa_schema
    from capaudit.judges.requests import JudgeBuildParams, build_request
    from capaudit.llm.client import run_requests
    from capaudit.llm.requests import write_requests
    from capaudit.llm.server import background_server

    images = list(coco_mini())[:limit]
    claims = [("object", "dog", ""), ("count", "two people", "people"), ("relation", "cup on table", "cup"),
              ("attribute", "red car", "car"), ("style", "black and white", "scene")]
    out = {}
    for judge in (O.DEFAULT_ANNOTATION_JUDGE, O.DEFAULT_REFCAPTION_JUDGE):
        judge(_msgs(images[0], claims), {})  # warm-up (WordNet, lexicon, COCO index)
        t0 = time.perf_counter()
        for im in images:
            judge(_msgs(im, claims), {})
        dt = time.perf_counter() - t0
        out[judge.name] = {"images": len(images), "seconds": round(dt, 2), "images_per_s": round(len(images) / dt, 1)}
    with tempfile.TemporaryDirectory() as d:
        rows = []
        for im in images:
            qs = [Question(f"i{im.id}:u{k:04d}", c, question_text(c, u, t), u, t, "", k) for k, (c, u, t) in enumerate(claims)]
            rows.append(build_request(f"i{im.id}", "s", qs, Path(im.path).resolve().as_uri(), f"sha256:{im.id}",
                                      JudgeBuildParams(model=O.ANNOTATION_JUDGE)))
        write_requests(Path(d) / "r.jsonl", rows)
        with background_server([O.ANNOTATION_JUDGE], workers=2) as url:
            t0 = time.perf_counter()
            st = run_requests(str(Path(d) / "r.jsonl"), str(Path(d) / "o.jsonl"), [url], O.ANNOTATION_JUDGE,
                              concurrency=4, progress=False, handle_signals=False)
            dt = time.perf_counter() - t0
        out["http " + O.ANNOTATION_JUDGE] = {"images": st.answered, "seconds": round(dt, 2),
                                             "images_per_s": round(st.answered / dt, 1)}
    return out


def _msgs(im, claims):
    from capaudit.judges.prompts import user_prompt
    from capaudit.judges.questions import question_text
    from capaudit.judges.answer_schema import vqa_schema

    qs = [{"question_id": f"i:u{k:04d}", "category": c, "question": question_text(c, u, t)} for k, (c, u, t) in enumerate(claims)]
    text = user_prompt("i", qs, vqa_schema([q["question_id"] for q in qs]))
    return [{"role": "user", "content": [{"type": "text", "text": text},
                                         {"type": "image_url", "image_url": {"url": Path(im.path).resolve().as_uri()}}]}]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--responses", type=int, default=1_000_000, help="judge responses in total (two judges)")
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--keep", help="work folder to keep (default: a temporary one)")
    ap.add_argument("--skip-offline", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved summarize / parse-floor pairs (median)")
    ap.add_argument("--no-json-floor", action="store_true", help="skip the json.loads floor (comparison only)")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--judge", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, Path(args.work), args.judge)))
        return 0
    os.environ.setdefault("CAPAUDIT_DATA_DIR", str(REPO.parent / "shared" / "data"))
    ctx = tempfile.TemporaryDirectory() if not args.keep else None
    work = Path(args.keep) if args.keep else Path(ctx.name)  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    captions = args.responses // len(JUDGES)
    t0 = time.perf_counter()
    generate(work, captions, args.questions)
    print(f"generated {captions:,} captions x {args.questions} claims in {time.perf_counter() - t0:.1f} s (not timed)")
    res = {"build": run_phase("build", work)}
    t0 = time.perf_counter()
    answer(work)
    print(f"generated {args.responses:,} judge responses in {time.perf_counter() - t0:.1f} s (not timed)")
    runs, floors, json_floors = [], [], []
    for k in range(max(1, args.repeat)):
        runs.append(run_phase("summarize", work))
        floors.append(run_phase("parse_floor", work))
        if k == 0 and not args.no_json_floor:
            json_floors.append(run_phase("parse_floor_json", work))
    res["summarize"] = runs[0]
    res["cells"] = run_phase("cells", work)
    total = sum(r["seconds"] for r in res.values())
    for k, r in res.items():
        print(f"{k:10s} {r['seconds']:8.2f} s  peak RSS {r['peak_rss_mb']:8.1f} MB  "
              f"{json.dumps({x: y for x, y in r.items() if x not in ('seconds', 'peak_rss_mb')})}")
    pss = [r["peak_pss_mb"] for r in res.values() if r["peak_pss_mb"] is not None]
    print(f"build + summarize + cells: {total:.1f} s for {args.responses:,} responses x {args.questions} questions; "
          f"max peak RSS {max(r['peak_rss_mb'] for r in res.values()):.0f} MB per process"
          + (f" (all processes of a phase together, PSS: {max(pss):.0f} MB)" if pss else "")
          + f"; CPU {sum(r['cpu_s'] for r in res.values()):.1f} s; steal {sum(r['steal_s'] for r in res.values()):.1f} s")
    print(ratio_line("judges summarize", runs, floors, 1.31, "orjson", key="seconds"))
    if json_floors:
        print("  comparison only: " + ratio_line("judges summarize", runs[:1], json_floors, 1.31, "json.loads", key="seconds"))
    if not args.skip_offline:
        for k, r in offline_throughput().items():
            print(f"offline {k}: {r['images_per_s']} images/s ({r['images']} images, {r['seconds']} s)")
    if ctx is not None:
        ctx.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
