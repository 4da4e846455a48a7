"""``capaudit recap run|export|policies`` (reference-spec §6).

    capaudit recap run --images DIR|MANIFEST.jsonl|SHARDS.tar|FILE.parquet --policy NAME --url URL \
        --model NAME --out STORE [--image-mode data|file] [--concurrency N] [--timeout S] [--retries N] [--resume] \
        [--allow-failures]
    capaudit recap export --store STORE --out SURFACE.jsonl|SURFACE.parquet [--mask-pii]
    capaudit recap policies

The options of ``run`` behave as in ``capaudit llm run`` (several ``--url`` for data-parallel
endpoints, ``--resume`` skips answered images, ``--only-failed``, ``--overwrite``). Everything that
can be checked is checked before the store is touched: numeric options (one line naming the
option), ``--out`` and ``--stats-json`` paths, the policy, the metadata and the inputs (every
manifest line, every Parquet file's columns; an input without images is an error).

Exit status of ``run``: 0 when every image ended captioned; 3 when images remain failed after the
retries (the summary line counts them; ``--resume`` asks them again) unless ``--allow-failures``,
which keeps 0 and says how many failed; 130 when interrupted; 1 on bad input; 2 on a bad option.
The summary line is ``capaudit recap run: N images: A captioned, F failed (...), S skipped ...;
stats {json}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from typing import Any

from capaudit.argtypes import nonnegative_int, positive_int
from capaudit.errors import InputError

#: exit status when images remain failed at the end (as ``--fail-on-failed`` of ``llm run``)
FAILED_EXIT = 3


def register(subparsers: Any) -> None:
    """Add ``recap`` (run, export, policies) to the ``capaudit`` command."""
    from capaudit.llm.cli import add_endpoint_options, add_run_control_options

    rc = subparsers.add_parser("recap", help="caption images with a policy into a resumable store; export surfaces")
    sub = rc.add_subparsers(dest="recap_command", metavar="RECAP_COMMAND")

    run = sub.add_parser("run", help="caption images through OpenAI-compatible vision endpoints")
    run.add_argument("--images", required=True, action="append",
                     help="a folder of images, a manifest .jsonl, WebDataset .tar shard(s) (glob allowed) or a "
                          ".parquet file with image bytes or paths (repeat for several inputs)")
    run.add_argument("--policy", required=True,
                     help="policy name (photorealistic, anime-booru, naive, naive-greedy; reference-photorealistic and "
                          "reference-anime_booru: the reference study's published configs) or a policy or published recap-config YAML path")
    run.add_argument("--policies-dir", help="folder of policy YAML files (default params/policies)")
    add_endpoint_options(run, timeout=180.0, backoff=2.0, timeout_help="seconds per attempt (spec §6: 180)",
                         reasks_help="extra attempts on an empty or unreadable answer")
    run.add_argument("--revision", help="model revision hashed into request ids (default: none; the offline "
                                        "captioner's composition version for capaudit-offline-coco-captioner)")
    run.add_argument("--out", required=True, help="recap store folder (created; responses/, run.json, runs.jsonl)")
    run.add_argument("--image-mode", choices=["data", "file"], default="data",
                     help="data: resized JPEG q90 data URLs (default); file: file:// URLs of the originals (<= 64 MiB)")
    run.add_argument("--workers", type=nonnegative_int, default=2,
                     help="image-preprocessing processes (0 = one thread in the runner process)")
    run.add_argument("--resume", action="store_true", help="continue --out: skip images already captioned")
    run.add_argument("--only-failed", action="store_true", help="ask only images whose rows in --out all failed")
    run.add_argument("--overwrite", action="store_true", help="delete an existing --out store first")
    run.add_argument("--limit", type=positive_int, help="stop after this many input images")
    run.add_argument("--metadata", help="JSONL/Parquet of context fields keyed by image id (anime-booru tags)")
    run.add_argument("--metadata-key", default="image_id", help="key field of --metadata (default image_id)")
    run.add_argument("--id-column", help="Parquet input: the image id column")
    run.add_argument("--image-column", help="Parquet input: the image bytes/path column")
    add_run_control_options(run, unit="image")
    run.set_defaults(func=cmd_run)

    ex = sub.add_parser("export", help="write a recap store as a caption surface (JSONL or Parquet)")
    ex.add_argument("--store", required=True, help="recap store folder (the --out of recap run)")
    ex.add_argument("--out", required=True, help="SURFACE.jsonl or SURFACE.parquet")
    ex.add_argument("--mask-pii", action="store_true",
                    help="mask e-mails, phone numbers, ids, addresses and names as [email] [phone] [id] [address] [name]")
    ex.add_argument("--pii-names", choices=["rules", "ner", "off"], default="rules",
                    help="how names are found when masking: cue rules (default), + spaCy PERSON entities, or not at all")
    ex.set_defaults(func=cmd_export)

    pl = sub.add_parser("policies", help="list the captioning policies")
    pl.add_argument("--policies-dir")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_policies)

    rc.set_defaults(func=lambda args: (rc.print_help(), 2)[1])


def check_seconds(args: argparse.Namespace) -> None:
    """The float options ``llm`` declares without a range: finite and >= 0, else one line naming them."""
    for opt in ("--backoff", "--backoff-max", "--drain-timeout"):
        v = getattr(args, opt[2:].replace("-", "_"))
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"argument {opt}: expected a finite number >= 0, got {v!r}")


def summary_line(d: dict, allow_failures: bool) -> str:
    """``capaudit recap run: N images: A captioned, F failed (...), ...; stats {json}``."""
    failed = int(d.get("failed", 0)) + int(d.get("image_failed", 0))
    kinds = dict(d.get("failed_by_kind") or {})
    if d.get("image_failed"):
        kinds["image"] = int(d["image_failed"])
    detail = f" ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))})" if kinds else ""
    tail = ""
    if failed:
        tail = ("; failures allowed (--allow-failures)" if allow_failures
                else "; rerun with --resume to ask them again (or pass --allow-failures)")
    if kinds.get("context"):  # refused again on --resume: say what would help
        tail += (f"; the {kinds['context']} over the model's context are refused again on --resume: serve a larger "
                 "max-model-len or lower the policy's max_tokens (--no-context-check sends them anyway)")
    if d.get("context_check_off"):
        tail += f"; the context check stopped ({d['context_check_off']}): the rest were sent unchecked"
    return (f"capaudit recap run: {d.get('images', 0)} images: {d.get('answered', 0)} captioned, {failed} failed"
            f"{detail}, {d.get('skipped_answered', 0)} skipped (answered before), {d.get('duplicate_ids', 0)} "
            f"duplicate ids{tail}; stats {json.dumps(d, sort_keys=True)}")


def cmd_run(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import check_output_dir, check_output_path

    from .inputs import load_metadata, open_images
    from .policies import load_policy
    from .runner import StoreLayout, recap
    from .stage import model_revision

    check_seconds(args)
    out = check_output_dir(args.out)
    if args.stats_json:
        check_output_path(args.stats_json)
    policy = load_policy(args.policy, args.policies_dir)
    inputs = [open_images(s, id_column=args.id_column, image_column=args.image_column,
                          context_fields=policy.context_fields) for s in args.images]
    for i in inputs:
        i.check()
    metadata = load_metadata(args.metadata, policy.context_fields, args.metadata_key) if args.metadata else None
    if args.overwrite and out.exists():
        layout = StoreLayout(out)
        if not layout.manifest.exists() and not layout.responses.exists():
            raise ValueError(f"--out {out}: refusing to delete a folder that is not a recap store")
        shutil.rmtree(out)
    revision = model_revision(args.model, args.revision, args.url[0])  # else the version the server declares
    stats = recap(
        inputs, policy, out, args.url, args.model, revision=revision, image_mode=args.image_mode,
        concurrency=args.concurrency, timeout=args.timeout, retries=args.retries, reasks=args.reasks,
        workers=args.workers, resume=bool(args.resume or args.only_failed), only_failed=args.only_failed,
        progress=not args.no_progress, backoff_base=args.backoff, backoff_max=args.backoff_max,
        api_key=os.environ.get(args.api_key_env) if args.api_key_env else None, drain_timeout=args.drain_timeout,
        metadata=metadata, limit=args.limit, inputs_description=[i.describe() for i in inputs], probe=args.probe,
        context_check=args.context_check,
    )
    d = stats.to_dict()
    d["skipped_non_image_files"] = sum(i.stats.skipped_non_image for i in inputs)
    d["failed_total"] = stats.failed + stats.image_failed
    print(summary_line(d, args.allow_failures), file=sys.stderr)
    if args.stats_json:
        from capaudit.io.atomic import write_text_atomic

        write_text_atomic(args.stats_json, json.dumps(d, indent=2, sort_keys=True) + "\n")
    if stats.interrupted:
        return 130
    if d["failed_total"] and not args.allow_failures:
        return FAILED_EXIT
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .export import export_surface

    res = export_surface(args.store, args.out, mask=args.mask_pii, pii_names=args.pii_names)
    masked = f", PII spans masked: {sum(res.pii_spans.values())}" if args.mask_pii else ""
    running = ""
    if res.in_progress:
        running = (f"; IN PROGRESS: a run is still writing {args.store}, this is a snapshot"
                   + (f" ({len(res.cut_last_lines)} cut last line(s) not counted)" if res.cut_last_lines else ""))
    print(f"capaudit recap export: {res.rows} captioned images -> {res.path}; {res.failures} failed images -> "
          f"{res.failures_path}{masked}; models: {', '.join(res.models)}{running}", file=sys.stderr)
    return 0


def cmd_policies(args: argparse.Namespace) -> int:
    from .policies import load_policies

    pols = load_policies(args.policies_dir)
    if args.json:
        print(json.dumps({n: p.to_dict() for n, p in pols.items()}, indent=2))
    else:
        for n, p in pols.items():
            print(f"{n}\tv{p.version}\t{p.prompt_version}\t{p.description}")
    return 0


__all__ = ["register", "cmd_run", "cmd_export", "cmd_policies"]
