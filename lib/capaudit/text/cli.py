"""``capaudit text-stats``: the text-budget survey of one caption file."""

from __future__ import annotations

import argparse
import json
import sys

from ..argtypes import add_engine_options, positive_int, positive_ints
from ..io.atomic import check_output_path, write_text_atomic
from .params import TextStatsParams


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("text-stats", help="text budget and surface concentration of one caption file",
                       description="Survey a caption file (JSONL, Parquet, CSV/TSV, JSON): Avg lex, "
                                   "B-eligibility, truncation, opener rate, prefix mass, Distinct-n, rep-n.")
    p.add_argument("input", help="caption file")
    p.add_argument("--caption-field", default=None, help="caption column (default: auto-detect, spec §2.1)")
    p.add_argument("--on-missing", choices=("error", "skip"), default="error",
                   help="a row without --caption-field: error (default) or skip (skipped rows are counted)")
    p.add_argument("--budgets", type=positive_ints, default=TextStatsParams.budgets)
    p.add_argument("--ngram-orders", type=positive_ints, default=TextStatsParams.ngram_orders)
    p.add_argument("--repeat-orders", type=positive_ints, default=TextStatsParams.repeat_orders)
    p.add_argument("--top-k", type=positive_ints, default=TextStatsParams.top_k,
                   help="k of the top-k prefix mass: one k, or a list (10,100,1000 as the reference's "
                        "driver runs it); with a list, prefix_top_mass_by_k gives every k (prefix_top_mass: k = 100 "
                        "when listed, else the first)")
    p.add_argument("--max-records", type=positive_int, default=None)
    add_engine_options(p)
    p.add_argument("--spill-dir", default=None,
                   help="bound memory: keep at most --max-keys exact counts in memory, spill the rest here")
    p.add_argument("--max-keys", type=positive_int, default=TextStatsParams.max_keys)
    p.add_argument("--distinct", choices=("exact", "hll"), default=TextStatsParams.distinct,
                   help="Distinct-n: exact (default) or a HyperLogLog estimate (0.81%% standard error at p=14; "
                        "n-gram top-k mass and entropy are then omitted)")
    p.add_argument("--hll-precision", type=int, default=TextStatsParams.hll_precision, help="HyperLogLog registers = 2**p (4..18)")
    p.add_argument("--no-rounded-marginal-gain", dest="rounded_marginal_gain", action="store_false",
                   help="marginal_avg_token_gain from unrounded averages (default: the reference quirk, "
                        "rounded to 2 decimals first)")
    p.add_argument("--detail", action="store_true", help="write every survey field, not only the contract view")
    p.add_argument("--out", default="-", help="output JSON (default stdout)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from .stage import contract_view, survey_file

    if args.out != "-":
        check_output_path(args.out)  # fail before the survey, not after it
    params = TextStatsParams.from_args(args)
    result, stats = survey_file(params, args.input, caption_field=args.caption_field, on_missing=args.on_missing,
                                max_records=args.max_records)
    scfg = params.survey_config()
    out = result if args.detail else contract_view(result, scfg.budgets, scfg.top_k,
                                                   params.top_k if len(params.top_k) > 1 else ())
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
