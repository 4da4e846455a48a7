"""Benchmark: the text-budget survey on 1,000,000 captions resampled from real captions.

Reports survey captions/s, the time of one bare ``LEX_RE.findall(caption.lower())`` pass over the
same texts (the survey lower-cases before tokenising, so the bare pass does too), their ratio, and
peak RSS. The data folder is ``$CAPAUDIT_DATA_DIR``, else ``../shared/data`` beside the repository. Not a test: run ``make bench`` or
``python benchmarks/bench_text_survey.py [--n 1000000] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import time
from pathlib import Path

# Like bench_prompt_support.py: without CAPAUDIT_DATA_DIR, use ../shared/data next to the repo
# (offline: the registry then finds every file locally and never downloads).
os.environ.setdefault("CAPAUDIT_DATA_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "data"))

from capaudit.data.registry import fetch  # noqa: E402
from capaudit.text.lexical import LEX_RE  # noqa: E402
from capaudit.text.survey import SurveyConfig, survey_captions  # noqa: E402


def real_captions() -> list:
    caps = []
    for line in open(fetch("imageinwords", "IIW-400/data.jsonl"), encoding="utf-8"):
        row = json.loads(line)
        caps += [row[k] for k in ("IIW", "IIW-P5B") if row.get(k)]
    for line in open(fetch("imageinwords", "DOCCI_Test/data.jsonl"), encoding="utf-8"):
        row = json.loads(line)
        caps += [row[k] for k in ("DOCCI", "IIW") if row.get(k)]
    for v in json.load(open(fetch("coco_karpathy_captions", "test_captions.json"), encoding="utf-8")).values():
        caps += v
    for row in json.load(open(fetch("nocaps_val", "nocaps_corpus.json"), encoding="utf-8")):
        caps += row["caption"]
    return caps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pool = real_captions()
    rng = random.Random(args.seed)
    corpus = [pool[rng.randrange(len(pool))] for _ in range(args.n)]
    units = sum(len(LEX_RE.findall(c.lower())) for c in corpus[:1000])  # warm-up

    # the bare pass does what the survey's tokeniser does per caption: lower-case, then findall
    t0 = time.perf_counter()
    findall = LEX_RE.findall
    units = 0
    for c in corpus:
        units += len(findall(c.lower()))
    bare = time.perf_counter() - t0

    t0 = time.perf_counter()
    result = survey_captions(corpus, SurveyConfig(), workers=args.workers).finalize()
    survey = time.perf_counter() - t0
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({
        "captions": args.n, "lexical_units": units, "workers": args.workers,
        "bare_findall_s": round(bare, 3), "survey_s": round(survey, 3),
        "survey_captions_per_s": round(args.n / survey), "ratio_survey_to_bare": round(survey / bare, 2),
        "peak_rss_mb_main": round(peak_self), "peak_rss_mb_worker": round(peak_children),
        "check_avg_lex": round(result["avg_lex"], 4),
    }, indent=2))


if __name__ == "__main__":
    main()
