"""``capaudit text-stats``: the text-budget survey of one caption file."""

from __future__ import annotations

import argparse
import json
import sys

from ..argtypes import positive_int
from ..io.atomic import check_output_path, write_text_atomic


def _ints(text: str) -> tuple:
    """Comma-separated positive integers (at least one)."""
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("text-stats", help="text budget and surface concentration of one caption file",
                       description="Survey a caption file (JSONL, Parquet, CSV/TSV, JSON): Avg lex, "
                                   "B-eligibility, truncation, opener rate, prefix mass, Distinct-n, rep-n.")
    p.add_argument("input", help="caption file")
    p.add_argument("--caption-field", default=None, help="caption column (default: auto-detect, spec §2.1)")
    p.add_argument("--on-missing", choices=("error", "skip"), default="error",
                   help="a row without --caption-field: error (default) or skip (skipped rows are counted)")
    p.add_argument("--budgets", type=_ints, default=(16, 32, 64, 128, 256))
    p.add_argument("--ngram-orders", type=_ints, default=(1, 2, 3))
    p.add_argument("--repeat-orders", type=_ints, default=(3, 4, 5, 6))
    p.add_argument("--top-k", type=positive_int, default=100)
    p.add_argument("--max-records", type=positive_int, default=None)
    p.add_argument("--workers", type=positive_int, default=1)
    p.add_argument("--no-rounded-marginal-gain", dest="rounded_marginal_gain", action="store_false",
                   help="marginal_avg_token_gain from unrounded averages (default: the reference quirk, "
                        "rounded to 2 decimals first)")
    p.add_argument("--detail", action="store_true", help="write every survey field, not only the contract view")
    p.add_argument("--out", default="-", help="output JSON (default stdout)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from ..surfaces import LoadStats, iter_captions
    from .stage import contract_view, load_counts, survey_notes
    from .survey import SurveyConfig, survey_captions

    if args.out != "-":
        check_output_path(args.out)  # fail before the survey, not after it
    cfg = SurveyConfig(budgets=tuple(sorted(set(args.budgets))), ngram_orders=args.ngram_orders,
                       repeat_orders=args.repeat_orders, top_k=args.top_k,
                       marginal_gain_from_rounded=args.rounded_marginal_gain)
    stats = LoadStats()
    spec = {"file": args.input, "on_missing": args.on_missing}
    caps = (r.caption for r in iter_captions(spec, caption_field=args.caption_field,
                                             max_records=args.max_records, stats=stats))
    result = survey_captions(caps, cfg, workers=args.workers).finalize()
    result["input"] = load_counts(stats)
    result["notes"] = survey_notes(result, cfg.budgets, cfg.top_k)
    out = result if args.detail else contract_view(result, cfg.budgets, cfg.top_k)
    text = json.dumps(out, indent=2, ensure_ascii=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(args.out, text)
    skipped = stats.rows_without_caption
    if skipped:
        print(f"capaudit text-stats: {skipped} of {stats.rows} rows skipped ({stats.rows_missing_field} without the "
              f"caption field, {stats.rows_empty_caption} with an empty or null caption)", file=sys.stderr)
    return 0
