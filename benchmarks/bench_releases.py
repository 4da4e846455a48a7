"""Benchmark (not a test): import and score every published answer release in ``../shared/data``.

Each step is a fresh ``python -m capaudit.cli`` process (wall time, CPU time, peak RSS): ``judges
import`` of the nine DSG answer files (three VQA models × DSG/TIFA/VQ² question sets; DSG files with
the questions file) and of TIFA's sample result, then ``judges item-scores`` of every store
(dependency on for DSG stores, off otherwise), ``judges correlate`` (2,000 BCa resamples) and
``judges calibrate`` of PaLI-17B's DSG store against the TIFA160 Likert ratings.

    .venv/bin/python benchmarks/bench_releases.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _corpus import capaudit_measured  # noqa: E402

DATA = Path(os.environ.get("CAPAUDIT_DATA_DIR", HERE.parents[1] / "shared" / "data"))


cli = capaudit_measured


def main() -> int:
    dsg = DATA / "dsg"
    likert = str(dsg / "data" / "tifa160-likert-anns.csv")
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        stores = []
        for vqa in ("mplug", "instructblip", "pali17b"):
            for qg in ("dsg", "tifa", "vq2a"):
                out = f"{tmp}/{vqa}_{qg}"
                extra = ["--questions", str(dsg / "data" / "dsg-1k-anns.csv")] if qg == "dsg" else []
                rows.append((f"import {vqa}_{qg}", cli("judges", "import", "--format", "dsg", "--answers",
                                                       str(dsg / "vqa_answers_release" / f"{vqa}_{qg}.csv"),
                                                       *extra, "--judge", vqa, "--out", out)))
                stores.append((out, qg == "dsg"))
        tifa = f"{tmp}/tifa_sample"
        rows.append(("import tifa sample", cli("judges", "import", "--format", "tifa", "--answers",
                                                str(DATA / "tifa" / "sample" / "sample_evaluation_result.json"),
                                                "--judge", "mplug-large", "--out", tifa)))
        stores.append((tifa, False))
        for store, dep in stores:
            rows.append((f"item-scores {Path(store).name}", cli("judges", "item-scores", "--store", store,
                                                                "--dependency", "on" if dep else "off",
                                                                "--out", f"{store}.scores.jsonl")))
        pali = f"{tmp}/pali17b_dsg"
        rows.append(("correlate pali17b_dsg", cli("judges", "correlate", "--store", pali, "--human", likert,
                                                  "--dependency", "on", "--missing", "zero", "--out", f"{tmp}/c.json")))
        rows.append(("calibrate pali17b_dsg", cli("judges", "calibrate", "--store", pali, "--human", likert,
                                                  "--dependency", "on", "--labelled", "50", "--out", f"{tmp}/k.json")))
    total = time.perf_counter() - start
    print(f"{'step':34} {'wall s':>7} {'cpu s':>7} {'peak MB':>8}")
    for name, r in rows:
        print(f"{name:34} {r['wall_s']:7.2f} {r['cpu_s']:7.2f} {r['peak_rss_mb']:8.0f}")
    imports = sum(r["wall_s"] for n, r in rows if n.startswith("import"))
    scores = sum(r["wall_s"] for n, r in rows if n.startswith("item-scores"))
    print(f"all imports {imports:.1f} s, all item scores {scores:.1f} s, everything {total:.1f} s "
          f"(each step a fresh process, interpreter start included)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
