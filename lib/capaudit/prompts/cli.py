"""``capaudit prompt-support`` and ``capaudit prompt-pools prepare`` (reference-spec §3)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from capaudit.argtypes import budget, nonnegative_int, positive_int

# ``prompt-support`` options left out take the defaults of capaudit.prompts.params.PromptSupportParams
# (argparse.SUPPRESS), imported only when a command runs (keeps `capaudit --help` fast).
UNSET = argparse.SUPPRESS


def _pool_arg(text: str) -> Tuple[str, Path, Optional[str]]:
    """``NAME=FILE`` or ``NAME=FILE:field``; a txt file (one prompt per line) or JSONL (``prompt``)."""
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--pool {text!r}: expected NAME=FILE")
    name, rest = text.split("=", 1)
    if not name:
        raise argparse.ArgumentTypeError(f"--pool {text!r}: empty pool name")
    path, field = rest, None
    if not Path(rest).exists() and ":" in rest:
        path, field = rest.rsplit(":", 1)
    return name, Path(path), field or None


def default_surfaces(pairs_path: Path, local_field: str, reference_field: str) -> Tuple[str, str]:
    """Surface names when not given: the slice manifest's roles beside the pairs file (fields
    ``local_caption``/``reference_caption``), else the field names."""
    from capaudit.io.manifest import read_manifest

    m = Path(pairs_path).parent / "manifest.json"
    if (local_field, reference_field) == ("local_caption", "reference_caption") and m.is_file():
        try:
            roles = read_manifest(m).get("roles") or {}
        except ValueError:
            roles = {}
        if isinstance(roles, dict) and roles.get("local") and roles.get("reference"):
            return str(roles["local"]), str(roles["reference"])
    return local_field, reference_field


def default_comparison(local_surface: str, reference_surface: str) -> str:
    """``<local>_vs_<reference>``: derived from the surfaces, never from the pairs file's name,
    because the comparison name seeds the bootstrap (renaming a file must not move an interval)."""
    return f"{local_surface}_vs_{reference_surface}"


def pool_cache_dir(args: argparse.Namespace) -> Optional[Path]:
    """Where pool counts are kept between runs: ``--cache-dir``, else ``$CAPAUDIT_CACHE/prompt_counts``
    (None with ``--no-cache``). The default folder is best effort: one that cannot be written is
    said on stderr and the pools are counted without it; a named one must be writable."""
    import os

    from capaudit.resources import cache_dir

    if args.no_cache:
        return None
    if args.cache_dir:
        return Path(args.cache_dir)
    folder = cache_dir() / "prompt_counts"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        writable = os.access(folder, os.W_OK)
    except OSError:
        writable = False
    if writable:
        return folder
    print(f"capaudit prompt-support: note: {folder} cannot be written; pool counts are not cached "
          f"(--cache-dir names another folder)", file=sys.stderr)
    return None


def _run_support(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import atomic_path, check_output_path
    from capaudit.prompts.params import Comparison, PoolFileSpec, PromptSupportParams
    from capaudit.prompts.stage import compare, load_pools
    from capaudit.prompts.support import direction_notes
    from capaudit.summaries.prompt_support import write_prompt_support_tsv

    check_output_path(args.out)
    names = [n for n, _, _ in args.pool]
    if len(set(names)) != len(names):
        raise ValueError(f"--pool names must be unique, got {names}")
    for name, path, _ in args.pool:
        if not path.exists():
            raise FileNotFoundError(f"{path}: --pool '{name}' not found")
    if not Path(args.pairs).exists():
        raise FileNotFoundError(f"{args.pairs}: --pairs file not found")
    cache = pool_cache_dir(args)
    local_s, reference_s = default_surfaces(Path(args.pairs), args.local_field, args.reference_field)
    local_s, reference_s = args.local_surface or local_s, args.reference_surface or reference_s
    comparison = Comparison(args.comparison or default_comparison(local_s, reference_s), Path(args.pairs),
                            args.local_field, args.reference_field, local_s, reference_s,
                            skip_incomplete=args.skip_incomplete)
    params = PromptSupportParams.from_args(args, [PoolFileSpec(n, p, f) for n, p, f in args.pool], comparison, cache)
    pools = load_pools(params, params.pool_files, params.ngram, cache)
    rows, pairs = compare(params, comparison, pools)
    with atomic_path(args.out) as tmp:
        write_prompt_support_tsv(rows, tmp)
    for pool in pools:  # said once the comparison has succeeded (a failed run prints its one error line)
        how = "read from the cache" if pool.cached else ("counted, cached" if cache else "counted (no cache)")
        print(f"capaudit prompt-support: pool '{pool.name}': {pool.records} prompts, {how}"
              + (f" in {cache}" if cache else ""), file=sys.stderr)
    for note in direction_notes(rows):
        print(f"capaudit prompt-support: note: {note}", file=sys.stderr)
    skipped = f", {pairs.skipped} incomplete rows skipped" if pairs.skipped else ""
    print(f"wrote {len(rows)} rows ({len(pools)} pools, {pairs.pairs} pairs{skipped}, {rows[0].blocks} blocks, "
          f"comparison '{comparison.name}') to {args.out}", file=sys.stderr)
    return 0


def _run_prepare(args: argparse.Namespace) -> int:
    from capaudit.prompts.pools import MAX_TOKENS, MIN_TOKENS, UnionSpec, parse_source_arg, prepare_pools

    sources = [parse_source_arg(s) for s in args.source]
    unions: List[UnionSpec] = []
    for u in args.union or []:
        if "=" not in u:
            raise ValueError(f"--union {u!r}: expected NAME=POOL,POOL,...")
        name, members = u.split("=", 1)
        unions.append(UnionSpec(name, tuple(m for m in members.split(",") if m)))
    for src in sources:
        for pf in src.files:
            if not Path(pf.path).exists():
                raise FileNotFoundError(f"{pf.path}: --source '{src.name}' not found")
    prepared = prepare_pools(sources, args.out, unions, getattr(args, "min_tokens", MIN_TOKENS),
                             getattr(args, "max_tokens", MAX_TOKENS), args.max_per_source)
    for name, entry in prepared.manifest["sources"].items():
        s = entry["stats"]
        print(f"{name}: read {s['read']}, raw {s['raw_written']}, filtered {s['filtered_written']}", file=sys.stderr)
    print(f"wrote {Path(args.out) / 'manifest.json'}", file=sys.stderr)
    return 0


def register(subparsers) -> None:
    """Add ``prompt-support`` and ``prompt-pools`` to the ``capaudit`` command."""
    sp = subparsers.add_parser(
        "prompt-support",
        help="hashed n-gram prompt-pool support with block bootstrap (spec §3.2)",
        description="Compare the local and reference captions of a pairs file against prompt pools "
        "(JSD and prompt-mass support per block, block-delta bootstrap). Pools are used as given.",
    )
    sp.add_argument("--pairs", required=True, help="pairs JSONL or Parquet, in block order")
    sp.add_argument("--local-field", default="local_caption")
    sp.add_argument("--reference-field", default="reference_caption")
    sp.add_argument("--pool", action="append", required=True, type=_pool_arg, metavar="NAME=FILE[:field]",
                    help="prompt pool: txt (one prompt per line) or JSONL with a 'prompt' field; repeatable")
    sp.add_argument("--comparison", default=None,
                    help="comparison name; it seeds the bootstrap (default: LOCAL_vs_REFERENCE from the surface "
                         "names, never from the file name)")
    sp.add_argument("--skip-incomplete", action="store_true",
                    help="drop rows lacking either caption field instead of failing (raw files, not fair slices)")
    sp.add_argument("--local-surface", default=None,
                    help="local surface name (default: the slice manifest's local role beside --pairs, else --local-field)")
    sp.add_argument("--reference-surface", default=None,
                    help="reference surface name (default: the slice manifest's reference role, else --reference-field)")
    sp.add_argument("--budget", type=budget, default=UNSET, help="first B lex units of each caption, or 'full' (default 64)")
    sp.add_argument("--ngram", type=positive_int, default=UNSET, help="n-gram order (default 2)")
    sp.add_argument("--block-size", type=positive_int, default=UNSET, help="pairs per block (default 5000)")
    sp.add_argument("--reps", type=positive_int, default=UNSET, help="bootstrap replicates (default 2000)")
    sp.add_argument("--seed", type=int, default=UNSET, help="bootstrap seed (default 0)")
    sp.add_argument("--alpha", type=float, default=UNSET, help="smoothing of the JSD (default 1e-12)")
    sp.add_argument("--hash-buckets", type=positive_int, default=UNSET, help="hashed n-gram buckets (default 262144)")
    sp.add_argument("--max-caption-records", type=positive_int, default=UNSET, help="default 250000")
    sp.add_argument("--max-prompt-records", type=positive_int, default=UNSET, help="default 1000000")
    sp.add_argument("--cache-dir", default=None,
                    help="where pool counts are kept and reused (.npy keyed by the pool file's digest, n, buckets, "
                         "field, limit; default $CAPAUDIT_CACHE/prompt_counts)")
    sp.add_argument("--no-cache", action="store_true", help="count every pool afresh; read and write no cache")
    sp.add_argument("--workers", type=positive_int, default=UNSET, help="processes for counting pool n-grams and caption blocks (same results)")
    sp.add_argument("--engine", choices=("local", "ray"), default=UNSET,
                    help="where pool chunks and caption block runs are counted: this machine or Ray (same results)")
    sp.add_argument("--address", default=UNSET, help="Ray cluster address (default: RAY_ADDRESS; unset: a local cluster)")
    sp.add_argument("--out", required=True, help="output TSV (spec §3.2 columns)")
    sp.set_defaults(func=_run_support)

    pp = subparsers.add_parser("prompt-pools", help="prompt-pool preparation (spec §3.1)")
    psub = pp.add_subparsers(dest="pools_command", metavar="ACTION")
    prep = psub.add_parser("prepare", help="normalise, de-duplicate, length/safety filter; write pools + manifest")
    prep.add_argument("--source", action="append", required=True, metavar="NAME=FILE[:field]",
                      help="raw source: txt/jsonl/json/csv/tsv/parquet file or folder of .txt; repeatable")
    prep.add_argument("--union", action="append", metavar="NAME=POOL,POOL,...",
                      help="also write a de-duplicated union of prepared pools (in order)")
    prep.add_argument("--min-tokens", type=nonnegative_int, default=UNSET, help="default: capaudit.prompts.pools.MIN_TOKENS (3)")
    prep.add_argument("--max-tokens", type=positive_int, default=UNSET, help="default: capaudit.prompts.pools.MAX_TOKENS (256)")
    prep.add_argument("--max-per-source", type=positive_int, default=None)
    prep.add_argument("--out", required=True, help="output folder")
    prep.set_defaults(func=_run_prepare)
    pp.set_defaults(func=lambda args: (pp.print_help(), 2)[1])
