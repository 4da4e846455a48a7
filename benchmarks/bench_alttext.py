"""Benchmark: alt-text filter funnels and concept coverage (issue 14). Not a test.

1. rows/s of the shipped ``cc3m`` and ``cc12m`` pipelines on real web alt-text
   (img2dataset_alttext_sample, resampled with a seed to ``--rows``); models are loaded before timing;
2. coverage captions/s (nocaps_ood alone, and nocaps_ood + lvis + objects365 in one pass) on real
   captions (COCO Karpathy test + nocaps val, resampled to ``--coverage-n``);
3. streaming: ``--stream-rows`` generated rows (default 10,000,000) through the rule-only part of the
   CC12M pipeline (word count, word repetition, adult words, rare words with hashed counts, two passes),
   kept rows counted, nothing held; reports rows/s and the process's peak RSS.

One process (spaCy ``nlp.pipe`` single process; numpy may use the second core).  Usage::

    python benchmarks/bench_alttext.py [--rows 10000] [--coverage-n 200000] [--stream-rows 10000000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import time
from pathlib import Path

os.environ.setdefault("CAPAUDIT_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))

from capaudit.alttext.coverage import coverage_of_texts  # noqa: E402
from capaudit.alttext.funnel import build_pipeline  # noqa: E402
from capaudit.alttext.rows import RowSource  # noqa: E402
from capaudit.alttext.vocab import load_vocabulary  # noqa: E402
from capaudit.data.registry import fetch  # noqa: E402


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def alttext_rows(n: int, seed: int = 0) -> list:
    import pyarrow.parquet as pq

    rows = pq.read_table(fetch("img2dataset_alttext_sample", "test_10000.parquet")).to_pylist()
    if n <= len(rows):
        return rows[:n]
    rng = random.Random(seed)
    return [rows[rng.randrange(len(rows))] for _ in range(n)]


def captions(n: int, seed: int = 0) -> list:
    caps = []
    for v in json.load(open(fetch("coco_karpathy_captions", "test_captions.json"), encoding="utf-8")).values():
        caps += v
    for row in json.load(open(fetch("nocaps_val", "nocaps_corpus.json"), encoding="utf-8")):
        caps += row["caption"]
    rng = random.Random(seed)
    return [caps[rng.randrange(len(caps))] for _ in range(n)]


def bench_pipeline(name: str, rows: list) -> dict:
    pipe = build_pipeline(name)
    warm = rows[:300]
    pipe.run(RowSource.from_spec({"rows": lambda: iter(warm)}), "TEXT")  # load langid, spaCy, WordNet, COCO-MINI
    t0 = time.perf_counter()
    f = pipe.run(RowSource.from_spec({"rows": lambda: iter(rows)}), "TEXT")
    dt = time.perf_counter() - t0
    return {"pipeline": name, "rows": len(rows), "kept": f.kept, "seconds": round(dt, 2),
            "rows_per_s": round(len(rows) / dt, 1), "spacy_parsed": f.extra.get("spacy_parsed")}


def bench_coverage(caps: list) -> list:
    out = []
    for vocabs in (["nocaps_ood"], ["nocaps_ood", "lvis", "objects365"]):
        vs = [load_vocabulary(v) for v in vocabs]
        coverage_of_texts(caps[:2000], vs)  # WordNet + matchers warm
        t0 = time.perf_counter()
        coverage_of_texts(caps, vs)
        dt = time.perf_counter() - t0
        out.append({"vocabularies": vocabs, "captions": len(caps), "seconds": round(dt, 2),
                    "captions_per_s": round(len(caps) / dt, 1)})
    return out


def bench_stream(n: int) -> dict:
    words = ["dog", "cat", "beach", "red", "blue", "house", "street", "photo", "vintage", "leather", "bag", "sale",
             "shoes", "women", "men", "garden", "flower", "kitchen", "table", "wooden"]

    def gen():
        for i in range(n):
            k = 3 + i % 9
            yield {"TEXT": " ".join(words[(i * 7 + j * 13) % len(words)] for j in range(k)) + f" item{i % 1000}",
                   "URL": f"http://shop{i % 5000}.example.com/img/{i}.jpg"}

    pipe = build_pipeline([
        {"block": "word_count", "min_words": 3, "max_words": 256},
        {"block": "word_repetition", "max_fraction": 0.2},
        {"block": "adult_words"},
        {"block": "rare_words", "min_count": 20, "hash_buckets": 1 << 22},
    ], name="cc12m_rules")
    kept = [0]
    t0 = time.perf_counter()
    f = pipe.run(RowSource.from_spec({"rows": gen}), "TEXT", batch_size=1024,
                 on_kept=lambda it: kept.__setitem__(0, kept[0] + 1))
    dt = time.perf_counter() - t0
    return {"rows": n, "kept": f.kept, "passes": 2, "seconds": round(dt, 1), "rows_per_s": round(n / dt, 1),
            "peak_rss_mib": round(peak_rss_mib(), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--coverage-n", type=int, default=200_000)
    ap.add_argument("--stream-rows", type=int, default=10_000_000)
    ap.add_argument("--skip", default="", help="comma-separated: pipelines,coverage,stream")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    res: dict = {"cpus": os.cpu_count()}
    if "pipelines" not in skip:
        rows = alttext_rows(args.rows)
        res["pipelines"] = [bench_pipeline(p, rows) for p in ("cc3m", "cc12m")]
    if "coverage" not in skip:
        res["coverage"] = bench_coverage(captions(args.coverage_n))
    if "stream" not in skip:
        res["stream"] = bench_stream(args.stream_rows)
    res["peak_rss_mib"] = round(peak_rss_mib(), 1)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
