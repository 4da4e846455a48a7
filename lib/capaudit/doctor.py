"""``capaudit doctor``: every optional system resource, found or missing, and how to get it.

``capaudit doctor`` prints one row per resource of :data:`capaudit.resources.RESOURCES` (found /
missing, where or why, what needs it, how to get it). ``--install TARGET`` (``paper`` or
``test``) installs the Debian packages that target needs and lacks: as root with ``apt-get``,
otherwise it stops at once with the one ``sudo apt-get install …`` line to run (exit 1).
``--require TARGET`` only checks (exit 1 naming what is missing). The Makefile runs
``--install`` before ``make paper`` and ``make test``, so a new machine needs nothing typed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from typing import List, Optional, Sequence

from capaudit.resources import RESOURCES, ResourceMissing, install_hint, missing_for, missing_packages, status

TARGETS = ("paper", "test")


def report_rows() -> List[List[str]]:
    """[name, found|missing, detail, needed by, how to get] per resource."""
    rows = []
    for name, res in RESOURCES.items():
        ok, detail = status(name)
        how = install_hint([name]) if res.debian else res.how
        rows.append([name, "found" if ok else "missing", detail, res.needed_by, "" if ok else how])
    return rows


def render(rows: Sequence[Sequence[str]]) -> str:
    """One block per resource, nothing cut: ``name  found|MISSING  where/why`` then its users and,
    when missing, how to get it."""
    width = max(len(r[0]) for r in rows)
    lines = []
    for name, state, detail, needed_by, how in rows:
        lines.append(f"{name.ljust(width)}  {'found  ' if state == 'found' else 'MISSING'}  {detail}")
        lines.append(f"{' ' * width}  needed by: {needed_by}")
        if how:
            lines.append(f"{' ' * width}  get it:    {how}")
    return "\n".join(lines)


def install(target: str, *, quiet: bool = False) -> List[str]:
    """Install the Debian packages ``target`` needs and lacks; returns what was installed.

    Not root (and no ``CAPAUDIT_APT_SUDO=1``): raises :class:`ResourceMissing` with the one
    ``sudo apt-get install`` line. ``apt-get`` failing raises the same, naming its exit status.
    """
    names = missing_for(target)
    pkgs = missing_packages(names) if names else []
    if names and not pkgs:  # dpkg says installed yet the check fails: name it, do not loop
        raise ResourceMissing(f"make {target}: {', '.join(names)} still missing although its Debian packages are "
                              f"installed ({'; '.join(status(n)[1] for n in names)})")
    if not pkgs:
        return []
    root = os.geteuid() == 0
    if not root and os.environ.get("CAPAUDIT_APT_SUDO") != "1":
        raise ResourceMissing(f"make {target} needs Debian packages for {', '.join(names)}; run: "
                              f"sudo apt-get update && sudo apt-get install -y {' '.join(pkgs)}")
    if not shutil.which("apt-get"):
        raise ResourceMissing(f"make {target} needs {', '.join(names)} and this system has no apt-get; install "
                              f"the equivalent of: {' '.join(pkgs)}")
    prefix = [] if root else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    t0 = time.monotonic()
    if not quiet:
        print(f"[capaudit] installing Debian packages for {', '.join(names)}: {' '.join(pkgs)}", file=sys.stderr,
              flush=True)
    for cmd in ([*prefix, "apt-get", "update", "-q"],
                [*prefix, "apt-get", "install", "-y", "-q", "--no-install-recommends", *pkgs]):
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
            raise ResourceMissing(f"{' '.join(cmd[:3])} failed (exit {r.returncode}): {tail}")
    still = missing_for(target)
    if still:
        raise ResourceMissing(f"after installing {' '.join(pkgs)}: still missing "
                              f"{'; '.join(f'{n} ({status(n)[1]})' for n in still)}")
    if not quiet:
        print(f"[capaudit] installed {len(pkgs)} packages in {time.monotonic() - t0:.0f} s", file=sys.stderr,
              flush=True)
    return pkgs


def cmd_doctor(args: argparse.Namespace) -> int:
    if args.install:
        install(args.install)
        return 0
    if args.require:
        missing = missing_for(args.require)
        if missing:
            raise ResourceMissing(f"make {args.require} needs {', '.join(missing)}; run: {install_hint(missing)}")
        return 0
    print(render(report_rows()))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("doctor", help="list optional system resources (found / missing / how to get them)",
                              description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--install", choices=TARGETS, help="install the Debian packages this make target needs")
    g.add_argument("--require", choices=TARGETS, help="exit 1 naming what this make target needs and lacks")
    p.set_defaults(func=cmd_doctor, command="doctor")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m capaudit.doctor``: the same command without the rest of capaudit (the Makefile
    runs it before the virtual environment exists, so a missing package is named at once)."""
    parser = argparse.ArgumentParser(prog="capaudit doctor")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(["doctor", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except ResourceMissing as exc:
        print(f"capaudit doctor: error: {exc}", file=sys.stderr)
        return exc.exit_code


__all__ = ["install", "main", "render", "report_rows", "register"]


if __name__ == "__main__":
    sys.exit(main())
