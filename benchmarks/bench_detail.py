"""Benchmark: detailness scoring (scene graph → COCO masks → ICR, AOD, CD) in captions/s.

Captions are resampled (seeded) from the 795 COCO-MINI human captions and paired with their own
image; grounding is COCO-MINI's instance masks (pycocotools: things-only ICR), AOD with the default
relation count (Eq. 3). Reports, as JSON:

* ``parse``: offline scene-graph parser alone (spaCy + claims rules), captions/s;
* ``ground_cold``: rasterising every image's instance masks once (per-category RLE merge), images/s;
* ``metrics_warm``: ICR + AOD + CD + annotation-precision ITM from parsed graphs, masks cached, captions/s;
* ``end_to_end``: ``score_records`` (parse + ground + metrics + ITM) with ``--workers`` processes
  (each loads spaCy and the masks once), captions/s, and peak RSS.

Not a test: ``python benchmarks/bench_detail.py [--n 5000] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, List, Sequence

_STATE: dict = {}


def _records(n: int, seed: int) -> List[Any]:
    from capaudit.detail.stage import coco_mini_records

    pool = coco_mini_records()
    rng = random.Random(seed)
    return [pool[rng.randrange(len(pool))] for _ in range(n)]


def _init() -> None:
    from capaudit.detail.grounding import CocoGrounding
    from capaudit.detail.itm import AnnotationPrecisionScorer
    from capaudit.standins.scene_graph import OfflineSceneGraphParser

    parser = OfflineSceneGraphParser()
    grounding = CocoGrounding.coco_mini()
    _STATE.update(parser=parser, grounding=grounding, itm=AnnotationPrecisionScorer(grounding, parser))
    parser.parse_many(["A warm-up caption about a dog on a bench."])


def _score_chunk(chunk: Sequence[Any]) -> int:
    from capaudit.detail.score import score_records

    if not _STATE:
        _init()
    return sum(1 for _ in score_records(chunk, _STATE["parser"], _STATE["grounding"], _STATE["itm"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5000, help="captions (resampled from COCO-MINI)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from capaudit.data.coco import coco_mini
    from capaudit.detail.grounding import CocoGrounding
    from capaudit.detail.itm import AnnotationPrecisionScorer
    from capaudit.detail.metrics import DEFAULT_RELATION_ENDS, score_graph

    recs = _records(args.n, args.seed)
    _init()
    parser = _STATE["parser"]

    t0 = time.perf_counter()
    graphs = [r.graph for r in parser.parse_many([r.caption for r in recs])]
    t_parse = time.perf_counter() - t0

    index = coco_mini()
    t0 = time.perf_counter()
    cold = CocoGrounding(index)
    for img in index:
        cold.ground(img.file_name)
    t_ground = time.perf_counter() - t0
    n_inst = sum(len(img.instances) for img in index)

    itm = AnnotationPrecisionScorer(cold)
    t0 = time.perf_counter()
    for r, g in zip(recs, graphs):
        gi = cold.ground(r.image)
        score_graph(g, r.caption, gi)
        itm.score_graph(g, gi)
    t_metrics = time.perf_counter() - t0

    chunks = [recs[i:i + args.chunk] for i in range(0, len(recs), args.chunk)]
    t0 = time.perf_counter()
    if args.workers <= 1:
        done = sum(_score_chunk(c) for c in chunks)
    else:
        with ProcessPoolExecutor(args.workers, initializer=_init) as ex:
            done = sum(ex.map(_score_chunk, chunks))
    t_e2e = time.perf_counter() - t0
    assert done == len(recs)

    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({
        "captions": len(recs), "workers": args.workers, "images": len(index), "instances": n_inst,
        "parse_captions_per_s": round(len(recs) / t_parse, 1),
        "ground_cold_images_per_s": round(len(index) / t_ground, 1),
        "metrics_warm_captions_per_s": round(len(recs) / t_metrics, 1),
        "end_to_end_captions_per_s": round(len(recs) / t_e2e, 1),
        "end_to_end_sec": round(t_e2e, 2),
        "peak_rss_mb": {"main": round(peak_self, 1), "largest_worker": round(peak_children, 1)},
        "icr": "things-only ICR (COCO instance masks)", "relation_ends": DEFAULT_RELATION_ENDS,
        "note": "end_to_end includes worker start-up (spaCy load) when workers > 1",
    }, indent=2))


if __name__ == "__main__":
    main()
