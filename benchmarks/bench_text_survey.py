"""Benchmark: ``capaudit text-stats`` side by side with the bare regex pass (not a test).

On one JSONL corpus of real captions resampled to about 35 lexical units per caption (default
1,000,000 captions), in one run: the bare pass (``json.loads`` + ``LEX_RE.findall`` per line,
and the same with ``.lower()`` as the survey tokenises), then the real CLI on 1 and 2 local
workers and on a local Ray cluster with 2 workers; ratios to the bare pass and the peak RSS of
each run's whole process tree. The work is done by ``bench_engine.py`` (which adds ``--rss-n``
for 10M captions and the cost table of the README's "Scaling out" section).

    .venv/bin/python benchmarks/bench_text_survey.py [--n 1000000] [--no-ray]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_engine import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
