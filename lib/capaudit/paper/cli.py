"""``capaudit paper`` subcommands: build tables/figures/numbers; verify the reference run; and
``capaudit report``: the run's self-contained HTML report."""

from __future__ import annotations

import argparse

from ..io.params import load_params as load_config


def _tables(args: argparse.Namespace) -> int:
    from .run import run_all

    cfg = load_config(args.params)
    for res in run_all(cfg, args.element or None):
        for name, path in res.paths.items():
            print(f"{res.element}: {name} -> {path}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from .run import check_reference

    cfg = load_config(args.params)
    results = check_reference(cfg)
    for r in results:
        print(r.line())
    failed = [r for r in results if not r.passed and not r.skipped]
    print(f"{len(results) - len(failed)}/{len(results)} checks passed or skipped; {len(failed)} failed")
    return 1 if failed else 0


def _render(args: argparse.Namespace) -> int:
    """Render stage rows files (``<artifacts>/tables/<id>.json``, or the files named) to
    ``--out/<id>.{csv,tex,table.json}``: the tables a stage command wrote the rows of."""
    from pathlib import Path

    from capaudit.errors import InputError
    from capaudit.summaries.table_rows import iter_table_rows, read_table_rows

    from .render import write_table
    from .stage_tables import build_table

    out = Path(args.out)
    run_dir = Path(args.run_dir) if args.run_dir else out
    found = 0
    for given in args.rows:
        src = Path(given)
        datas = (list(iter_table_rows(src)) if src.is_dir()
                 else [{**read_table_rows(src), "path": str(src)}])
        for data in datas:
            paths = write_table(build_table(data, run_dir=run_dir), out)
            print(f"{data['table']}: " + " ".join(str(paths[k]) for k in ("csv", "tex", "model")))
            found += 1
    if not found:
        raise InputError("no rows files: give rows JSON files or a folder holding tables/<id>.json",
                         path=", ".join(args.rows))
    return 0


def _report(args: argparse.Namespace) -> int:
    from .report import build_report

    cfg = load_config(args.params)
    print(build_report(cfg.out_dir, params=str(args.params)))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``capaudit paper {tables,render,check-reference}`` and ``capaudit report``."""
    r = subparsers.add_parser("report", help="the run's HTML report: outputs/<run>/report/index.html (self-contained)")
    r.add_argument("--params", default="params/demo.yaml")
    r.set_defaults(func=_report)
    p = subparsers.add_parser("paper", help="paper tables, figures, numbers map and golden checks")
    sub = p.add_subparsers(dest="paper_command", metavar="SUBCOMMAND")
    t = sub.add_parser("tables", help="write tables, figures and numbers for a params file's paper: section")
    t.add_argument("--params", default="params/reference.yaml")
    t.add_argument("--element", action="append", help="only this element (repeatable): vqa_tables, headline, ...")
    t.set_defaults(func=_tables)
    d = sub.add_parser("render", help="render stage rows files (tables/<id>.json) to <id>.{csv,tex,table.json}")
    d.add_argument("rows", nargs="+", metavar="ROWS",
                   help="a rows file tables/<id>.json, or a folder whose tables/ holds them (e.g. an artifacts "
                        "folder, or the --out of `capaudit claims eval-dsg`)")
    d.add_argument("--out", required=True, help="folder for <id>.csv, <id>.tex and <id>.table.json")
    d.add_argument("--run-dir", help="folder the provenance's file paths are relative to (default: --out)")
    d.set_defaults(func=_render)
    c = sub.add_parser("check-reference", help="golden checks G1-G8, G12 against the published summaries (exit 1 on mismatch)")
    c.add_argument("--params", default="params/reference.yaml")
    c.set_defaults(func=_check)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
