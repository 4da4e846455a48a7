"""``capaudit slice`` (build a fair slice from 2+ caption files) and ``capaudit surfaces show``."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List

from ..io.atomic import check_output_dir
from .keys import KEY_NORMALIZERS
from .params import SliceParams


def parse_surface_arg(text: str, key_normalization: str = "str") -> Dict[str, Any]:
    """``NAME=FILE[:caption_field[:key_field]]`` → surface spec; FILE ``registry:DATASET/PATH`` uses the registry."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise ValueError(f"--surface '{text}': expected NAME=FILE[:caption_field[:key_field]]")
    registry = rest.startswith("registry:")
    if registry:
        rest = rest[len("registry:"):]
    parts = rest.split(":")
    if len(parts) > 3:
        raise ValueError(f"--surface '{text}': too many ':' fields (NAME=FILE[:caption_field[:key_field]])")
    spec: Dict[str, Any] = {"name": name}
    if registry:
        dataset, slash, path = parts[0].partition("/")
        if not slash:
            raise ValueError(f"--surface '{text}': registry files are given as registry:DATASET/PATH")
        spec.update(dataset=dataset, path=path)
    else:
        spec["file"] = parts[0]
    if len(parts) > 1 and parts[1]:
        spec["caption_field"] = parts[1]
    if len(parts) > 2 and parts[2]:
        spec["key_field"] = parts[2]
    spec["key_normalization"] = key_normalization
    return spec


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("slice", help="fair slice: join 2+ caption files on a shared key and sample N keys",
                       description="Join caption surfaces on the normalised shared key (first non-empty caption "
                                   "per key wins), sample N keys with random.Random(seed) (reference-spec §11.1).")
    p.add_argument("--surface", action="append", required=True, metavar="NAME=FILE[:caption_field[:key_field]]",
                   help="a surface (repeat; first = local). FILE may be registry:DATASET/PATH")
    p.add_argument("--n", default=None, help="keys to sample (default: all matched)")
    p.add_argument("--seed", type=int, default=SliceParams.seed)
    p.add_argument("--out", required=True, help="output root; the slice goes to OUT/NAME/n<N>_seed<S>/")
    p.add_argument("--name", default=None, help="slice name (default: surface names joined by '_vs_')")
    p.add_argument("--key-normalization", default="str", choices=sorted(KEY_NORMALIZERS))
    p.add_argument("--on-missing", default="error", choices=("error", "skip"),
                   help="a row without the caption field: error (default) or skip")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=_slice)

    ps = sub.add_parser("surfaces", help="inspect the surfaces declared in a params file")
    ssub = ps.add_subparsers(dest="surfaces_command", metavar="ACTION")
    ps.set_defaults(func=lambda args: (ps.print_help(), 2)[1])
    show = ssub.add_parser("show", help="list the params' surfaces: section with record counts")
    show.add_argument("params")
    show.set_defaults(func=_show)


def _slice(args: argparse.Namespace) -> int:
    from .slices import SliceExistsError
    from .stage import build_slice
    from .surface import load_surface

    specs: List[Dict[str, Any]] = [parse_surface_arg(s, args.key_normalization) for s in args.surface]
    for spec in specs:
        spec["on_missing"] = args.on_missing
    if len(specs) < 2:
        raise ValueError("capaudit slice needs at least two --surface arguments")
    n = None if args.n in (None, "", "all", "null") else _positive(args.n)
    check_output_dir(args.out)
    loaded = [load_surface(spec) for spec in specs]
    params = SliceParams.from_args(args, tuple(s.name for s in loaded), n)
    if len(set(params.surfaces)) != len(params.surfaces):
        raise ValueError(f"slice '{params.name}': surface names must be distinct, got {list(params.surfaces)}")
    surfaces = {s.name: s for s in loaded}
    try:
        m = build_slice(params, surfaces, args.out)
    except SliceExistsError as exc:
        print(f"capaudit slice: error: {exc}", file=sys.stderr)
        return 1
    print(f"{m.dir}: {m.sampled} sampled of {m.matched} matched keys"
          + (" (existing identical slice reused)" if m.reused else ""))
    for s in m.surfaces:
        ps = m.per_surface[s]
        skipped = ps.get("rows_without_caption", 0)
        print(f"  {s}: {ps['records']} records, {ps['keys']} keys, {ps['unmatched_count']} unmatched"
              + (f", {skipped} rows skipped (no caption field or empty caption)" if skipped else ""))
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--n: expected a positive integer or 'all', got {text!r}") from None
    if value < 1:
        raise ValueError(f"--n: expected a positive integer or 'all', got {value}")
    return value


def _show(args: argparse.Namespace) -> int:
    from ..io.params import load_params as load_config
    from .stage import surface_counts, surface_specs

    cfg = load_config(args.params)
    rows = [surface_counts(spec) for spec in surface_specs(cfg).values()]
    for r in rows:
        r["skipped"] = r["rows_without_caption"]
    cols = ["surface", "source", "caption_field", "key_field", "rows", "records", "skipped", "keys"]
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols} if rows else {c: len(c) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in cols))
    return 0
