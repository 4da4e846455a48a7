"""One ``capaudit`` command; each subcommand is one stage's entry point.

Every stage module listed in ``STAGE_CLIS`` exposes ``register(subparsers)`` which adds its
subcommand(s) and sets ``func`` on the parser; ``func(args) -> int`` is the exit status.

Failing loudly and cleanly (issue 16): any exception a command raises becomes exactly one line,
``capaudit <command>: error: <message>`` (the message names file, line and field; multi-line
messages are joined), with a non-zero exit status and no traceback; ``--debug`` anywhere on the
command line (or ``CAPAUDIT_DEBUG=1``) prints the traceback too. Usage errors are one line as
well. A closed stdout (``capaudit data list | head``) ends the command quietly (status 141).
Commands write artifacts atomically (:mod:`capaudit.io.atomic`), so an error leaves no partial file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import Dict, List, NoReturn, Optional, Sequence, Tuple

from capaudit.errors import CapauditError, one_line

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
    "capaudit.doctor",
    "capaudit.paper_fixture",
    "capaudit.cc12m.cli",
    "capaudit.gpu_study",
]


#: Modules that register task rules (capaudit.llm.validate) when imported: the command runs request
#: files it did not build (``capaudit llm run``), so it names them for the model-call layer, which
#: names no stage itself.
TASK_RULE_PROVIDERS: Tuple[str, ...] = ("capaudit.claims", "capaudit.claims.rules", "capaudit.judges")


class StageLoadError(CapauditError):
    """A stage module listed in STAGE_CLIS failed to import."""

    def __init__(self, module: str, exc: BaseException):
        super().__init__(f"cannot load the commands of {module}: {type(exc).__name__}: {exc}")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors: ``capaudit <cmd>: error: <message> (see ... --help)``."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see '{self.prog} --help')\n")


#: Which stage module provides a command, so that ``capaudit <command>`` imports only that module
#: (a command missing here, or not registered by its module, falls back to importing them all).
COMMAND_MODULES: Dict[str, str] = {
    "notebook": "capaudit.workflow", "text-stats": "capaudit.text.cli", "data": "capaudit.data.cli",
    "slice": "capaudit.surfaces.cli", "surfaces": "capaudit.surfaces.cli",
    "prompt-support": "capaudit.prompts.cli", "prompt-pools": "capaudit.prompts.cli",
    "paper": "capaudit.paper.cli", "llm": "capaudit.llm.cli", "serve": "capaudit.llm.cli",
    "claims": "capaudit.claims.cli", "judges": "capaudit.judges.cli", "human": "capaudit.human.cli",
    "recap": "capaudit.recap.cli", "encoder-truncation": "capaudit.text.truncation_cli",
    "embed": "capaudit.embed.cli", "detail": "capaudit.detail.cli", "alttext": "capaudit.alttext.cli",
    "coverage": "capaudit.alttext.cli", "engine": "capaudit.engine.cli", "plan": "capaudit.paper_fixture",
    "cc12m": "capaudit.cc12m.cli", "study": "capaudit.gpu_study",
}


def build_parser(modules: Optional[Sequence[str]] = None) -> argparse.ArgumentParser:
    """The ``capaudit`` parser with the commands of ``modules`` (default: every stage in STAGE_CLIS)."""
    parser = _Parser(prog="capaudit", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true",
                        help="on error, print the full traceback (also: CAPAUDIT_DEBUG=1); may be given anywhere")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (STAGE_CLIS if modules is None else modules):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a stage not built yet must not break the others
            if not exc.name or not (name == exc.name or name.startswith(exc.name + ".")):
                raise StageLoadError(name, exc) from exc
            continue
        except Exception as exc:  # a broken stage module: one line naming it (main), not a traceback
            raise StageLoadError(name, exc) from exc
        module.register(sub)
    return parser


def _parser_for(argv: List[str]) -> argparse.ArgumentParser:
    """Import only the module of the command named in ``argv`` when it is known (fast start)."""
    cmd = next((a for a in argv if not a.startswith("-")), None)
    module = COMMAND_MODULES.get(cmd or "")
    if module and module in STAGE_CLIS and not any(a in ("-h", "--help") for a in argv[: argv.index(cmd)]):
        parser = build_parser([module])
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        if cmd in sub.choices:
            return parser
    return build_parser()


def _split_debug(argv: List[str]) -> Tuple[List[str], bool]:
    """Remove every ``--debug`` before a ``--`` separator, so the flag works in any position."""
    out: List[str] = []
    debug = False
    for i, a in enumerate(argv):
        if a == "--":
            out += argv[i:]
            break
        if a == "--debug":
            debug = True
        else:
            out.append(a)
    return out, debug


def command_label(args: argparse.Namespace) -> str:
    """``text-stats``, ``claims build``, ``data list``, ... for error lines."""
    parts = [str(getattr(args, "command", None) or "")]
    for key, value in sorted(vars(args).items()):
        if key.endswith("_command") and isinstance(value, str) and value:
            parts.append(value)
    if parts[0] == "notebook" and isinstance(getattr(args, "action", None), str):
        parts.append(args.action)
    return " ".join(p for p in parts if p)


def error_message(exc: BaseException) -> str:
    """What the one error line says about ``exc`` (file, line and field are in the message)."""
    if isinstance(exc, KeyError) and not isinstance(exc, CapauditError):
        text = str(exc.args[0]) if exc.args else "missing key"
    elif isinstance(exc, UnicodeDecodeError):
        text = (f"input is not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                f"re-encode it as UTF-8")
    elif isinstance(exc, OSError) and not isinstance(exc, CapauditError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        text = f"{where}: {exc.strerror}" if where else str(exc.strerror)
        if exc.filename2:
            text += f" ({exc.filename2})"
    elif isinstance(exc, (CapauditError, ValueError, LookupError, OSError)):
        text = str(exc) or type(exc).__name__
    else:
        text = (f"internal error {type(exc).__name__}: {exc} (this is a bug in capaudit; rerun with --debug "
                f"for the traceback and report it)")
    return one_line(text)


def _stdout_closed() -> bool:
    """True when stdout is a pipe whose reading end is gone."""
    try:
        import select
        import stat

        fd = sys.stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: Optional[List[str]] = None) -> int:
    """Run one command; errors become one line on stderr and a non-zero exit status.

    Exit status: the command's own (0 = success), 1 for an error in the input, 2 for a usage
    error, 3 when a lock is held by another process, 130 when interrupted, 141 when stdout was
    closed early (``capaudit data list | head``; nothing is printed). ``--debug`` anywhere on the
    command line (or ``CAPAUDIT_DEBUG=1``) adds the full traceback.
    """
    argv, debug = _split_debug(list(sys.argv[1:] if argv is None else argv))
    debug = debug or os.environ.get("CAPAUDIT_DEBUG", "") not in ("", "0")
    try:
        parser = _parser_for(argv)
    except StageLoadError as exc:
        if debug:
            traceback.print_exc()
        print(f"capaudit: error: {one_line(exc)}", file=sys.stderr)
        return 1
    args, extra = parser.parse_known_args(argv)
    label = command_label(args)
    if extra:  # reported by the command it was given to, in one line
        where = f"capaudit {label}".strip()
        parser.exit(2, f"{where}: error: unrecognized arguments: {' '.join(extra)} (see '{where} --help')\n")
    args.debug = debug
    from capaudit.llm.validate import add_rule_providers

    add_rule_providers(TASK_RULE_PROVIDERS)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        print(f"capaudit {label}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if _stdout_closed():  # the reader went away (head, less): stop quietly, like cat
            _silence_stdout()
            return 141
        if debug:
            traceback.print_exc()
        print(f"capaudit {label}: error: broken pipe", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - every error becomes one line; --debug shows the trace
        if debug:
            traceback.print_exc()
        print(f"capaudit {label}: error: {error_message(exc)}", file=sys.stderr)
        return int(getattr(exc, "exit_code", 1) or 1)


if __name__ == "__main__":
    sys.exit(main())
