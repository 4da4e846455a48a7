"""``capaudit cc12m bridge|manifest|materialize``: the CC12M case study's data path.

    capaudit cc12m bridge --surface NAME=PATH,join=key|url,caption=F[|F],key=F,url=F ... \\
        [--anchor NAME] [--key-normalization zfill9|zfill12|str] [--seed 0] [--max-rows N] \\
        [--skip-incomplete] [--format jsonl|parquet] --out DIR
    capaudit cc12m manifest --joined DIR/joined.jsonl [--shards DIR|GLOB] [--match url|key] --out M.jsonl|.parquet
    capaudit cc12m materialize --manifest M --shards DIR|GLOB [--joined J] [--match url|key] \\
        [--naming image-id|sha256|shard-member] [--allow-missing] --out DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from capaudit.argtypes import nonnegative_int, positive_int

from .params import CC12MParams

def _say(line: str) -> None:
    print(f"capaudit cc12m: {line}", file=sys.stderr)


def cmd_bridge(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import check_output_dir

    from .bridge import stderr_lines
    from .stage import BRIDGE_SUMMARY, write_bridge
    from .surface_spec import parse_surface_spec

    out = check_output_dir(args.out)
    params = CC12MParams.bridge_from_args(args, [parse_surface_spec(s) for s in args.surface])
    result = write_bridge(params, out, args.format)
    name = result.summary["outputs"]["joined"]
    for line in stderr_lines(result.summary):
        _say(line)
    _say(f"wrote {len(result.rows)} rows to {out / name} and the counts to {out / BRIDGE_SUMMARY}")
    return 0


def cmd_manifest(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import check_output_path

    from .manifest import locate, manifest_from_joined
    from .shard_index import build_index
    from .shards import expand_shards
    from .tables import table_format, write_table

    table_format(args.out)
    check_output_path(args.out)
    rows = manifest_from_joined(args.joined)
    located = ""
    if args.shards:
        index = build_index(expand_shards(args.shards))
        counts = locate(rows, index, args.match)
        st = index.stats()
        located = (f"; located {counts['located']} in {st['shards']} shard(s) by {args.match} "
                   f"({counts['not_located']} not located; shards: {st['samples']} samples, "
                   f"{st['duplicate_urls']} duplicate URLs, {st['duplicate_keys']} duplicate keys, "
                   f"{st['samples_without_image']} without an image member)")
    write_table(rows, args.out)
    _say(f"wrote {len(rows)} images to {args.out}{located}")
    return 0


def cmd_materialize(args: argparse.Namespace) -> int:
    from .materialize import SUMMARY, materialize

    s = materialize(args.manifest, args.shards, args.out, match=args.match, naming=args.naming,
                    allow_missing=args.allow_missing, joined=args.joined)
    _say(f"requested {s['requested']}: materialized {s['materialized']} ({s['already_present']} already present "
         f"from an earlier run, {s['found_in_shards']} found in the shards; {s['files_written']} files written, "
         f"{s['files_kept_unchanged']} already there with the same bytes), missing {s['missing']}, "
         f"corrupt {s['corrupt']}")
    for surface, c in s["caption_files"].items():
        _say(f"{surface}.jsonl: {c['rows']} rows ({c['without_image']} without an image, "
             f"{c['without_manifest_row']} without a manifest row)")
    _say(f"wrote {Path(args.out) / s['outputs']['manifest']} and {Path(args.out) / SUMMARY}")
    return 0


def register(subparsers: Any) -> None:
    """Add ``cc12m`` and its subcommands to the ``capaudit`` command."""
    from .image_check import NAMINGS
    from .shard_index import MATCH_MODES
    from .urls import KEY_MODES

    c = subparsers.add_parser("cc12m", help="CC12M bridge: join differently keyed surfaces, image manifest, "
                                            "images out of WebDataset shards")
    sub = c.add_subparsers(dest="cc12m_command", metavar="CC12M_COMMAND")

    b = sub.add_parser("bridge", help="join caption surfaces on the key and the anchor's normalised URL")
    b.add_argument("--surface", action="append", required=True,
                   help="NAME=PATH,join=key|url,caption=FIELD[|FIELD],key=FIELD,url=FIELD[,format=jsonl|parquet|"
                        "csv|tsv] (repeatable; PATH may be a glob or a Parquet folder)")
    b.add_argument("--anchor", help="surface the others meet (default: the first --surface); it needs key=FIELD "
                                    "for join=key surfaces and url=FIELD for join=url surfaces")
    b.add_argument("--key-normalization", choices=KEY_MODES, default=CC12MParams.key_normalization,
                   help="join-key normalisation (default zfill9, the reference's CC12M rule)")
    b.add_argument("--seed", type=nonnegative_int, default=CC12MParams.seed, help="seed of the row order shuffle (reference: 0)")
    b.add_argument("--max-rows", type=positive_int, help="keep the first N rows of the shuffled join (reference: 5000)")
    b.add_argument("--skip-incomplete", action="store_true",
                   help="count and skip rows without key/URL or caption, as the reference does (default: refuse)")
    b.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl", help="joined table format")
    b.add_argument("--out", required=True, help="output folder (joined.<format>, bridge_summary.json)")
    b.set_defaults(func=cmd_bridge)

    m = sub.add_parser("manifest", help="one row per image of a joined table (optionally located in shards)")
    m.add_argument("--joined", required=True, help="joined table of 'cc12m bridge'")
    m.add_argument("--shards", help="folder of .tar shards, a glob or one .tar: record shard and member")
    m.add_argument("--match", choices=MATCH_MODES, default=CC12MParams.match,
                   help="find an image by its sidecar URL (normalised) or by its member key (default url)")
    m.add_argument("--out", required=True, help="manifest file (.jsonl or .parquet)")
    m.set_defaults(func=cmd_manifest)

    z = sub.add_parser("materialize", help="write the manifest's images out of WebDataset tar shards")
    z.add_argument("--manifest", required=True, help="manifest of 'cc12m manifest' (.jsonl or .parquet)")
    z.add_argument("--shards", required=True, help="folder of .tar shards, a glob or one .tar")
    z.add_argument("--joined", help="joined table: also write <surface>.jsonl caption files with an 'image' field")
    z.add_argument("--match", choices=MATCH_MODES, default=CC12MParams.match,
                   help="rows without a recorded shard/member: by sidecar URL (normalised) or member key")
    z.add_argument("--naming", choices=NAMINGS, default=CC12MParams.naming,
                   help="image file names: <image id>.<ext> (default), <sha256>.<ext>, or the reference's "
                        "<shard>__<member>.<ext>")
    z.add_argument("--allow-missing", action="store_true",
                   help="write what was found; count missing and corrupt images instead of failing")
    z.add_argument("--out", required=True, help="output folder (images/, manifest, caption files, summary)")
    z.set_defaults(func=cmd_materialize)


__all__ = ["register", "cmd_bridge", "cmd_manifest", "cmd_materialize"]
