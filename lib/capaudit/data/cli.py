"""``capaudit data list|verify|path``: inspect and check the checksummed data registry."""

from __future__ import annotations

import argparse
import sys

from . import registry


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="data registry: list, verify and locate registered files",
                       description="Checksummed data registry (cache: $CAPAUDIT_DATA_DIR or the user cache; "
                                   "the verified-hash sidecar sits beside $CAPAUDIT_DATA_DIR when it is writable, "
                                   "else in the user cache; `data verify` prints where).")
    dsub = p.add_subparsers(dest="data_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    pl = dsub.add_parser("list", help="list registered files (dataset, path, bytes, sha256, license)")
    pl.add_argument("--dataset", default=None)
    pl.add_argument("--hf", action="store_true", help="list the Hugging Face (online-only) entries instead")
    pl.set_defaults(func=_list)

    pv = dsub.add_parser("verify", help="sha256-check every registered file present in the cache")
    pv.add_argument("--dataset", default=None)
    pv.add_argument("--strict", action="store_true", help="also fail when a registered file is missing")
    pv.set_defaults(func=_verify)

    pp = dsub.add_parser("path", help="print the verified local path of one file (downloads it if missing)")
    pp.add_argument("dataset")
    pp.add_argument("path")
    pp.add_argument("--no-verify", action="store_true")
    pp.set_defaults(func=_path)


def _list(args: argparse.Namespace) -> int:
    kind = "hf" if args.hf else "file"
    if args.dataset is not None:
        registry.entries(args.dataset)  # unknown dataset: an error naming it, not an empty list
    for e in sorted(registry.entries(args.dataset, kind=kind), key=lambda x: x.name):
        if kind == "hf":
            print(f"{e.dataset}\t{e.path}\t{e.repository}\t{'' if e.extra.get('repo_verified') else 'unverified repo id'}")
        else:
            print(f"{e.dataset}\t{e.path}\t{e.bytes}\t{e.sha256}\t{e.license}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    if args.dataset is not None:
        registry.entries(args.dataset)
    counts = {"ok": 0, "missing": 0, "corrupt": 0}
    for _, status, msg in registry.verify(args.dataset):
        counts[status] += 1
        if status != "ok":
            print(f"{status}: {msg}", file=sys.stderr)
    print(f"{registry.data_dir()}: {counts['ok']} ok, {counts['corrupt']} corrupt, {counts['missing']} missing "
          f"(verified hashes remembered in {registry.hash_cache_path()})")
    bad = counts["corrupt"] + (counts["missing"] if args.strict else 0)
    if counts["ok"] + counts["corrupt"] == 0:
        print("no registered file is present; set CAPAUDIT_DATA_DIR", file=sys.stderr)
        bad += 1
    return 1 if bad else 0


def _path(args: argparse.Namespace) -> int:
    print(registry.fetch(args.dataset, args.path, verify=not args.no_verify))
    return 0
