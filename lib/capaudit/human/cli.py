"""``capaudit human …`` (reference-spec §7). Every lifecycle command prints where the study database lives.

    capaudit human init      (--db STUDY.sqlite and/or --params P.yaml) [--study-id ID] [--mode real|simulated] [--config C.yaml]
    capaudit human sample    (--db and/or --params) [--judged-claims judged_claims.jsonl ...]
    capaudit human seal      (--db and/or --params) [--ethics-id ID --participant-info FILE]
    capaudit human materialize (--db and/or --params) [--max-side PX]
    capaudit human validate  (--db and/or --params)
    capaudit human participant-test (--db and/or --params) [--host 127.0.0.1] [--port 8866] [--no-serve | --dry-run]
    capaudit human invite    (--db and/or --params) --count N [--out invites.csv] [--kind human] [--role annotator]
    capaudit human assign    (--db and/or --params) [--extend PSEUDONYM ...] [--extend-all]
    capaudit human open      (--db and/or --params)
    capaudit human close     (--db and/or --params)
    capaudit human status    (--db and/or --params) [--json]
    capaudit human export    (--db and/or --params) --out DIR [--include-public-rows] [--n-resamples N]
    capaudit human backup    (--db and/or --params) [--out FILE]
    capaudit human adjudicate (--db and/or --params) --list [--out CSV] | --item ID --field F --value V --adjudicator PSEUDONYM
    capaudit human withdraw  (--db and/or --params) --pseudonym P001
    capaudit human serve     (--db and/or --params) [--host 127.0.0.1] [--port 8866] [--dashboard] [--allow-unsealed]
    capaudit human demo      [--params params/demo.yaml]
    capaudit human agreement --labels LABELS.csv --out AGREEMENT.json

``--db`` (alias ``--study``) names the study database; ``--params`` supplies the settings (``human:`` section, judged claims)
and, without ``--db``, the database location too.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from capaudit.argtypes import positive_int
from capaudit.errors import EmptyInputError, InputError
from capaudit.io.atomic import check_output_path


def _port(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number 1-65535, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 1-65535, got {value}")
    return value


def _db_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", "--study", dest="db", help="study database (SQLite), or its folder (<stem>_files/, or a "
                                                      "folder holding one .sqlite); with --params, this one is used")
    p.add_argument("--params", help="params file with a 'human' section (its settings; its db, or "
                                    "<artifacts>/human/<study_id>.sqlite, unless --db is given)")


def _db_path(args: argparse.Namespace) -> Path:
    if getattr(args, "db", None):
        from .study import resolve_study_db

        return resolve_study_db(args.db)
    if getattr(args, "params", None):
        from capaudit.io.params import load_params as load_config

        from .stage import study_db_path

        return study_db_path(load_config(args.params))
    env = os.environ.get("CAPAUDIT_STUDY")
    if env:
        return Path(env)
    raise InputError("give the study database with --db STUDY.sqlite or --params PARAMS.yaml")


def _say(args: argparse.Namespace, db: Path, msg: str = "") -> None:
    print(f"capaudit human {args.human_command}: study database: {db.resolve()}", file=sys.stderr)
    if msg:
        print(f"capaudit human {args.human_command}: {msg}", file=sys.stderr)


def _open(args: argparse.Namespace):
    from .study import Study

    db = _db_path(args)
    return db, Study.load(db)


def register(subparsers: Any) -> None:
    """Add ``human`` and its subcommands to the ``capaudit`` command."""
    human = subparsers.add_parser("human", help="human verification: study lifecycle, annotation UI, agreement")
    sub = human.add_subparsers(dest="human_command", metavar="HUMAN_COMMAND")

    p = sub.add_parser("init", help="create a study database (config frozen into it)")
    _db_args(p)
    p.add_argument("--config", help="YAML mapping of study settings (else the params file's 'human' section)")
    p.add_argument("--study-id", help="study id (overrides the config)")
    p.add_argument("--mode", choices=["real", "simulated"], help="real (default) or simulated (tests/demo)")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("sample", help="sample items from judged claims (refused once sealed)")
    _db_args(p)
    p.add_argument("--judged-claims", action="append", default=[],
                   help="judged_claims.jsonl (repeatable; default: the params file's human.judged_claims)")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("seal", help="freeze the sampled items; with --ethics-id and --participant-info: the "
                                    "launch seal (refused unless the study validates)")
    _db_args(p)
    p.add_argument("--ethics-id", help="ethics-determination id recorded in the launch seal")
    p.add_argument("--participant-info", help="participant information file, copied into the study with its sha256")
    p.set_defaults(func=cmd_seal)

    p = sub.add_parser("materialize", help="copy the study's images into its folder (content-addressed; resumable)")
    _db_args(p)
    p.add_argument("--max-side", type=positive_int, default=None, help="largest side in pixels (default 1024)")
    p.set_defaults(func=cmd_materialize)

    p = sub.add_parser("validate", help="pre-launch validation: images, claims as shown, assignments, design counts")
    _db_args(p)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("participant-test", help="rehearse the annotation flow as a test participant (answers are "
                                                "stored apart, in a rehearsal copy, and never count)")
    _db_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=8866)
    p.add_argument("--no-serve", action="store_true", help="build the rehearsal copy and print its invite code only")
    p.add_argument("--dry-run", action="store_true", help="build it, prepare the notebook and print the voila command")
    p.set_defaults(func=cmd_participant_test)

    for name, fn, helptext in (("open", "cmd_open", "accept annotations"),
                               ("close", "cmd_close", "stop accepting annotations")):
        p = sub.add_parser(name, help=helptext)
        _db_args(p)
        p.set_defaults(func=globals()[fn])

    p = sub.add_parser("invite", help="add pseudonymous participants; prints or writes their invite codes once")
    _db_args(p)
    p.add_argument("--count", type=positive_int, required=True, help="participants to add")
    p.add_argument("--out", help="CSV (pseudonym,invite_code) written with mode 0600; default: stdout")
    p.add_argument("--kind", choices=["human", "simulated"], default="human")
    p.add_argument("--role", choices=["annotator", "adjudicator"], default="annotator")
    p.set_defaults(func=cmd_invite)

    p = sub.add_parser("assign", help="assign items to annotators (two labels per item, overlap first)")
    _db_args(p)
    p.add_argument("--extend", action="append", default=[], metavar="PSEUDONYM",
                   help="raise this annotator's cap by one extension batch (repeatable)")
    p.add_argument("--extend-all", action="store_true")
    p.set_defaults(func=cmd_assign)

    p = sub.add_parser("status", help="progress, disagreements and readiness thresholds")
    _db_args(p)
    p.add_argument("--json", action="store_true", help="print the full status as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("export", help="aggregate export (+ judge-human agreement; public rows on request)")
    _db_args(p)
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--include-public-rows", action="store_true",
                   help="also write hashed-id, allow-listed per-judgment rows")
    p.add_argument("--n-resamples", type=positive_int, help="bootstrap resamples (default: the study's, 10,000)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("backup", help="consistent copy of the study database")
    _db_args(p)
    p.add_argument("--out", help="backup file (default: <db>.backup-<UTC time>.sqlite)")
    p.set_defaults(func=cmd_backup)

    p = sub.add_parser("adjudicate", help="list disagreements or record an adjudicated value")
    _db_args(p)
    p.add_argument("--list", action="store_true", help="list open disagreements (no surfaces, no judge answers)")
    p.add_argument("--out", help="with --list: write a CSV packet instead of printing")
    p.add_argument("--item")
    p.add_argument("--field")
    p.add_argument("--value")
    p.add_argument("--adjudicator", help="the adjudicator's pseudonym")
    p.set_defaults(func=cmd_adjudicate)

    p = sub.add_parser("withdraw", help="withdraw a participant (their judgments stay)")
    _db_args(p)
    p.add_argument("--pseudonym", required=True)
    p.set_defaults(func=cmd_withdraw)

    p = sub.add_parser("serve", help="serve the annotation notebook (or the study dashboard) with voila on 127.0.0.1")
    _db_args(p)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=8866)
    p.add_argument("--dashboard", action="store_true", help="serve the study lead's read-only dashboard instead")
    p.add_argument("--dry-run", action="store_true", help="prepare the notebook and print the voila command")
    p.add_argument("--allow-unsealed", action="store_true",
                   help="serve a real study that has no launch seal (testing only)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("demo", help="the simulated demo study and its report (params 'human' section)")
    p.add_argument("--params", default="params/demo.yaml")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("agreement", help="two-rater agreement of a labels CSV (item_id,rater,label)")
    p.add_argument("--labels", required=True, help="CSV with columns item_id,rater,label (two raters; yes/no/uncertain)")
    p.add_argument("--out", required=True, help="AGREEMENT.json")
    p.set_defaults(func=cmd_agreement)

    human.set_defaults(func=lambda args: (human.print_help(), 2)[1])


def cmd_init(args: argparse.Namespace) -> int:
    from .protocol import StudyConfig
    from .study import Study

    mapping: dict = {}
    source = "<command line>"
    if args.config:
        from capaudit.io.text import read_text_checked

        if not Path(args.config).is_file():
            raise InputError("study config not found" if not Path(args.config).exists() else
                             "study config is not a file", path=args.config)
        text = read_text_checked(args.config)
        try:
            mapping = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            raise InputError(f"not valid YAML ({getattr(exc, 'problem', None) or exc})", path=args.config,
                             line=mark.line + 1 if mark is not None else None) from None
        if mapping is None:
            raise EmptyInputError("the study config is empty (give a mapping of study settings)", path=args.config)
        source = args.config
        if isinstance(mapping, dict) and "human" in mapping and isinstance(mapping["human"], dict):
            mapping = mapping["human"]
    elif args.params:
        from capaudit.io.params import load_params as load_config

        mapping = dict(load_config(args.params).section("human"))
        source = args.params
    if not isinstance(mapping, dict):
        raise InputError("study config must be a mapping", path=source)
    if args.study_id:
        mapping["study_id"] = args.study_id
    if args.mode:
        mapping["mode"] = args.mode
    conf = StudyConfig.from_mapping(mapping, source=source)
    if not (args.db or args.params):
        raise InputError("give the study database with --db STUDY.sqlite or --params PARAMS.yaml")
    db = check_output_path(_db_path(args))
    with Study.create(db, conf) as st:
        _say(args, db, f"created study {st.study_id!r} ({conf.mode}, protocol {conf.protocol})")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.judged_claims]
    if not paths:
        if not args.params:
            raise InputError("give --judged-claims FILE (or --params with human.judged_claims)")
        from capaudit.io.params import load_params as load_config

        from .stage import judged_claims_paths

        paths = judged_claims_paths(load_config(args.params))
    db, st = _open(args)
    with st:
        rep = st.sample(paths)
        _say(args, db, f"{rep.n_base} items + {rep.n_repeats} hidden repeats from {len(rep.pools)} strata "
                       f"(judges: {', '.join(rep.judges)}; missing strata: {len(rep.missing_strata)})")
    return 0


def _lifecycle(args: argparse.Namespace, method: str, message: str) -> int:
    """Call the study's ``method`` and say ``message`` formatted with its result."""
    db, st = _open(args)
    with st:
        result = getattr(st, method)()
        _say(args, db, message.format(result))
    return 0


def cmd_seal(args: argparse.Namespace) -> int:
    if args.ethics_id is None and args.participant_info is None:
        return _lifecycle(args, "seal", "sealed; items sha256 {}")
    from .launch import check_ethics_id, check_participant_info, seal_for_launch

    if args.ethics_id is None or args.participant_info is None:
        raise InputError("the launch seal needs both --ethics-id and --participant-info",
                         field="--ethics-id" if args.ethics_id is None else "--participant-info")
    check_ethics_id(args.ethics_id)  # bad options are refused before the study is opened
    check_participant_info(args.participant_info)
    db, st = _open(args)
    with st:
        man = seal_for_launch(st, args.ethics_id, args.participant_info)
        _say(args, db, f"sealed for launch: ethics id {man['ethics_id']!r}, participant information "
                       f"{man['participant_info']['file']} (sha256 {man['participant_info']['sha256'][:12]}), design "
                       f"sha256 {man['design_sha256'][:12]} -> {st.folder / 'manifest.json'}")
    return 0


def cmd_materialize(args: argparse.Namespace) -> int:
    from .materialize import materialize
    from .render import MAX_IMAGE_SIDE

    db, st = _open(args)
    with st:
        rep = materialize(st, max_side=args.max_side or MAX_IMAGE_SIDE)
    _say(args, db, rep.summary())
    return 1 if rep.problems else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from .validate import validate_study, write_report

    db, st = _open(args)
    with st:
        rep = validate_study(st)
        path = write_report(st, rep)
    _say(args, db)
    for line in rep.lines():
        print(f"capaudit human validate: {line}", file=sys.stderr)
    if not rep.ok:
        n = sum(len(v) for v in rep.problems.values())
        print(f"capaudit human validate: NOT valid: {n} problems in {len(rep.lines())} classes -> {path}",
              file=sys.stderr)
        return 1
    print(f"capaudit human validate: {rep.summary()} -> {path}", file=sys.stderr)
    return 0


def cmd_participant_test(args: argparse.Namespace) -> int:
    from .rehearsal import build_rehearsal
    from .serve import serve

    db = _db_path(args)
    reh = build_rehearsal(db)
    _say(args, db, f"REHEARSAL copy {reh.db} (study {reh.study_id!r}; answers are discarded and never count): "
                   f"{reh.pseudonym} holds {reh.assigned_items} of {reh.items} items")
    print(f"{reh.pseudonym} invite code: {reh.invite_code}")
    if args.no_serve:
        return 0
    sys.stdout.flush()
    return serve(reh.db, host=args.host, port=args.port, dry_run=args.dry_run)


def cmd_open(args: argparse.Namespace) -> int:
    return _lifecycle(args, "open", "open for annotation")


def cmd_close(args: argparse.Namespace) -> int:
    return _lifecycle(args, "close_study", "closed")


def cmd_invite(args: argparse.Namespace) -> int:
    if args.out:  # checked before any participant is added
        check_output_path(args.out)
        if os.path.lexists(args.out):
            raise InputError("already exists; invite codes are shown once, so this file is never overwritten",
                             path=args.out)
    db, st = _open(args)
    with st:
        invites = st.invite(args.count, kind=args.kind, role=args.role)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["pseudonym", "invite_code"])
    for inv in invites:
        w.writerow([inv.pseudonym, inv.code])
    if args.out:
        out = Path(args.out)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(buf.getvalue())
        _say(args, db, f"{len(invites)} invite codes -> {out} (shown once; the database keeps only their SHA-256)")
    else:
        sys.stdout.write(buf.getvalue())
        _say(args, db, f"{len(invites)} invite codes (shown once; the database keeps only their SHA-256)")
    return 0


def cmd_assign(args: argparse.Namespace) -> int:
    db, st = _open(args)
    with st:
        rep = st.assign(extend=args.extend, extend_all=args.extend_all)
        _say(args, db, f"{rep['new_items']} new item assignments; open label slots {rep['open_label_slots']}, "
                       f"open repeats {rep['open_repeats']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .export import status_report

    db, st = _open(args)
    with st:
        rep = status_report(st)
    _say(args, db)
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    if rep["rehearsal_of"]:
        print(f"REHEARSAL copy of study {rep['rehearsal_of']}: its answers are discarded and never count")
    print(f"study {rep['study_id']} ({rep['mode']}): {rep['status']}; {rep['items']} items + {rep['hidden_repeats']} "
          f"hidden repeats in {rep['strata']} strata")
    seal = rep["launch_seal"]
    print(f"launch seal: ethics id {seal['ethics_id']!r}, {seal['sealed_at'][:19]}" if seal else "launch seal: none")
    print("participants: " + (", ".join(f"{k} {v}" for k, v in sorted(rep["participants"].items())) or "none"))
    for ph, d in rep["progress"]["by_phase"].items():
        print(f"  {ph:8s} {d['done']:5d} / {d['assigned']:5d} judgments")
    print(f"items with {rep['labels']['labels_per_item']} image labels: {rep['labels']['items_with_full_image_labels']}; "
          f"open disagreements: {rep['open_disagreements']}; simulated judgments: {rep['simulated_judgments']}")
    r = rep["readiness"]
    print(f"readiness: {'READY' if r['ready'] else 'not ready'}")
    for c in r["checks"]:
        val = c["value"] if not isinstance(c["value"], dict) else ", ".join(f"{k}={v}" for k, v in c["value"].items())
        print(f"  [{'x' if c['met'] else ' '}] {c['name']}: {val} (threshold {c['threshold']})")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import check_output_dir

    from .export import export_study

    check_output_dir(args.out)
    db, st = _open(args)
    with st:
        paths = export_study(st, args.out, include_public_rows=args.include_public_rows, n_resamples=args.n_resamples)
    _say(args, db, "wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    if args.out:
        check_output_path(args.out)
    db, st = _open(args)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = Path(args.out) if args.out else db.with_name(f"{db.stem}.backup-{stamp}.sqlite")
    with st:
        st.backup(out)
    _say(args, db, f"backup -> {out}")
    return 0


def cmd_adjudicate(args: argparse.Namespace) -> int:
    from .export import disagreements

    if args.out:
        check_output_path(args.out)
    db, st = _open(args)
    with st:
        if args.list:
            rows = disagreements(st)
            buf = io.StringIO()
            w = csv.writer(buf, lineterminator="\n")
            w.writerow(["item_id", "phase", "field", "labels"])
            for d in rows:
                w.writerow([d.item_id, d.phase, d.field, ";".join(d.labels)])
            if args.out:
                from capaudit.io.atomic import write_text_atomic

                write_text_atomic(args.out, buf.getvalue())
            else:
                sys.stdout.write(buf.getvalue())
            _say(args, db, f"{len(rows)} open disagreements")
            return 0
        missing = [k for k in ("item", "field", "value", "adjudicator") if not getattr(args, k)]
        if missing:
            raise InputError("give --list, or --item, --field, --value and --adjudicator", field=missing[0])
        aid = st.adjudicate(args.item, args.field, args.value, args.adjudicator)
        _say(args, db, f"adjudication {aid} recorded")
    return 0


def cmd_withdraw(args: argparse.Namespace) -> int:
    db, st = _open(args)
    with st:
        st.withdraw(args.pseudonym)
    _say(args, db, f"{args.pseudonym} withdrawn")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from .serve import serve

    from .study import Study

    db = _db_path(args)  # a file that is not a study is refused before anything is served
    with Study.load(db, read_only=args.dashboard) as st:  # the dashboard never opens the study for writing
        if not args.dashboard:
            from .launch import require_launchable

            require_launchable(st, allow_unsealed=args.allow_unsealed)
    return serve(db, host=args.host, port=args.port, dry_run=args.dry_run, dashboard=args.dashboard)


def cmd_demo(args: argparse.Namespace) -> int:
    from capaudit.io.params import load_params as load_config

    from .stage import run_demo

    out = run_demo(load_config(args.params))
    print(out["table"].to_string(index=False))
    print(f"capaudit human demo: study database: {Path(out['db']).resolve()} (SIMULATED annotators)", file=sys.stderr)
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    from .agreement import labels_agreement

    check_output_path(args.out)
    rep = labels_agreement(args.labels, args.out)
    nom, b = rep["nominal"], rep["binary"]
    print(f"capaudit human agreement: nominal n={nom['n']} exact={nom['exact']:.4f}; binary n={b['n']} "
          f"(abstentions {b['abstentions']}) -> {args.out}", file=sys.stderr)
    return 0

