"""``capaudit alttext filter`` (CC3M/CC12M-style funnels) and ``capaudit coverage`` (long-tail concept
coverage), issue 14's command-line contract."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional


def _source(args: argparse.Namespace) -> dict:
    inp = str(args.input)
    spec: dict
    if inp.startswith("hf:"):
        spec = {"format": "hf", "hf_path": inp[3:], "split": args.split}
        if args.hf_name:
            spec["hf_name"] = args.hf_name
    else:
        spec = {"file": inp}
        if args.format:
            spec["format"] = args.format
        if args.no_header:
            spec["header"] = False
        if args.columns:
            spec["columns"] = [c.strip() for c in args.columns.split(",")]
    if args.max_rows is not None:
        spec["max_rows"] = args.max_rows
    return spec


def _input_args(p: argparse.ArgumentParser, text_help: Optional[str] = None) -> None:
    p.add_argument("--input", required=True,
                   help="Parquet file/folder, JSONL, JSON, TSV/CSV, WebDataset .tar shard(s) or hf:<dataset id>")
    if text_help is None:
        p.add_argument("--text-field", required=True, help="field holding the alt-text / caption")
    else:
        p.add_argument("--text-field", default=None, help=text_help)
    p.add_argument("--format", default=None, help="override the format inferred from the suffix")
    p.add_argument("--no-header", action="store_true", help="CSV/TSV without a header row (use --columns)")
    p.add_argument("--columns", default=None, help="comma-separated column names for a header-less CSV/TSV")
    p.add_argument("--split", default="train", help="Hugging Face split (hf: inputs)")
    p.add_argument("--hf-name", default=None, help="Hugging Face config name (hf: inputs)")
    from ..argtypes import positive_int

    p.add_argument("--max-rows", type=positive_int, default=None, help="stop after this many input rows (>= 1)")


def _engine_args(p: argparse.ArgumentParser) -> None:
    """``--engine``, ``--workers``, ``--address``, ``--shards`` (issue 15; the ``text-stats`` flags)."""
    from ..argtypes import add_engine_options

    add_engine_options(p, same="output")


def _engine_kw(args: argparse.Namespace) -> dict:
    return {"engine": args.engine, "workers": args.workers, "address": args.address, "shards": args.shards}


def register(sub: argparse._SubParsersAction) -> None:
    from ..argtypes import positive_int

    at = sub.add_parser("alttext", help="alt-text filter funnels (CC3M-style, CC12M-style)",
                        description="Alt-text filtering: CC3M/CC12M-style pipelines as filter funnels.")
    atsub = at.add_subparsers(dest="alttext_command", metavar="SUBCOMMAND")
    f = atsub.add_parser("filter", help="run a pipeline over an alt-text file",
                         description="Stream rows through the pipeline's blocks; write kept rows (JSONL), dropped "
                                     "rows with the first rule that dropped them (JSONL) and the funnel (CSV).")
    _input_args(f)
    f.add_argument("--pipeline", required=True,
                   help="cc3m, cc12m, or a YAML file with a list of blocks (see alttext/data/pipelines.yaml)")
    f.add_argument("--out", required=True, help="kept rows (JSONL)")
    f.add_argument("--funnel", required=True, help="funnel table (CSV: rows in / dropped / kept per rule)")
    f.add_argument("--dropped", default=None,
                   help="dropped rows (JSONL, with dropped_by); default <out stem>.dropped.jsonl; '-' for none")
    f.add_argument("--manifest", default=None, help="optional JSON manifest (pipeline, parameters, funnel)")
    f.add_argument("--set", action="append", default=[], metavar="BLOCK.PARAM=VALUE",
                   help="override a block parameter, e.g. rare_words.min_count=3 (value parsed as YAML)")
    f.add_argument("--batch-size", type=positive_int, default=256)
    f.add_argument("--dedup-against", default=None, metavar="URLS_FILE",
                   help="de-duplicate against this URL list (TSV/CSV/JSONL/Parquet; e.g. the CC3M validation TSV): "
                        "a first funnel step url_dedup_<label> drops rows whose normalised URL is in it")
    f.add_argument("--dedup-url-field", default="url", help="the URL field of --dedup-against (default url)")
    f.add_argument("--dedup-columns", default=None,
                   help="column names of a header-less --dedup-against CSV/TSV, e.g. caption,url")
    f.add_argument("--dedup-label", default="urls", help="name of the URL list in the funnel (default urls)")
    _engine_args(f)
    f.set_defaults(func=_filter_main)
    from .person import MATCH_RULES, NAME_FILTERS, SPLITS

    pe = atsub.add_parser("person-eval", help="precision/recall of the <PERSON> substitution on gold labels",
                          description="Run the person_substitution span finder (spaCy NER + name filter) on "
                                      "hand-labelled rows and print span-level precision/recall (JSON).")
    pe.add_argument("--labels", default=None,
                    help="person-labels YAML (default: the shipped alttext/data/person_labels.yaml)")
    pe.add_argument("--name-filter", choices=NAME_FILTERS, default="name_shape",
                    help="name_shape (default: person_filters.yaml rules) or ner_only (every PERSON entity)")
    pe.add_argument("--match", choices=MATCH_RULES, default="overlap",
                    help="span match rule: overlap (one-to-one, ranges intersect; default) or exact")
    pe.add_argument("--split", choices=SPLITS, default="all", help="tune, held_out or all labelled rows")
    pe.add_argument("--out", default=None, help="also write the JSON here")
    pe.set_defaults(func=_person_eval_main)
    at.set_defaults(func=lambda a: (at.print_help(), 2)[1])

    from .coverage import COVERAGE_LAYOUTS

    c = sub.add_parser("coverage", help="long-tail concept coverage of a caption file",
                       description="Count class mentions (lemmatised, plurals, multi-word names, longest first) "
                                   "of a vocabulary in a caption file; write COVERAGE.json. Input layouts: "
                                   + COVERAGE_LAYOUTS + ".")
    _input_args(c, text_help="field holding the caption (a string or a list of strings); omit it for a JSON "
                             "{key: caption or [captions]} file such as the Karpathy COCO captions")
    c.add_argument("--vocabulary", required=True,
                   help="nocaps_ood, lvis, objects365 (also coco80, open_images) or a text file, one class per line")
    c.add_argument("--out", required=True, help="COVERAGE.json")
    c.add_argument("--url-field", default=None, help="URL field for the web-domain distribution (with --detail)")
    c.add_argument("--detail", action="store_true",
                   help="add the >=K curve, frequency groups, top classes/tokens and domains to the JSON")
    c.add_argument("--lemmatiser", choices=("wordnet", "rules"), default="wordnet")
    _engine_args(c)
    c.set_defaults(func=_coverage_main)


def _overrides(items) -> Optional[dict]:
    import yaml

    from capaudit.errors import InputError

    out: dict = {}
    for it in items:
        if "=" not in it or "." not in it.split("=", 1)[0]:
            raise InputError(f"--set expects BLOCK.PARAM=VALUE, got {it!r}")
        key, value = it.split("=", 1)
        block, param = key.split(".", 1)
        out.setdefault(block, {})[param] = yaml.safe_load(value)
    return out or None


def _with_dedup(args: argparse.Namespace):
    """The ``--pipeline`` with a ``url_dedup`` first step over ``--dedup-against`` (checked)."""
    from capaudit.errors import InputError

    from .funnel import build_pipeline, dedup_block, with_dedup

    if not args.dedup_against:
        raise InputError("--dedup-columns needs --dedup-against", field="--dedup-columns")
    if not Path(args.dedup_against).is_file():
        raise InputError("--dedup-against: no such file", path=args.dedup_against, field="--dedup-against")
    label = str(args.dedup_label)
    if not label.replace("_", "").replace("-", "").isalnum():
        raise InputError(f"--dedup-label must be a name (letters, digits, '_', '-'), got {label!r}",
                         field="--dedup-label")
    spec = {"label": label, "url_field": args.dedup_url_field, "file": str(args.dedup_against)}
    if args.dedup_columns:
        spec.update(header=False, columns=[c.strip() for c in args.dedup_columns.split(",")])
    return with_dedup(build_pipeline(args.pipeline, overrides=_overrides(args.set)), dedup_block(spec))


def _filter_main(args: argparse.Namespace) -> int:
    from .file_runs import filter_file

    out = Path(args.out)
    if args.dropped == "-":
        dropped = None
    elif args.dropped:
        dropped = Path(args.dropped)
    else:
        dropped = out.with_name(out.name[: -len(".jsonl")] + ".dropped.jsonl" if out.name.endswith(".jsonl")
                                else out.name + ".dropped.jsonl")
    pipeline = args.pipeline
    if args.dedup_against or args.dedup_columns:
        pipeline = _with_dedup(args)
    funnel = filter_file(_source(args), args.text_field, pipeline, out, args.funnel, dropped,
                         batch_size=args.batch_size, manifest_path=args.manifest, overrides=_overrides(args.set),
                         **_engine_kw(args))
    print(f"{funnel.pipeline}: {funnel.input_rows} rows in, {funnel.kept} kept, {funnel.dropped} dropped "
          f"({funnel.seconds:.1f} s)", file=sys.stderr)
    return 0


def _person_eval_main(args: argparse.Namespace) -> int:
    from capaudit.io.atomic import write_json_atomic

    from .person import evaluate_person_substitution

    res = evaluate_person_substitution(args.labels, name_filter=args.name_filter, match_rule=args.match,
                                       splits=(args.split,))[0]
    out = {"person_substitution": res}
    if args.out:
        write_json_atomic(args.out, out)
    print(json.dumps(out, indent=1))
    return 0


def _coverage_main(args: argparse.Namespace) -> int:
    from .file_runs import coverage_file

    res = coverage_file(_source(args), args.text_field, args.vocabulary, args.out, url_field=args.url_field,
                        detail=args.detail, lemmatiser=args.lemmatiser, **_engine_kw(args))
    print(json.dumps({k: res[k] for k in ("records", "classes", "instances_total", "per_million_median",
                                          "classes_at_least")}), file=sys.stderr)
    return 0
