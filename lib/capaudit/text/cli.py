"""``capaudit text-stats``: the text-budget survey of one caption file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .stage import contract_view
from .survey import SurveyConfig, survey_captions


def _ints(text: str) -> tuple:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from exc


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("text-stats", help="text budget and surface concentration of one caption file",
                       description="Survey a caption file (JSONL, Parquet, CSV/TSV, JSON): Avg lex, "
                                   "B-eligibility, truncation, opener rate, prefix mass, Distinct-n, rep-n.")
    p.add_argument("input", help="caption file")
    p.add_argument("--caption-field", default=None, help="caption column (default: auto-detect, spec §2.1)")
    p.add_argument("--budgets", type=_ints, default=(16, 32, 64, 128, 256))
    p.add_argument("--ngram-orders", type=_ints, default=(1, 2, 3))
    p.add_argument("--repeat-orders", type=_ints, default=(3, 4, 5, 6))
    p.add_argument("--top-k", type=int, default=100)
    p.add_argument("--max-records", type=int, default=None)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--detail", action="store_true", help="write every survey field, not only the contract view")
    p.add_argument("--out", default="-", help="output JSON (default stdout)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from ..surfaces import iter_captions

    cfg = SurveyConfig(budgets=tuple(sorted(set(args.budgets))), ngram_orders=args.ngram_orders,
                       repeat_orders=args.repeat_orders, top_k=args.top_k)
    caps = (r.caption for r in iter_captions(args.input, caption_field=args.caption_field,
                                             max_records=args.max_records))
    result = survey_captions(caps, cfg, workers=args.workers).finalize()
    out = result if args.detail else contract_view(result, cfg.budgets, cfg.top_k)
    text = json.dumps(out, indent=2, ensure_ascii=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0
