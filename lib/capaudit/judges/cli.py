"""``capaudit judges build|summarize|cells|run|probe`` (reference-spec §5.1–5.4).

    capaudit judges build --claims-responses CR.jsonl --claims-requests CQ.jsonl --input CAPTIONS.jsonl \
        --id-field ID --image-field IMAGE --model NAME [--revision R] --image-mode file|data|url --out VQA_REQ.jsonl
    capaudit judges summarize --responses VQA_RESP.jsonl --requests VQA_REQ.jsonl --out judge_summary.json
    capaudit judges cells --slice NAME --judge J1=RESP1.jsonl --judge J2=RESP2.jsonl [--judge J3=RESP3.jsonl ...] \
        --requests REQ1.jsonl --requests REQ2.jsonl [--requests REQ3.jsonl ...] --out cells.json \
        [--claims-responses CR.jsonl --claims-requests CQ.jsonl] [--judged-claims judged_claims.jsonl]
    capaudit judges run [--params params/demo.yaml]
    capaudit judges probe [--params params/demo.yaml]

``cells`` takes two or more ``--judge``: ``judge_agreement`` is the reference study's exact agreement
of the first two; ``judges_agreement`` covers all of them (Fleiss' κ, Gwet's AC1, Krippendorff's α,
per-pair exact agreement and Cohen's κ, per question category and ``__all__``; see
:mod:`capaudit.judges.cells`), and the closing line prints ``agreement: κ=…, AC1=…, α=…`` for
``__all__``.

``CAPTIONS.jsonl`` is the file given to ``claims build`` (``--id-field`` names the caption id there
too). Answers are sent with ``capaudit llm run`` (unchanged). Bad input is an error naming file,
line and field; captions without a usable image become counted failure rows
(``<out>.failures.jsonl``); responses that fail or whose ids do not match their questions are
counted as ``bad`` and listed (file, line, request) in the summaries.

No command prints a number from missing data: numeric options are checked by argparse (one line
naming the option); an output path that is a folder or lies under a file is refused before any
work; a missing or empty response store, or a cut last line, is refused naming file and line
(``summarize`` and ``build`` instead count the cut lines of a store still being written, out
loud); ``cells`` refuses when no caption is answered by every judge, or a surface has none.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, List, Tuple

from capaudit.argtypes import nonnegative_float, nonnegative_int, positive_int
from capaudit.errors import InputError

#: bootstrap replicates: a sample std needs at least two
MIN_REPS = 2


def reps_count(text: str) -> int:
    """``--reps``: an integer >= :data:`MIN_REPS`."""
    value = positive_int(text)
    if value < MIN_REPS:
        raise argparse.ArgumentTypeError(f"expected an integer >= {MIN_REPS} (a bootstrap std needs two replicates), "
                                         f"got {value}")
    return value


def register(subparsers: Any) -> None:
    """Add ``judges`` and its subcommands to the ``capaudit`` command."""
    from .requests import IMAGE_MODES

    j = subparsers.add_parser("judges", help="image-conditioned judging: requests, summaries, cells, offline demo")
    sub = j.add_subparsers(dest="judges_command", metavar="JUDGES_COMMAND")

    b = sub.add_parser("build", help="judge requests from claim responses, captions and images (§5.1-5.2)")
    b.add_argument("--claims-responses", action="append", required=True, help="claim responses (repeatable)")
    b.add_argument("--claims-requests", action="append", required=True, help="claim requests (repeatable)")
    b.add_argument("--input", required=True, help="the caption JSONL given to 'claims build'")
    b.add_argument("--id-field", required=True, help="caption id field of --input (as for 'claims build')")
    b.add_argument("--image-field", required=True, help="field of --input holding the image path or URL")
    b.add_argument("--model", required=True, help="judge model name (hashed into request ids)")
    b.add_argument("--revision", help="judge model revision (hashed into request ids)")
    b.add_argument("--image-mode", choices=IMAGE_MODES, default="file")
    b.add_argument("--max-tokens", type=positive_int, default=2048)
    b.add_argument("--temperature", type=nonnegative_float, default=0.0)
    b.add_argument("--evidence", action="store_true", help="ask for a short evidence string per answer")
    b.add_argument("--thinking", choices=["on", "off", "omit"], default="off",
                   help="chat_template_kwargs.enable_thinking (reference: off)")
    b.add_argument("--out", required=True, help="judge request JSONL (+ .manifest.json, .failures.jsonl)")
    b.set_defaults(func=cmd_build)

    s = sub.add_parser("summarize", help="per-judge summary (§5.3)")
    s.add_argument("--responses", action="append", required=True, help="response JSONL or store dir (repeatable)")
    s.add_argument("--requests", action="append", required=True, help="judge request JSONL (repeatable)")
    s.add_argument("--judge", help="judge name recorded in the summary")
    s.add_argument("--out", required=True, help="judge_summary.json")
    s.set_defaults(func=cmd_summarize)

    c = sub.add_parser("cells", help="all-judges cells, bootstrap, agreement, extraction (§5.4)")
    c.add_argument("--slice", required=True, help="slice name")
    c.add_argument("--judge", action="append", required=True, metavar="NAME=RESPONSES",
                   help="judge name and its responses (repeatable; RESPONSES may be comma-separated)")
    c.add_argument("--requests", action="append", required=True, help="judge request JSONL of any judge (repeatable)")
    c.add_argument("--claims-responses", action="append", default=[], help="claim responses (extraction accounting)")
    c.add_argument("--claims-requests", action="append", default=[], help="claim requests (extraction accounting)")
    c.add_argument("--surface", action="append", default=[], help="surface order of the cells (default: request order)")
    c.add_argument("--reps", type=reps_count, default=2000, help="bootstrap replicates (default 2000, at least 2)")
    c.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (default 0, fresh per cell)")
    c.add_argument("--judged-claims", help="also write the judged-claims table here (needs --claims-requests)")
    c.add_argument("--offline-judge", action="append", default=[], metavar="NAME",
                   help="judge names to mark 'offline' in the judged-claims table (default: capaudit-offline-*)")
    c.add_argument("--out", required=True, help="cells.json")
    c.set_defaults(func=cmd_cells)

    r = sub.add_parser("run", help="run the judges stage of a params file")
    r.add_argument("--params", default="params/demo.yaml")
    r.set_defaults(func=cmd_run)

    p = sub.add_parser("probe", help="run the yes-bias probe of a params file (after 'judges run')")
    p.add_argument("--params", default="params/demo.yaml")
    p.set_defaults(func=cmd_probe)

    j.set_defaults(func=lambda args: (j.print_help(), 2)[1])


def _thinking(value: str) -> Any:
    return None if value == "omit" else value == "on"


def check_outputs(*paths: Any) -> None:
    """Refuse, before any work, an output path that is a folder or lies under a file."""
    from capaudit.io.atomic import check_output_path

    for p in paths:
        if p:
            check_output_path(p)


def cmd_build(args: argparse.Namespace) -> int:
    from .requests import JudgeBuildParams, build_judge_requests, failures_path, manifest_path

    check_outputs(args.out, failures_path(args.out), manifest_path(args.out))
    params = JudgeBuildParams(model=args.model, revision=args.revision, image_mode=args.image_mode,
                              max_tokens=args.max_tokens, temperature=args.temperature, evidence=args.evidence,
                              thinking=_thinking(args.thinking))
    counts = build_judge_requests(args.claims_responses, args.claims_requests, args.input, args.id_field,
                                  args.image_field, params, args.out)
    cut = (f"; {counts.claims_cut_lines} cut last line(s) of claims stores still being written not counted"
           if counts.claims_cut_lines else "")
    print(f"capaudit judges build: {counts.requests} requests, {counts.questions} questions -> {args.out}; "
          f"{counts.claims_requests} claim requests ({counts.claims_not_answered} not answered, "
          f"{counts.claims_failed} failed, {counts.claims_zero_units} with no unit); "
          f"{counts.failures} image failures (no_image {counts.no_image}, missing {counts.image_missing}, "
          f"unreadable {counts.image_unreadable}){cut}", file=sys.stderr)
    return 0


def cmd_summarize(args: argparse.Namespace) -> int:
    from .summarize import summarize_files

    s = summarize_files(args.responses, args.requests, args.out, judge=args.judge)
    label = s.input if isinstance(s.input, dict) else {}
    cut = label.get("cut_last_lines") or []
    degraded = label.get("degraded") or []
    notes = ""
    if cut:
        where = ", ".join(f"{c['file']}:{c['line']}" for c in cut[:3])
        notes += f"; IN PROGRESS: {len(cut)} cut last line(s) of stores still being written not counted ({where})"
    if degraded:
        notes += (f"; DEGRADED: {label.get('degraded_responses')} response(s) answered with less "
                  f"({'; '.join(d['note'] for d in degraded)})")
    print(f"capaudit judges summarize: {s.responses} responses ({s.ok} ok, {s.bad} bad) over "
          f"{len(s.surfaces)} surface(s) -> {args.out}{notes}", file=sys.stderr)
    return 0


def parse_judge_specs(specs: List[str]) -> List[Tuple[str, List[str]]]:
    """``NAME=RESP[,RESP...]`` → ``[(name, [paths])]``."""
    out = []
    for spec in specs:
        name, sep, paths = spec.partition("=")
        if not sep or not name.strip() or not paths.strip():
            raise InputError(f"--judge {spec!r}: expected NAME=RESPONSES", field="--judge")
        out.append((name.strip(), [p for p in paths.split(",") if p]))
    return out


def cmd_cells(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import write_text_atomic
    from capaudit.summaries.cells import format_cells

    from .cells import cells_from_answers, check_cells_have_data, extraction_accounting, load_slice
    from .judged_claims import judged_claim_rows, write_judged_claims

    judges = parse_judge_specs(args.judge)
    check_outputs(args.out, args.judged_claims)
    if bool(args.claims_responses) != bool(args.claims_requests):
        raise InputError("give both --claims-responses and --claims-requests (extraction accounting) or neither")
    if args.judged_claims and not args.claims_requests:
        raise InputError("--judged-claims needs --claims-requests (the caption windows)")
    extraction = (extraction_accounting(args.claims_responses, args.claims_requests)
                  if args.claims_responses else None)
    index, answers = load_slice(judges, args.requests)
    names = [n for n, _ in judges]
    cells, report = cells_from_answers(args.slice, names, index, answers, args.reps, args.seed, extraction,
                                       args.surface or None)
    check_cells_have_data(report, names, [c.surface for c in cells.cells if c.judge == names[0]],
                          [p for _, paths in judges for p in paths])
    write_text_atomic(args.out, format_cells(cells))
    if args.judged_claims:
        offline = set(args.offline_judge) or {n for n in names if n.startswith("capaudit-offline-")}
        n = write_judged_claims(args.judged_claims, judged_claim_rows(
            args.slice, names, index, answers, args.requests, args.claims_requests,
            {n: ("offline" if n in offline else "model") for n in names}))
        print(f"capaudit judges cells: {n} judged claims -> {args.judged_claims}", file=sys.stderr)
    inter = report.pop("__intersection__")
    agreement = ""
    multi = cells.judges_agreement.get(args.slice)
    if multi is not None:
        agreement = "; agreement: " + _agreement_line(multi)
    degraded = "; ".join(f"{n}: {a.degraded_responses} response(s) answered with less ({'; '.join(a.degraded)})"
                         for n, a in zip(names, answers) if a.degraded_responses)
    print(f"capaudit judges cells: slice {args.slice}: {inter['captions']} captions answered by all "
          f"{len(names)} judge(s); " + json.dumps({k: {x: v[x] for x in ('responses', 'answered', 'failed')}
                                                    for k, v in report.items()}) + f" -> {args.out}" + agreement
          + (f"; DEGRADED: {degraded}" if degraded else ""), file=sys.stderr)
    return 0


def _agreement_line(multi: Any) -> str:
    """``κ=…, AC1=…, α=…`` of all judges (``__all__``: Fleiss' κ, Gwet's AC1, Krippendorff's α)."""
    total = multi.by_type.get("__all__")
    if total is None:
        return "no question answered by every judge"

    def f(x: Any) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    return (f"κ={f(total.fleiss_kappa)}, AC1={f(total.gwet_ac1)}, α={f(total.krippendorff_alpha)} "
            f"({len(multi.judges)} judges, {total.questions} questions)")


def load_params(path: str) -> Any:
    """The params file, its text checked first (a byte that is not UTF-8: file and line named)."""
    from capaudit.config import load_config
    from capaudit.io.text import read_text_checked

    read_text_checked(path)
    return load_config(path)


def cmd_run(args: argparse.Namespace) -> int:
    from .stage import run

    out = run(load_params(args.params))
    print(out["table"].to_string(index=False))
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from .probe import run

    out = run(load_params(args.params))
    print(out["table"].to_string(index=False))
    return 0
