"""The ratios ``make bench`` measured, against issue 24's targets, in one table (not a test).

Each benchmark appends its ratios to the file named by ``CAPAUDIT_BENCH_TARGETS`` (see
``_corpus.record_target``); this prints them and exits 1 when a ratio is above its target, so a
regression shows. Ratios, not seconds: on a shared machine they are what compares.

    CAPAUDIT_BENCH_TARGETS=/tmp/t.jsonl .venv/bin/python benchmarks/bench_claims.py ...
    .venv/bin/python benchmarks/targets.py /tmp/t.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list) -> int:
    if len(argv) != 1:
        print("usage: targets.py RESULTS.jsonl", file=sys.stderr)
        return 2
    path = Path(argv[0])
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()] \
        if path.is_file() else []
    if not rows:
        print(f"{path}: no benchmark recorded a ratio", file=sys.stderr)
        return 1
    missed = 0
    print("benchmark ratios against issue 24's targets:")
    for r in rows:
        if r["target"] is None:
            verdict = "reported"
        elif r["value"] <= r["target"]:
            verdict = f"OK (target <= {r['target']:g})"
        else:
            verdict = f"ABOVE TARGET (<= {r['target']:g})"
            missed += 1
        print(f"  {r['name']:58s} {r['value']:7.2f}{r['unit']:8s} {verdict}  [{r['detail']}]")
    targeted = sum(r["target"] is not None for r in rows)
    print(f"{targeted - missed} of {targeted} targets met" if missed else f"all {targeted} targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
