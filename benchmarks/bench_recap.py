"""Benchmark (not a test): the captioning runner's image preprocessing and end-to-end throughput.

1. **Preprocessing**: images/s of :func:`capaudit.recap.preprocess.prepare` (read, sha256, request
   id, decode, EXIF, RGB, resize rule, JPEG q90, base64 data URL) on COCO-size JPEGs — the 159
   COCO-MINI originals (640×≤640), cycled to N jobs — in a spawn ``ProcessPoolExecutor`` with
   ``--workers`` processes (worker start-up excluded: one warm-up job each), plus ``--big`` to use
   synthetic 2048×1536 JPEGs that take the resize path.
2. **End to end**: captions/s of the real CLI (``python -m capaudit.cli recap run``) on a folder of N
   images (symlinks to the COCO-MINI files under distinct names, so every image is a distinct
   request) against a zero-latency OpenAI-compatible endpoint (aiohttp in its own process, fixed
   caption); reported from the run's own statistics, plus wall time and the runner process's peak
   RSS (``VmHWM``, Linux; the preprocessing workers are separate processes).

    .venv/bin/python benchmarks/bench_recap.py                        # 2,000 jobs, 2 workers; e2e 2,000 images
    .venv/bin/python benchmarks/bench_recap.py --prep 400 --e2e 300   # quick check
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "lib"))
os.environ.setdefault("CAPAUDIT_DATA_DIR", str(REPO.parent / "shared" / "data"))

from _common import start_server as start_chat_server  # noqa: E402
from capaudit.recap.policies import load_policy  # noqa: E402
from capaudit.recap.preprocess import Job, PrepOptions, init_worker, prepare_in_worker  # noqa: E402

CAPTION = ("A brown dog runs across a sunlit beach toward the water, a red frisbee in its mouth, wet sand "
           "glistening under a pale blue sky.\n\nTEXT: none")


def coco_files() -> list:
    from capaudit.data.coco import coco_mini

    return [str(im.path) for im in coco_mini(with_captions=False)]


def big_files(folder: Path, n: int = 16) -> list:
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    rng = np.random.default_rng(0)
    for i in range(n):
        x = np.linspace(0, 255, 2048, dtype=np.float32)[None, :, None]
        y = np.linspace(0, 255, 1536, dtype=np.float32)[:, None, None]
        img = (x * 0.6 + y * 0.4 + rng.normal(0, 12, (1536, 2048, 3))).clip(0, 255).astype("uint8")
        p = folder / f"big_{i:02d}.jpg"
        Image.fromarray(img).save(p, quality=90)
        out.append(str(p))
    return out


def bench_prep(n: int, workers: int, files: list) -> dict:
    from capaudit.recap.runner import id_template  # not at module level: spawned workers re-import this file

    pol = load_policy("photorealistic")
    opts = PrepOptions()
    tmpl = id_template(pol, "bench-model", None, opts)
    jobs = [Job(f"img{i}", files[i % len(files)], file=files[i % len(files)]) for i in range(n)]
    t0 = time.monotonic()
    with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=init_worker,
                                initargs=(tmpl, opts, frozenset(), None)) as ex:
        list(ex.map(prepare_in_worker, jobs[:workers]))  # start-up and warm-up
        t1 = time.monotonic()
        res = list(ex.map(prepare_in_worker, jobs, chunksize=4))
        t2 = time.monotonic()
    bad = sum(1 for r in res if r.error)
    sent = sum(len(r.url or "") for r in res) / max(1, n)
    return {"part": "preprocess", "jobs": n, "workers": workers, "failed": bad, "startup_sec": round(t1 - t0, 2),
            "sec": round(t2 - t1, 2), "images_per_sec": round(n / (t2 - t1), 1),
            "mean_data_url_kib": round(sent / 1024, 1)}


def start_server() -> tuple:
    return start_chat_server(CAPTION, {"prompt_tokens": 900, "completion_tokens": 30, "total_tokens": 930},
                             max_request_bytes=64 * 1024 * 1024)


def _vm_hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def bench_e2e(n: int, workers: int, concurrency: int, files: list, tmp: Path, mode: str) -> dict:
    imgs = tmp / f"e2e_{n}"
    if not imgs.exists():
        imgs.mkdir()
        for i in range(n):
            os.symlink(files[i % len(files)], imgs / f"img_{i:06d}.jpg")
    server, url = start_server()
    store = tmp / f"store_{n}_{mode}"
    stats = tmp / f"stats_{n}_{mode}.json"
    cmd = [sys.executable, "-m", "capaudit.cli", "recap", "run", "--images", str(imgs), "--policy", "photorealistic",
           "--policies-dir", str(REPO / "params" / "policies"), "--url", url, "--model", "bench-model",
           "--out", str(store), "--workers", str(workers), "--concurrency", str(concurrency),
           "--image-mode", mode, "--no-progress", "--stats-json", str(stats)]
    try:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, env=dict(os.environ, PYTHONPATH=str(REPO / "lib")), stderr=subprocess.DEVNULL)
        peak = 0
        while proc.poll() is None:  # the runner's own high-water mark (workers excluded)
            peak = max(peak, _vm_hwm_kib(proc.pid))
            time.sleep(0.05)
        status = proc.returncode
        wall = time.monotonic() - t0
    finally:
        server.terminate()
        server.wait(10)
    if status != 0:
        raise RuntimeError(f"recap run exited with status {status}")
    st = json.loads(stats.read_text())
    return {"part": "end_to_end", "images": n, "image_mode": mode, "workers": workers, "concurrency": concurrency,
            "answered": st["answered"], "failed": st["failed"] + st["image_failed"], "run_sec": st["elapsed_sec"],
            "captions_per_sec": st["captions_per_sec"], "wall_sec": round(wall, 2),
            "runner_peak_rss_mib": round(peak / 1024, 1) if peak else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prep", type=int, default=2000, help="preprocessing jobs (0 to skip)")
    ap.add_argument("--e2e", type=int, default=2000, help="images for the end-to-end run (0 to skip)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--big", action="store_true", help="also preprocess synthetic 2048x1536 JPEGs (resize path)")
    ap.add_argument("--file-mode", action="store_true", help="also run end to end with --image-mode file")
    args = ap.parse_args()
    files = coco_files()
    print(f"cpus={os.cpu_count()} python={sys.version.split()[0]} coco_images={len(files)}")
    with tempfile.TemporaryDirectory(prefix="bench_recap_") as d:
        tmp = Path(d)
        if args.prep:
            print(json.dumps({**bench_prep(args.prep, args.workers, files), "images": "coco-mini"}), flush=True)
            if args.big:
                print(json.dumps({**bench_prep(max(1, args.prep // 8), args.workers, big_files(tmp / "big")),
                                  "images": "synthetic 2048x1536"}), flush=True)
        if args.e2e:
            print(json.dumps(bench_e2e(args.e2e, args.workers, args.concurrency, files, tmp, "data")), flush=True)
            if args.file_mode:
                print(json.dumps(bench_e2e(args.e2e, args.workers, args.concurrency, files, tmp, "file")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
