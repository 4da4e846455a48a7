"""``capaudit judges build|summarize|cells|run|probe`` (reference-spec §5.1–5.4).

    capaudit judges build --claims-responses CR.jsonl --claims-requests CQ.jsonl --input CAPTIONS.jsonl \
        --id-field ID --image-field IMAGE --model NAME [--revision R] --image-mode file|data|url --out VQA_REQ.jsonl
    capaudit judges summarize --responses VQA_RESP.jsonl --requests VQA_REQ.jsonl --out judge_summary.json
    capaudit judges cells --slice NAME --judge J1=RESP1.jsonl --judge J2=RESP2.jsonl [--judge J3=RESP3.jsonl ...] \
        --requests REQ1.jsonl --requests REQ2.jsonl [--requests REQ3.jsonl ...] --out cells.json \
        [--claims-responses CR.jsonl --claims-requests CQ.jsonl] [--judged-claims judged_claims.jsonl]
    capaudit judges import --format dsg|tifa --answers ANSWERS [--questions DSG_ANNS.csv] [--group NAME] \
        --judge NAME --out DIR
    capaudit judges item-scores --store DIR --dependency on|off [--dsg-script-quirks] --out SCORES.jsonl
    capaudit judges correlate --store DIR --human LIKERT.csv|human_annotations.json --dependency on|off \
        --missing zero|skip [--dsg-script-quirks] [--reps N] [--seed S] --out CORR.json
    capaudit judges calibrate --store DIR --human LIKERT --dependency on|off --labelled N --seed S --out CAL.json
    capaudit judges run [--params params/demo.yaml]
    capaudit judges probe [--params params/demo.yaml]

``cells`` takes two or more ``--judge``: ``judge_agreement`` is the reference study's exact agreement
of the first two; ``judges_agreement`` covers all of them (Fleiss' κ, Gwet's AC1, Krippendorff's α,
per-pair exact agreement and Cohen's κ, per question category and ``__all__``; see
:mod:`capaudit.judges.cells`), and the closing line prints ``agreement: κ=…, AC1=…, α=…`` for
``__all__``.

``import`` turns a published VQA answer release into a store folder (:mod:`.releases`);
``item-scores`` scores each image (:mod:`.item_scores`), ``correlate`` against human ratings
(:mod:`.correlate`), ``calibrate`` corrects the judge's estimate with a random subset of human
ratings (:mod:`.calibrate`). ``--dependency on`` scores a question whose parent was not answered
yes as 0 (:mod:`.dependency`); ``--dsg-script-quirks`` reproduces DSG's released scripts where
they differ from the stated rule.

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
from pathlib import Path
from typing import Any, List, Tuple

from capaudit.argtypes import nonnegative_float, nonnegative_int, number_in, positive_int
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
    b.add_argument("--image-failures", choices=("refuse", "record"), default="refuse",
                   help="a claimed caption whose image is absent, missing or unreadable: refuse the build, naming "
                        "its row (default), or record it in <out>.failures.jsonl and count it")
    b.add_argument("--max-tokens", type=positive_int, default=2048)
    b.add_argument("--temperature", type=nonnegative_float, default=0.0)
    b.add_argument("--evidence", action="store_true", help="ask for a short evidence string per answer")
    b.add_argument("--prompts", choices=("reference", "capaudit"), default="reference",
                   help="wording of the messages: the reference study's own text (default, read from the "
                        "reference folder) or capaudit's paraphrase")
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
                   help="judge names to mark 'offline' in the judged-claims table (default: the judges whose "
                        "recorded model cards are not a real model, or who have none)")
    add_dependency_options(c, default="off")
    c.add_argument("--out", required=True, help="cells.json")
    c.set_defaults(func=cmd_cells)

    i = sub.add_parser("import", help="a published VQA answer release (DSG, TIFA) -> judge store folder")
    i.add_argument("--format", required=True, choices=["dsg", "tifa"])
    i.add_argument("--answers", required=True, help="DSG answers CSV or TIFA evaluation-result JSON")
    i.add_argument("--questions", help="DSG questions file (dsg-1k-anns.csv): categories and dependencies")
    i.add_argument("--group", default="tifa", help="text-to-image model of a TIFA result file (default: tifa)")
    i.add_argument("--judge", required=True, help="the VQA model that answered")
    i.add_argument("--out", required=True, help="store folder (requests.jsonl, responses.jsonl, import.json)")
    i.set_defaults(func=cmd_import)

    sc = sub.add_parser("item-scores", help="per-image score of a judge store (share of questions answered yes)")
    sc.add_argument("--store", required=True, help="store folder ('judges import')")
    add_dependency_options(sc)
    sc.add_argument("--out", required=True, help="SCORES.jsonl")
    sc.set_defaults(func=cmd_item_scores)

    co = sub.add_parser("correlate", help="item scores against human ratings: Spearman, Kendall, p, bootstrap")
    add_store_human_options(co)
    co.add_argument("--missing", required=True, choices=["zero", "skip"],
                    help="a rated image without an answer: score 0 (DSG's scripts) or leave it out")
    co.add_argument("--reps", type=reps_count, default=2000, help="bootstrap resamples (default 2000)")
    co.add_argument("--seed", type=nonnegative_int, default=0, help="bootstrap seed (default 0)")
    co.add_argument("--group-intervals", action="store_true",
                    help="bootstrap intervals per group (text-to-image model) too, not only pooled")
    co.add_argument("--out", required=True, help="CORR.json")
    co.set_defaults(func=cmd_correlate)

    ca = sub.add_parser("calibrate", help="judge scores on every image + human ratings on a random few (PPI++)")
    add_store_human_options(ca)
    ca.add_argument("--labelled", required=True, type=positive_int,
                    help="images per group whose human ratings the estimate may use (drawn at random)")
    ca.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the labelled draw (default 0)")
    ca.add_argument("--level", type=number_in(0, 1, lo_open=True, hi_open=True), default=0.95,
                    help="interval level (default 0.95)")
    ca.add_argument("--out", required=True, help="CAL.json")
    ca.set_defaults(func=cmd_calibrate)

    r = sub.add_parser("run", help="run the judges stage of a params file (the claims stage's step for its judged "
                                  "slices first)")
    r.add_argument("--params", default="params/demo.yaml")
    r.add_argument("--judge", action="append", default=None, metavar="NAME",
                   help="ask only this judge (repeatable; one model's server at a time): the others' stores are "
                        "read as they are; cells and tables once every judge has answered")
    r.set_defaults(func=cmd_run)

    p = sub.add_parser("probe", help="run the yes-bias probe of a params file (after 'judges run')")
    p.add_argument("--params", default="params/demo.yaml")
    p.set_defaults(func=cmd_probe)

    j.set_defaults(func=lambda args: (j.print_help(), 2)[1])


def add_dependency_options(p: argparse.ArgumentParser, default: Any = None) -> None:
    """``--dependency on|off`` (required unless ``default``) and ``--dsg-script-quirks``."""
    p.add_argument("--dependency", choices=["on", "off"], required=default is None, default=default,
                   help="on: a question whose parent was not answered yes scores 0 (DSG)"
                        + (f"; default {default} (the reference study's protocol)" if default else ""))
    p.add_argument("--dsg-script-quirks", action="store_true",
                   help="as DSG's released scripts: an image with an unparsable dependency cell loses all "
                        "its dependencies")


def add_store_human_options(p: argparse.ArgumentParser) -> None:
    """``--store``, ``--human`` and the dependency options of ``correlate`` and ``calibrate``."""
    p.add_argument("--store", required=True, help="store folder ('judges import')")
    p.add_argument("--human", required=True, help="ratings: CSV (t2i_model, item_id, answer) or TIFA JSON")
    add_dependency_options(p)


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
                              thinking=_thinking(args.thinking), prompts=args.prompts)
    counts = build_judge_requests(args.claims_responses, args.claims_requests, args.input, args.id_field,
                                  args.image_field, params, args.out, image_failures=args.image_failures)
    cut = (f"; {counts.claims_cut_lines} cut last line(s) of claims stores still being written not counted"
           if counts.claims_cut_lines else "")
    print(f"capaudit judges build: {counts.requests} requests, {counts.questions} questions -> {args.out}; "
          f"{counts.claims_requests} claim requests ({counts.claims_not_answered} not answered, "
          f"{counts.claims_failed} failed, {counts.claims_zero_units} with no unit); "
          f"{counts.failures} image failures (no_image {counts.no_image}, missing {counts.image_missing}, "
          f"unreadable {counts.image_unreadable}"
          + (f", listed in {failures_path(args.out)}" if counts.failures else "") + f"){cut}", file=sys.stderr)
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
    given = answers  # the judged-claims table keeps the judges' own answers
    if args.dependency == "on":
        from .dependency import load_parents, with_dependency

        parents = load_parents(args.requests)
        answers = [with_dependency(index, a, parents, args.dsg_script_quirks)[0] for a in answers]
    elif args.dsg_script_quirks:
        raise InputError("--dsg-script-quirks changes dependency scoring only; use it with --dependency on",
                         field="--dsg-script-quirks")
    names = [n for n, _ in judges]
    cells, report = cells_from_answers(args.slice, names, index, answers, args.reps, args.seed, extraction,
                                       args.surface or None)
    check_cells_have_data(report, names, [c.surface for c in cells.cells if c.judge == names[0]],
                          [p for _, paths in judges for p in paths])
    write_text_atomic(args.out, format_cells(cells))
    if args.judged_claims:
        from .answerers import recorded_cards
        from capaudit.llm.cards import any_stand_in

        cards = {n: recorded_cards([Path(p) for p in paths]) for n, paths in judges}
        unrecorded = sorted(n for n, c in cards.items() if not c)
        if unrecorded and not args.offline_judge:  # who answered is unknown: not called a model
            print(f"capaudit judges cells: warning: no model card recorded for {', '.join(unrecorded)} (stores "
                  "written before cards, or by hand): marked offline; --offline-judge names them", file=sys.stderr)
        offline = set(args.offline_judge) or {n for n, c in cards.items() if not c or any_stand_in(c)}
        n = write_judged_claims(args.judged_claims, judged_claim_rows(
            args.slice, names, index, given, args.requests, args.claims_requests,
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


def cmd_import(args: argparse.Namespace) -> int:
    from .releases import import_release

    res = import_release(args.format, args.answers, args.judge, args.out, questions=args.questions, group=args.group)
    m = res.manifest
    odd = ", ".join(f"{_short(x['raw_answer'])} x{x['count']}" for x in m["not_yes_no_uncertain"][:8])
    more = len(m["not_yes_no_uncertain"]) - 8
    status = m["answer_status"]
    print(f"capaudit judges import: {m['images']} images ({m['answered_images']} answered, "
          f"{len(m['missing_images'])} without any answer), {m['questions']} questions; answers "
          + ", ".join(f"{k} {v}" for k, v in m["answers"].items())
          + f"; not yes/no/uncertain (kept as uncertain, raw value kept): empty {status.get('empty', 0)}, "
          f"unrecognised {status.get('unrecognised', 0)}, missing {status.get('missing', 0)}"
          + (f" [{odd}{f', +{more} more' if more > 0 else ''}]" if odd else "")
          + (f"; reader: {json.dumps(m['reader'])}" if m["reader"] else "") + f" -> {res.out}", file=sys.stderr)
    return 0


def _short(text: Any, width: int = 24) -> str:
    t = repr(text)
    return t if len(t) <= width else t[:width - 4] + "...'"


def _scores(args: argparse.Namespace) -> Any:
    from .item_scores import item_scores
    from .releases import store_paths

    rq, rs = store_paths(args.store)
    return item_scores([rq], [rs], dependency=args.dependency == "on", dsg_script_quirks=args.dsg_script_quirks)


def cmd_item_scores(args: argparse.Namespace) -> int:
    from .item_scores import write_item_scores

    check_outputs(args.out)
    s = _scores(args)
    n = write_item_scores(args.out, s)
    unanswered = sum(1 for r in s.rows if not r.answered)
    print(f"capaudit judges item-scores: {n} images ({unanswered} without an answer: score null), dependency "
          f"{args.dependency} ({s.dependency.zeroed} questions zeroed, {s.dependency.unknown_parents} unknown "
          f"parents{f', {s.dependency.images_without_dependencies} images without dependencies (DSG script quirk)' if args.dsg_script_quirks else ''})"
          f" -> {args.out}", file=sys.stderr)
    return 0


def _human_and_scores(args: argparse.Namespace) -> Tuple[Any, Any]:
    """``correlate``/``calibrate``: the output path checked, then the ratings, then the item scores."""
    from .correlate import read_human_ratings

    check_outputs(args.out)
    return read_human_ratings(args.human), _scores(args)


def cmd_correlate(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import write_json_atomic

    from .correlate import correlate

    human, s = _human_and_scores(args)
    out = correlate(s.rows, human, missing=args.missing, reps=args.reps, seed=args.seed,
                    group_intervals=args.group_intervals)
    out["dependency"] = {"on": args.dependency == "on", "dsg_script_quirks": args.dsg_script_quirks,
                         "zeroed": s.dependency.zeroed}
    write_json_atomic(args.out, out)
    def fmt(v: Any, spec: str = ".3f") -> str:
        return "null" if v is None else format(v, spec)

    print(f"capaudit judges correlate: n {out['n']} (missing {out['missing']['count']}, {args.missing}); "
          f"Spearman {fmt(out['spearman'])} (p {fmt(out['spearman_p'], '.3g')}), Kendall {fmt(out['kendall'])} "
          f"(p {fmt(out['kendall_p'], '.3g')}) -> {args.out}", file=sys.stderr)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import write_json_atomic

    from .calibrate import calibrate

    human, s = _human_and_scores(args)
    out = calibrate(s.rows, human, labelled=args.labelled, seed=args.seed, level=args.level)
    out["dependency"] = {"on": args.dependency == "on", "dsg_script_quirks": args.dsg_script_quirks}
    write_json_atomic(args.out, out)
    parts = [f"{g}: PPI {v['ppi']['estimate']:.3f} [{v['ppi']['lo']:.3f}, {v['ppi']['hi']:.3f}] vs human only "
             f"[{v['human_only']['lo']:.3f}, {v['human_only']['hi']:.3f}]" for g, v in out["groups"].items()]
    unanswered = sum(v["unanswered"] for v in out["groups"].values())
    print(f"capaudit judges calibrate: {args.labelled} labelled image(s) per group, level {args.level:g}"
          + (f", {unanswered} rated image(s) without an answer (judge score 0)" if unanswered else "")
          + "; " + "; ".join(parts) + f" -> {args.out}", file=sys.stderr)
    return 0


def load_params(path: str) -> Any:
    """The params file, its text checked first (a byte that is not UTF-8: file and line named)."""
    from capaudit.config import load_config
    from capaudit.io.text import read_text_checked

    read_text_checked(path)
    return load_config(path)


def cmd_run(args: argparse.Namespace) -> int:
    from capaudit.claims.judged import run_judged

    from .params import JudgesParams
    from .stage import run

    cfg = load_params(args.params)
    JudgesParams.from_config(cfg).check_only(args.judge, cfg.path)  # refused before anything is asked
    run_judged(cfg, only_unasked=args.judge is not None)  # the claims stage's step: the judged slices' claims
    out = run(cfg, only=args.judge)
    if out.get("pending"):
        left = sorted({j for per in out["pending"].values() for j in per})
        counts = "; ".join(f"{sl}: " + ", ".join(f"{j} {n}" for j, n in sorted(per.items()))
                           for sl, per in sorted(out["pending"].items()))
        print(f"capaudit judges run: asked {', '.join(args.judge)}; no cells yet: requests never asked ({counts}); "
              f"run " + " and ".join(f"'judges run --judge {j}'" for j in left) + " (its server up), "
              "then the cells and tables are written", file=sys.stderr)
        return 0
    print(out.table.to_string(index=False))
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from .probe import run

    out = run(load_params(args.params))
    print(out.table.to_string(index=False))
    return 0
