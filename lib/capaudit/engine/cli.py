"""``capaudit engine info|shards``: what the execution engines see.

    capaudit engine info [--address ADDR] [--json]     # versions; Ray cluster resources if reachable
    capaudit engine shards INPUT [INPUT ...] [--shards N | --target-mb M] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict


def register(subparsers: Any) -> None:
    """Add ``engine`` (info, shards) to the ``capaudit`` command."""
    eng = subparsers.add_parser("engine", help="execution engines (local, Ray): info and shard listing")
    sub = eng.add_subparsers(dest="engine_command", metavar="ENGINE_COMMAND")
    info = sub.add_parser("info", help="engine versions; with --address (or RAY_ADDRESS) the Ray cluster's resources")
    info.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS; none: do not connect)")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_info)
    sh = sub.add_parser("shards", help="list the shards an input is cut into")
    sh.add_argument("inputs", nargs="+", help="files, folders, globs or fsspec URLs (JSONL, JSONL.gz, Parquet)")
    g = sh.add_mutually_exclusive_group()
    g.add_argument("--shards", type=int, default=None, help="number of shards")
    g.add_argument("--target-mb", type=float, default=64.0, help="target shard size in MiB (default 64)")
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=cmd_shards)
    eng.set_defaults(func=lambda args: (eng.print_help(), 2)[1])


def engine_info(address: str | None = None) -> Dict[str, Any]:
    """Versions of the optional engine packages and, when an address is given, cluster resources."""
    out: Dict[str, Any] = {"engines": ["local", "ray"], "cpus_local": os.cpu_count()}
    try:
        import ray

        out["ray"] = ray.__version__
    except ImportError:
        out["ray"] = None
    try:
        import openai

        out["openai"] = openai.__version__
    except ImportError:
        out["openai"] = None
    address = address or os.environ.get("RAY_ADDRESS")
    if address and out["ray"]:
        from capaudit.engine.executors import ensure_ray

        import ray

        ensure_ray(address)
        out["cluster"] = {"address": address, "resources": ray.cluster_resources(),
                          "nodes": len([n for n in ray.nodes() if n.get("Alive")])}
    return out


def cmd_info(args: argparse.Namespace) -> int:
    info = engine_info(args.address)
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        for k, v in info.items():
            print(f"{k}: {v}")
    return 0


def cmd_shards(args: argparse.Namespace) -> int:
    from capaudit.engine.shards import list_shards

    target = int(args.target_mb * 1024 * 1024)
    shards = list_shards(args.inputs, num_shards=args.shards, target_bytes=max(1, target))
    if args.json:
        print(json.dumps([s.to_dict() for s in shards], indent=2))
    else:
        for s in shards:
            print(f"{s.name}\t{s.describe()}")
        print(f"{len(shards)} shards", file=sys.stderr)
    return 0
