"""One ``capaudit`` command; each subcommand is one stage's entry point.

Every stage module listed in ``STAGE_CLIS`` exposes ``register(subparsers)`` which adds its
subcommand(s) and sets ``func`` on the parser; ``func(args) -> int`` is the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

# One line per stage; a stage adds its own line and touches nothing else here.
STAGE_CLIS: List[str] = [
    "capaudit.workflow",
    "capaudit.text.cli",
    "capaudit.data.cli",
    "capaudit.surfaces.cli",
    "capaudit.prompts.cli",
    "capaudit.paper.cli",
    "capaudit.llm.cli",
    "capaudit.claims.cli",
    "capaudit.judges.cli",
    "capaudit.human.cli",
    "capaudit.recap.cli",
    "capaudit.text.truncation_cli",
    "capaudit.embed.cli",
    "capaudit.detail.cli",
    "capaudit.alttext.cli",
    "capaudit.engine.cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="capaudit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in STAGE_CLIS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a stage not built yet must not break the others
            if not exc.name or not (name == exc.name or name.startswith(exc.name + ".")):
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        # Input errors already name file/row/field; show them without a traceback.
        print(f"capaudit {args.command}: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
