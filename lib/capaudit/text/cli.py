"""``capaudit text-stats``: the text-budget survey of one caption file."""

from __future__ import annotations

import argparse
import json
import sys

from ..argtypes import add_engine_options, positive_int, positive_ints
from ..io.atomic import check_output_path, write_text_atomic


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("text-stats", help="text budget and surface concentration of one caption file",
                       description="Survey a caption file (JSONL, Parquet, CSV/TSV, JSON): Avg lex, "
                                   "B-eligibility, truncation, opener rate, prefix mass, Distinct-n, rep-n.")
    p.add_argument("input", help="caption file")
    p.add_argument("--caption-field", default=None, help="caption column (default: auto-detect, spec §2.1)")
    p.add_argument("--on-missing", choices=("error", "skip"), default="error",
                   help="a row without --caption-field: error (default) or skip (skipped rows are counted)")
    p.add_argument("--budgets", type=positive_ints, default=(16, 32, 64, 128, 256))
    p.add_argument("--ngram-orders", type=positive_ints, default=(1, 2, 3))
    p.add_argument("--repeat-orders", type=positive_ints, default=(3, 4, 5, 6))
    p.add_argument("--top-k", type=positive_ints, default=(100,),
                   help="k of the top-k prefix mass: one k, or a list (10,100,1000 as the reference's "
                        "driver runs it); with a list, prefix_top_mass_by_k gives every k (prefix_top_mass: k = 100 "
                        "when listed, else the first)")
    p.add_argument("--max-records", type=positive_int, default=None)
    add_engine_options(p)
    p.add_argument("--spill-dir", default=None,
                   help="bound memory: keep at most --max-keys exact counts in memory, spill the rest here")
    p.add_argument("--max-keys", type=positive_int, default=8_000_000)
    p.add_argument("--distinct", choices=("exact", "hll"), default="exact",
                   help="Distinct-n: exact (default) or a HyperLogLog estimate (0.81%% standard error at p=14; "
                        "n-gram top-k mass and entropy are then omitted)")
    p.add_argument("--hll-precision", type=int, default=14, help="HyperLogLog registers = 2**p (4..18)")
    p.add_argument("--no-rounded-marginal-gain", dest="rounded_marginal_gain", action="store_false",
                   help="marginal_avg_token_gain from unrounded averages (default: the reference quirk, "
                        "rounded to 2 decimals first)")
    p.add_argument("--detail", action="store_true", help="write every survey field, not only the contract view")
    p.add_argument("--out", default="-", help="output JSON (default stdout)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from ..surfaces import LoadStats, iter_captions
    from .stage import contract_view, headline_k, load_counts, survey_input, survey_notes
    from ..errors import InputError
    from .sharding import shardable
    from .survey import WINDOW_DEFINITION, SurveyConfig, survey_captions

    if args.out != "-":
        check_output_path(args.out)  # fail before the survey, not after it
    cfg = SurveyConfig(budgets=tuple(sorted(set(args.budgets))), ngram_orders=args.ngram_orders,
                       repeat_orders=args.repeat_orders, top_k=headline_k(args.top_k),
                       top_ks=tuple(sorted(set(args.top_k) | {10, 100, 1000})),
                       marginal_gain_from_rounded=args.rounded_marginal_gain, distinct=args.distinct,
                       hll_precision=args.hll_precision)
    summary = None
    if shardable(args.input) and args.max_records is None:
        try:
            summary = survey_input(args.input, cfg, engine=args.engine, workers=args.workers, address=args.address,
                                   shards=args.shards, caption_field=args.caption_field, on_missing=args.on_missing,
                                   spill_dir=args.spill_dir, max_keys=args.max_keys)
        except Exception:  # noqa: BLE001 - any read problem is reported by the loader below
            if args.engine != "local":
                raise
            summary = None  # bad input: the surfaces loader below reports it (one canonical message)
        else:
            stats = LoadStats(**{k: int(summary.load.get(k, 0)) for k in ("rows", "rows_without_caption", "records",
                                                                          "rows_missing_field", "rows_empty_caption")})
    if summary is None:
        if args.engine != "local":
            raise InputError("--engine ray needs JSONL or Parquet input (files, a folder, a glob or an fsspec URL) "
                             "and no --max-records", path=args.input)
        stats = LoadStats()
        spec = {"file": args.input, "on_missing": args.on_missing}
        caps = (r.caption for r in iter_captions(spec, caption_field=args.caption_field,
                                                 max_records=args.max_records, stats=stats))
        summary = survey_captions(caps, cfg, workers=args.workers, spill_dir=args.spill_dir, max_keys=args.max_keys)
    result = summary.finalize()
    result["input"] = load_counts(stats)
    result["notes"] = survey_notes(result, cfg.budgets, cfg.top_k)
    result["definitions"] = {"window": WINDOW_DEFINITION}
    out = result if args.detail else contract_view(result, cfg.budgets, cfg.top_k,
                                                   args.top_k if len(args.top_k) > 1 else ())
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
