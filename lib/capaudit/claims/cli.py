"""``capaudit claims build|summarize|eval-dsg|run`` (reference-spec §4.2, §4.4).

    capaudit claims build --input CAPTIONS.jsonl --caption-field caption --surface NAME --budget 64 \
        --out REQUESTS.jsonl [--sample-records N --sample-seed 0 | --max-records N] [--model M] \
        [--id-field F] [--window whitespace|lexical] [--max-caption-chars 1800] [--max-units K] \
        [--prompts reference|capaudit] [--parent-links]
    capaudit claims summarize --responses RESPONSES.jsonl [--responses MORE.jsonl] \
        [--requests REQUESTS.jsonl ...] --out SUMMARY.json [--bootstrap-reps 2000 --bootstrap-seed 0]
    capaudit claims eval-dsg --out DIR [--dsg dsg-1k-anns.csv]
    capaudit claims run [--params params/demo.yaml]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from capaudit.argtypes import budget, nonnegative_int, positive_int
from capaudit.budgets import DEFAULT_BUDGET

# Defaults shown in --help; capaudit.claims.requests (which imports the model-call layer) is
# imported only when a command runs. tests/test_failures_cli.py checks they agree.
DEFAULT_MODEL = "Qwen/Qwen3.5-35B-A3B"
MAX_CAPTION_CHARS = 1800
MAX_TOKENS = 4096
WINDOW_MODES = ("whitespace", "lexical")
PROMPT_SETS = ("reference", "capaudit")
#: caption-level bootstrap defaults (the reference's export_cbu_metric_tables.py)
BOOTSTRAP_REPS = 2000
BOOTSTRAP_SEED = 0


def bootstrap_reps(text: str) -> int:
    """0 (no intervals) or an integer >= 2."""
    value = nonnegative_int(text)
    if value == 1:
        raise argparse.ArgumentTypeError("expected 0 (off) or at least 2 replicates, got 1")
    return value



def register(subparsers: Any) -> None:
    """Add ``claims`` and its subcommands to the ``capaudit`` command."""

    claims = subparsers.add_parser("claims", help="claim extraction: build requests, summarize, evaluate")
    sub = claims.add_subparsers(dest="claims_command", metavar="CLAIMS_COMMAND")

    b = sub.add_parser("build", help="build claim-extraction requests from a caption JSONL (§4.2)")
    b.add_argument("--input", required=True, help="caption JSONL (.jsonl, .ndjson, optionally .gz)")
    b.add_argument("--caption-field", default="caption")
    b.add_argument("--on-missing", choices=("error", "skip"), default="error",
                   help="a row without --caption-field: error (default) or skip (skipped rows are counted)")
    b.add_argument("--surface", required=True, help="surface label")
    b.add_argument("--budget", type=budget, default=DEFAULT_BUDGET, help="window in whitespace words (or 'full')")
    b.add_argument("--out", required=True, help="request JSONL (a .manifest.json is written beside it)")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--sample-records", type=positive_int, help="seeded sample of N usable rows")
    g.add_argument("--max-records", type=positive_int, help="first N usable rows")
    b.add_argument("--sample-seed", type=int, default=0)
    b.add_argument("--model", default=DEFAULT_MODEL,
                   help="model name the requests are for (hashed into ids; give the name `llm run --model` will use)")
    b.add_argument("--revision", help="model revision (hashed into ids)")
    b.add_argument("--id-field", help="field holding the caption id (default '<surface>:<row>')")
    b.add_argument("--window", choices=WINDOW_MODES, default="whitespace",
                   help="whitespace: first B words; lexical: raw text cut after the B-th lex unit")
    b.add_argument("--max-caption-chars", type=positive_int, default=MAX_CAPTION_CHARS)
    b.add_argument("--max-tokens", type=positive_int, default=MAX_TOKENS,
                   help="max_tokens sent (default %(default)s, the reference's paper runs)")
    b.add_argument("--prompts", choices=PROMPT_SETS, default=PROMPT_SETS[0],
                   help="wording of the messages: the reference study's own text (default, read from the "
                        "reference folder) or capaudit's paraphrase")
    b.add_argument("--temperature", type=float, default=0.0)
    b.add_argument("--thinking", choices=["on", "off"], help="send chat_template_kwargs.enable_thinking")
    b.add_argument("--max-units", type=positive_int, help="maxItems on claimed_units (debug only)")
    b.add_argument("--parent-links", action="store_true",
                   help="units may name the object records they are about ('parents'; not in the reference "
                        "protocol): dependency-aware judging with 'judges cells --dependency on'")
    b.add_argument("--pin-caption-id", action="store_true",
                   help="pin each request's caption_id in its schema (small models; not the reference protocol)")
    b.set_defaults(func=cmd_build)

    s = sub.add_parser("summarize", help="claimed-CBU summary of response files (§4.4)")
    s.add_argument("--responses", action="append", required=True, help="response JSONL or store dir (repeatable)")
    s.add_argument("--requests", action="append", default=[],
                   help="request JSONL (repeatable; default: the requests file beside each responses file)")
    s.add_argument("--out", required=True, help="claimed_cbu_summary.json")
    s.add_argument("--bootstrap-reps", type=bootstrap_reps, default=BOOTSTRAP_REPS,
                   help="caption-level bootstrap replicates of the 95%% percentile intervals of CBU/cap, CBU/100 lex "
                        "and per-type CBU/cap, written beside --out as <name>.intervals.json (default %(default)s; "
                        "0: no intervals, the file says so)")
    s.add_argument("--bootstrap-seed", type=int, default=BOOTSTRAP_SEED, help="bootstrap seed (default %(default)s)")
    s.add_argument("--require-complete", action="store_true",
                   help="exit 4 (after writing the summary) when some requests have no response row")
    s.set_defaults(func=cmd_summarize)

    e = sub.add_parser("eval-dsg", help="evaluate the heuristic extractor on DSG-1k gold propositions")
    e.add_argument("--out", required=True, help="output folder (extractor_eval_dsg.json, rows tables/extractor_eval_dsg.json; "
                        "`capaudit paper render DIR --out DIR` renders them to extractor_eval_dsg.{csv,tex})")
    e.add_argument("--dsg", help="dsg-1k-anns.csv (default: the registry copy)")
    e.set_defaults(func=cmd_eval_dsg)

    r = sub.add_parser("run", help="run the claims stage of a params file")
    r.add_argument("--params", default="params/demo.yaml")
    r.set_defaults(func=cmd_run)

    jd = sub.add_parser("judged", help="extract the claims of the judged slices of a params file (judges.slices; "
                                       "the judges stage reads them)")
    jd.add_argument("--params", default="params/demo.yaml")
    jd.set_defaults(func=cmd_judged)

    claims.set_defaults(func=lambda args: (claims.print_help(), 2)[1])


def cmd_build(args: argparse.Namespace) -> int:
    from .requests import BuildParams, build_requests_file

    params = BuildParams(
        surface=args.surface, budget=args.budget, window=args.window, model=args.model, revision=args.revision,
        max_caption_chars=args.max_caption_chars, temperature=args.temperature, max_tokens=args.max_tokens,
        thinking=None if args.thinking is None else args.thinking == "on",
        sample_records=args.sample_records, sample_seed=args.sample_seed, max_records=args.max_records,
        max_units=args.max_units,
        pin_caption_id=args.pin_caption_id, parent_links=args.parent_links, prompts=args.prompts,
    )
    counts = build_requests_file(Path(args.input), args.caption_field, Path(args.out), params, args.id_field,
                                 args.on_missing)
    skipped = counts["rows_missing_caption_field"] + counts["rows_empty_caption"]
    print(f"capaudit claims build: {counts['emitted']} requests ({counts['usable']} usable captions of "
          f"{counts['rows']} rows; {skipped} skipped: {counts['rows_missing_caption_field']} without the caption "
          f"field, {counts['rows_empty_caption']} empty or null) -> {args.out}", file=sys.stderr)
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from .summarize import summarize_to_files

    summary, intervals, ipath = summarize_to_files(args.responses, args.out, args.requests or None,
                                                   bootstrap_reps=args.bootstrap_reps, bootstrap_seed=args.bootstrap_seed)
    s = summary.surface("__all__")
    inp = summary.input if isinstance(summary.input, dict) else {}
    unanswered = inp.get("unanswered_requests")
    todo = ""
    if unanswered:
        todo = (f"; {unanswered} of {inp.get('requests_total')} requests have no response row yet (the store is "
                f"unfinished: run `capaudit llm run ... --resume` to complete it)")
    print(f"capaudit claims summarize: {summary.status.captions} captions ({summary.status.bad} failed){todo}, "
          f"CBU/cap {s.cbu_per_cap:.4f}, CBU/100 lex {s.cbu_per_100_lex:.4f} -> {args.out}", file=sys.stderr)
    if intervals.off:
        print(f"capaudit claims summarize: no intervals (--bootstrap-reps 0) -> {ipath}", file=sys.stderr)
    else:
        skipped = f"; {len(intervals.skipped)} surfaces without captions skipped" if intervals.skipped else ""
        print(f"capaudit claims summarize: 95% caption-bootstrap intervals ({intervals.reps} reps, seed "
              f"{intervals.seed}) for {len(intervals.surfaces)} surfaces{skipped} -> {ipath}", file=sys.stderr)
    if unanswered and args.require_complete:
        return 4
    return 0


def cmd_eval_dsg(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import check_output_dir

    from .dsg_eval import run_dsg_eval

    out = check_output_dir(args.out)
    result, paths = run_dsg_eval(out, out, Path(args.dsg) if args.dsg else None)
    overall = result.rows()[-1]
    shown = {k: "n/a" if overall[k] is None else f"{overall[k]:.3f}" for k in ("precision", "recall", "f1")}
    print(f"capaudit claims eval-dsg: {result.extractor}: P {shown['precision']} R {shown['recall']} "
          f"F1 {shown['f1']} -> {paths['rows']} (render the table: capaudit paper render {out} --out {out})",
          file=sys.stderr)
    return 0


def cmd_judged(args: argparse.Namespace) -> int:
    from capaudit.io.params import load_params

    from .judged import run_judged

    import json

    for name, stats in run_judged(load_params(args.params)).items():
        print(f"capaudit claims judged: {name}: {json.dumps(stats, sort_keys=True)}", file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from capaudit.io.params import load_params

    from .stage import run

    out = run(load_params(args.params))
    print(out.table.to_string(index=False))
    return 0

