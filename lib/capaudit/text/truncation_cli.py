"""``capaudit encoder-truncation``: token counts of one caption file against text-encoder limits (spec §8.3).

    capaudit encoder-truncation INPUT.jsonl --caption-field caption --encoder clip77 \\
        --encoder longclip248 --out OUT.json

writes ``{"encoders": {"clip77": {"max_length": 77, "records": n, "truncated_rate", "at_or_over_rate",
"mean", "max", "mean_slack", "p05", "p50", "p90", "p95", "p99"}, ...}, "input": {...}, ...}``.

JSONL / Parquet inputs (files, a folder, a glob or an fsspec URL) are cut into shards and counted on
``--engine local`` (this machine, ``--workers`` processes) or ``--engine ray`` (``--address`` or
``RAY_ADDRESS``, else a local cluster); every shard gives exact count histograms, so the output is
the same bytes for any engine, number of workers or shards.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Optional

from ..argtypes import add_engine_options, name_positive_int, name_value, positive_int, positive_ints
from ..io.atomic import check_output_path, write_text_atomic


def register(sub: argparse._SubParsersAction) -> None:
    from .truncation import CLIP_CLEANING, DEFAULT_CLIP_CLEAN, DEFAULT_EMPTY, EMPTY_CONVENTIONS, ENCODERS

    p = sub.add_parser(
        "encoder-truncation", help="token counts of a caption file against text-encoder limits (CLIP-77, LongCLIP-248, ...)",
        description="Untruncated token counts with special tokens per encoder; truncated and at-or-over rates, mean, "
                    "max, mean slack, nearest-rank percentiles (reference-spec §8.3). Known encoders: "
                    + ", ".join(f"{k} ({v.max_length})" for k, v in ENCODERS.items()) + ".")
    p.add_argument("input", help="caption file (JSONL, JSON, Parquet, CSV/TSV, TXT); JSONL/Parquet also as a "
                                   "folder, glob or fsspec URL")
    p.add_argument("--caption-field", default=None, help="caption column (default: auto-detect, spec §2.1)")
    p.add_argument("--on-missing", choices=("error", "skip"), default="error",
                   help="a row without --caption-field: error (default) or skip")
    p.add_argument("--encoder", action="append", default=None, metavar="NAME",
                   help="encoder to survey (repeatable; default: clip77 and longclip248)")
    p.add_argument("--tokenizer-path", action="append", type=name_value, default=[], metavar="NAME=PATH",
                   help="local tokenizer of an encoder: a folder with tokenizer.json (hf) or a .gguf file (gemma3)")
    p.add_argument("--max-length", action="append", type=name_positive_int, default=[], metavar="NAME=N",
                   help="override an encoder's max length (needed for a custom hf tokenizer)")
    p.add_argument("--clean", choices=tuple(CLIP_CLEANING), default=DEFAULT_CLIP_CLEAN,
                   help="CLIP BPE text normalisation: " + "; ".join(f"{k}: {v}" for k, v in CLIP_CLEANING.items())
                        + f" (default {DEFAULT_CLIP_CLEAN})")
    p.add_argument("--empty", choices=tuple(EMPTY_CONVENTIONS), default=DEFAULT_EMPTY,
                   help="captions empty after strip(): " + "; ".join(f"{k}: {v}" for k, v in EMPTY_CONVENTIONS.items())
                        + f" (default {DEFAULT_EMPTY})")
    p.add_argument("--budgets", type=positive_ints, default=(), metavar="B1,B2",
                   help="also count captions cut at these lexical budgets (lex-cut text, spec §1.2)")
    p.add_argument("--skip-unavailable", action="store_true",
                   help="record an encoder whose tokenizer is missing under 'unavailable' instead of failing")
    p.add_argument("--max-records", type=positive_int, default=None)
    add_engine_options(p, shards_default="one per worker locally, ~64 MiB pieces on Ray")
    p.add_argument("--out", default="-", help="output JSON (default stdout)")
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    from ..engine.executors import EngineParams
    from ..errors import InputError
    from .sharding import shardable
    from .truncation import (TokenizerUnavailable, contract_view, finalize_part, load_counters, resolve_encoder,
                             survey_source)

    if args.out != "-":
        check_output_path(args.out)
    names: List[str] = list(dict.fromkeys(args.encoder or ["clip77", "longclip248"]))
    paths: Dict[str, str] = dict(args.tokenizer_path)
    lengths: Dict[str, int] = dict(args.max_length)
    for n in list(paths) + list(lengths):
        if n not in names:
            raise InputError(f"--tokenizer-path/--max-length name {n!r} is not among the --encoder names "
                             f"({', '.join(names)})", field="encoder")
    specs = [resolve_encoder(n, paths.get(n), lengths.get(n), clean=args.clean) for n in names]
    counters, unavailable = load_counters(specs, "skip" if args.skip_unavailable else "error")
    if not counters:
        raise TokenizerUnavailable("no encoder could be loaded: " + "; ".join(unavailable.values() or ["none given"]))
    budgets: List[Optional[int]] = [None, *sorted(set(args.budgets))]
    shard = args.input if shardable(args.input) and args.max_records is None else None
    part, stats = survey_source(counters, budgets, {"file": args.input, "on_missing": args.on_missing}, shard,
                                engine=EngineParams.from_args(args), caption_field=args.caption_field,
                                on_missing=args.on_missing, max_records=args.max_records, local_only_formats=True)
    out = contract_view(finalize_part(part, counters, unavailable, args.empty))
    out["input"] = {"rows": stats.rows, **{k: out["input"][k] for k in ("records", "empty_after_strip")},
                    "null_caption": stats.rows_empty_caption - stats.rows_blank_caption,
                    **{k: out["input"][k] for k in ("captions_counted", "empty")},
                    "rows_missing_caption_field": stats.rows_missing_field}
    text = json.dumps(out, indent=2, ensure_ascii=False) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(args.out, text)
    inp = out["input"]
    if inp["empty_after_strip"]:
        how = "counted as the empty string" if args.empty == "count" else "skipped"
        print(f"capaudit encoder-truncation: {inp['empty_after_strip']} caption(s) empty after strip() {how} "
              f"(--empty {args.empty})", file=sys.stderr)
    if inp["null_caption"]:
        print(f"capaudit encoder-truncation: {inp['null_caption']} null caption(s) skipped", file=sys.stderr)
    for name, why in (out.get("unavailable") or {}).items():
        print(f"capaudit encoder-truncation: {name} skipped: {why}", file=sys.stderr)
    return 0

