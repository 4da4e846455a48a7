"""``capaudit detail score|select|subgraphs|run`` (issue 13).

    capaudit detail score --input CAPTIONS.jsonl --caption-field caption --image-field image \
        --id-field id --graphs claims|llm --grounding coco:INSTANCES.json [--grounding coco:MORE.json] \
        [--grounding coco-panoptic:PANOPTIC.json[:PNGDIR]] [--grounding seg:package.module:function] \
        --out SCORES.jsonl [--itm annotation_precision|clip:PATH|open_clip:ARCH[:PRETRAINED]|none] \
        [--relation-ends subject|both|split] [--length-unit lex|words] \
        [--url URL --model NAME [--responses STORE] ...]        # --graphs llm, as `capaudit llm run`
        [--engine local|ray] [--workers N] [--address ADDR] [--shards N]   # --graphs claims: same rows on any engine
    capaudit detail select --scores SCORES.jsonl --itm-field itm --k K --t T --strategy itm_cd \
        --out SUBSET.jsonl [--seed 0]                             # + SUBSET.parquet, SUBSET.wds.json
    capaudit detail subgraphs --scores SCORES.jsonl --grounding coco:INSTANCES.json --out SUB.jsonl \
        [--measure icr --measure aod] [--fractions 0.2,0.4,0.6,0.8] [--tolerance 0.05] [--seed 0] \
        [--realiser template | --realiser llm --url URL --model NAME] [--relation-ends subject|both|split]
    capaudit detail run [--params params/demo.yaml]

K and T are counts (``30000``) or proportions of the pool (``0.6``). ``score`` with ``--engine``,
``--workers`` or ``--shards`` cuts JSONL / Parquet input (files, a folder, a glob, an fsspec URL) into
shards and writes the same rows, in input order, as a single-process run
(:mod:`capaudit.detail.sharded`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, List, Union


def register(subparsers: Any) -> None:
    """Add ``detail`` and its subcommands to the ``capaudit`` command."""
    from capaudit.argtypes import add_engine_options, nonnegative_int, number_in, numbers_in, positive_float, positive_int

    from .metrics import LENGTH_UNITS, RELATION_ENDS
    from .params import SCORE_GROUNDING, SCORE_ITM, DetailParams, SelectionParams, SubgraphParams, SurfaceSpec
    from .selection import STRATEGIES

    det = subparsers.add_parser("detail", help="caption detailness: scene graphs, ICR, AOD, CD, selection")
    sub = det.add_subparsers(dest="detail_command", metavar="DETAIL_COMMAND")

    s = sub.add_parser("score", help="ICR (Eq. 2), AOD (Eq. 4), CD (Eq. 5) per caption")
    s.add_argument("--input", required=True,
                   help="caption JSONL or Parquet: a file, a folder, a glob or an fsspec URL")
    s.add_argument("--caption-field", default=SurfaceSpec.caption_field)
    s.add_argument("--image-field", default=SurfaceSpec.image_field,
                   help="image path or file name (matched to annotations by file name)")
    s.add_argument("--id-field", default=SurfaceSpec.id_field)
    s.add_argument("--graphs", choices=["claims", "llm"], default=DetailParams.parser,
                   help="claims: offline parser (claims units + spaCy, heuristic); llm: a model via --url/--model")
    s.add_argument("--grounding", action="append", default=list(SCORE_GROUNDING), metavar="SPEC",
                   help="coco:INSTANCES.json (repeatable, merged; things-only ICR), coco_mini, "
                        "coco-panoptic:PANOPTIC.json[:PNGDIR] (things+stuff ICR), seg:module:function, or none")
    s.add_argument("--out", required=True, help="scores JSONL (a .manifest.json is written beside it)")
    s.add_argument("--itm", default=SCORE_ITM,
                   help="annotation_precision | clip:PATH | open_clip:ARCH[:PRETRAINED] | none")
    s.add_argument("--image-root", help="folder for relative image paths (CLIP / segmentation backends)")
    s.add_argument("--relation-ends", choices=RELATION_ENDS, default=DetailParams.relation_ends,
                   help="how a relation counts in AOD and CD: subject (default, Eq. 3: once, for its subject), "
                        "both (once at each end: edges connected to a node) or split (1/2 at each end)")
    s.add_argument("--length-unit", choices=LENGTH_UNITS, default=DetailParams.length_unit,
                   help="Length(c) of CD (default lexical units)")
    add_engine_options(s, same="rows", shards_default="~16 MiB pieces, at least one per worker")
    g = s.add_argument_group("LLM parser (--graphs llm; same meaning as `capaudit llm run`)")
    g.add_argument("--url", action="append", default=[], help="base URL of an OpenAI-compatible server (repeatable)")
    g.add_argument("--model", help="model name sent to the server (hashed into request ids)")
    g.add_argument("--revision", help="model revision (hashed into request ids)")
    g.add_argument("--responses", help="response store (default: OUT with .scene_graphs.jsonl)")
    g.add_argument("--concurrency", type=positive_int, default=DetailParams.concurrency)
    g.add_argument("--timeout", type=positive_float, default=DetailParams.timeout, help="seconds per attempt")
    g.add_argument("--retries", type=nonnegative_int, default=DetailParams.retries)
    g.add_argument("--dialect", choices=["vllm", "openai", "llamacpp"], default=DetailParams.dialect)
    g.add_argument("--max-tokens", type=positive_int, default=DetailParams.max_tokens)
    s.set_defaults(func=cmd_score)

    sel = sub.add_parser("select", help="ITM pruning to K then top T by CD (and baselines / ablations)")
    sel.add_argument("--scores", required=True, help="scores JSONL from `capaudit detail score`")
    sel.add_argument("--itm-field", default="itm")
    sel.add_argument("--k", type=count_or_proportion,
                     help="pairs kept by ITM pruning: a count >= 1 or a proportion in (0, 1] (0.6)")
    sel.add_argument("--t", type=count_or_proportion, help="pairs selected: a count >= 1 or a proportion in (0, 1]")
    sel.add_argument("--strategy", choices=list(STRATEGIES), default="itm_cd")
    sel.add_argument("--seed", type=nonnegative_int, default=SelectionParams.seed,
                     help="seed of the random baseline and of the tie order among equal scores (a seeded hash of "
                          "the row id; the manifest reports the ties at each cut, itm_ties)")
    sel.add_argument("--out", required=True, help="SUBSET.jsonl (+ SUBSET.parquet and SUBSET.wds.json)")
    sel.set_defaults(func=cmd_select)

    sg = sub.add_parser("subgraphs", help="controlled subgraphs at fractions of ICR or AOD, realised as captions")
    sg.add_argument("--scores", required=True, help="scores JSONL (its scene_graph field)")
    sg.add_argument("--grounding", action="append", default=[], metavar="SPEC", help="as for score (needed for icr)")
    sg.add_argument("--out", required=True)
    sg.add_argument("--measure", action="append", choices=["icr", "aod"], default=[])
    sg.add_argument("--fractions", type=numbers_in(0, 1, "fractions", lo_open=True, hi_open=True),
                    default=SubgraphParams.fractions,
                    help="comma-separated target fractions, each in (0, 1) (default 0.2,0.4,0.6,0.8)")
    sg.add_argument("--tolerance", type=number_in(0, 1, hi_open=True), default=SubgraphParams.tolerance,
                    help="allowed |ratio - fraction|, in [0, 1)")
    sg.add_argument("--seed", type=nonnegative_int, default=SubgraphParams.seed)
    sg.add_argument("--relation-ends", choices=RELATION_ENDS, default=DetailParams.relation_ends,
                    help="AOD relation count, as for score (default subject, Eq. 3)")
    sg.add_argument("--realiser", choices=["template", "llm"], default="template")
    sg.add_argument("--url", action="append", default=[])
    sg.add_argument("--model")
    sg.add_argument("--responses", help="response store for --realiser llm (default: OUT with .realise.jsonl)")
    sg.set_defaults(func=cmd_subgraphs)

    r = sub.add_parser("run", help="run the detail stage of a params file")
    r.add_argument("--params", default="params/demo.yaml")
    r.set_defaults(func=cmd_run)

    det.set_defaults(func=lambda args: (det.print_help(), 2)[1])


def count_or_proportion(text: str) -> Union[int, float]:
    """K / T on the command line: a count >= 1 (``30000``) or a proportion in (0, 1] (``0.6``)."""
    from .selection import parse_count

    try:
        value = parse_count(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count >= 1 or a proportion in (0, 1], got {text!r}") from None
    if (isinstance(value, float) and not 0.0 < value <= 1.0) or (isinstance(value, int) and value < 1):
        raise argparse.ArgumentTypeError(f"expected a count >= 1 or a proportion in (0, 1], got {text!r}")
    return value


def _with_suffix(out: str, suffix: str) -> Path:
    p = Path(out)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + suffix)


def cmd_score(args: argparse.Namespace) -> int:
    from capaudit.errors import InputError
    from capaudit.text.sharding import shardable

    from .backends import build_backends
    from .params import DetailParams
    from .score import score_file

    params = DetailParams.from_args(args)
    sharded = params.sharded or (
        shardable(args.input) and (not Path(args.input).is_file() or args.input.lower().endswith(".parquet")))
    if not params.offline_parser:
        if sharded:
            raise InputError("--graphs llm is not sharded (its model calls already run --concurrency at a time; "
                             "fan requests out with `capaudit llm run --engine ray`): use one local caption file "
                             "with --engine local --workers 1", field="--engine")
        if not params.urls or not params.model:
            raise InputError("--graphs llm needs --url and --model", field="--url")
    if sharded:
        return _score_sharded(args, params)
    parser, grounding, itm = build_backends(params, params.responses or _with_suffix(args.out, ".scene_graphs.jsonl"),
                                            itm_parser=False, itm_field="--itm")
    man = score_file(args.input, args.out, parser, grounding, itm, args.caption_field, args.image_field,
                     args.id_field or None, params.relation_ends, params.length_unit)
    _report(man, args.out)
    return 0


def _report(man: Any, out: str) -> None:
    c = man["counts"]
    parser = (man.get("parser") or {}).get("name")
    grounding = (man.get("grounding") or {}).get("name") or "none"
    print(f"capaudit detail score: {c['rows']} captions ({c['icr_ok']} with ICR, {c['icr_unavailable']} without a "
          f"grounding source, {c['parse_failed']} unparsed); parser {parser}; grounding {grounding} ({man['icr']}); "
          f"AOD/CD relations: {man['relation_ends']} -> {out}", file=sys.stderr)


def _score_sharded(args: argparse.Namespace, params: Any) -> int:
    """``detail score`` on an engine: JSONL / Parquet shards; another local file (e.g. JSONL named
    .txt) is read here and its records are cut into slices."""
    from capaudit.errors import InputError
    from capaudit.text.sharding import shardable

    from .backends import backend_spec
    from .sharded import score_file_engine

    spec = backend_spec(params)
    eng = params.engine
    if shardable(args.input):
        man = score_file_engine(args.input, args.out, spec, args.caption_field, args.image_field,
                                args.id_field or None, params.relation_ends, params.length_unit, **eng.kwargs())
    elif eng.engine == "local" and Path(args.input).is_file():
        man = _score_records_file(args, params, spec)
    else:
        raise InputError("--engine ray needs JSONL or Parquet input (files, a folder, a glob or an fsspec URL)"
                         if eng.engine == "ray" else "no such caption file, or not JSONL / Parquet", path=args.input)
    _report(man, args.out)
    return 0


def _score_records_file(args: argparse.Namespace, params: Any, spec: Any) -> Any:
    """A local caption file the engine cannot cut (not .jsonl / .parquet by name): records read
    here, scored in slices on ``--workers`` processes; output as :func:`score_file` writes it."""
    import time

    from capaudit.io.atomic import atomic_path, write_json_atomic

    from .grounding import icr_name
    from .metrics import relation_ends_label
    from .score import manifest_path, read_caption_records
    from .sharded import backend_info, score_records_engine

    t0 = time.monotonic()
    eng, rel_ends = params.engine, params.relation_ends
    records = read_caption_records(args.input, args.caption_field, args.image_field, args.id_field or None)
    built = spec.build() if eng.workers <= 1 else None
    rows = score_records_engine(records, spec, rel_ends, params.length_unit, engine="local",
                                workers=eng.workers, shards=eng.shards, backends=built)
    counts = {"rows": 0, "icr_ok": 0, "icr_unavailable": 0, "parse_failed": 0}
    key = {"ok": "icr_ok", "unavailable": "icr_unavailable", "parse_failed": "parse_failed"}
    out = Path(args.out)
    with atomic_path(out) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            for row in rows:
                counts["rows"] += 1
                counts[key[row["icr_status"]]] += 1
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    info = backend_info(*(built or spec.build()))
    manifest = {"command": "capaudit detail score", "input": str(args.input), "output": out.name,
                "fields": {"caption": args.caption_field, "image": args.image_field, "id": args.id_field or None},
                **info, "relation_ends": rel_ends,
                "relation_ends_label": relation_ends_label(rel_ends),
                "icr": (info.get("grounding") or {}).get("icr") or icr_name([]), "length_unit": params.length_unit,
                "counts": counts,
                "engine": {"engine": "local", "workers": eng.workers, "shards": eng.shards},
                "elapsed_sec": round(time.monotonic() - t0, 3)}
    write_json_atomic(manifest_path(out), manifest)
    return manifest


def cmd_select(args: argparse.Namespace) -> int:
    from .grounding import icr_name
    from .score import read_score_rows
    from .selection_report import select_subset

    rows = read_score_rows(args.scores)

    def named(sel: Any) -> dict:  # the backends of the selected rows, as the scores name them
        return {f: sorted({str(rows[i].get(f)) for i in sel.indices if rows[i].get(f) is not None})
                for f in ("parser", "grounding", "itm_scorer", "relation_ends", "icr_kind")}

    sel, paths, st = select_subset(rows, args.strategy, args.k, args.t, args.seed, args.out, named,
                                   itm_field=args.itm_field, where=args.scores, extra={"scores": str(args.scores)})
    backends = named(sel)
    fmt = lambda v: "n/a" if v is None else f"{v:.4f}"  # noqa: E731
    icr = icr_name(backends["icr_kind"]) if backends["icr_kind"] else "ICR (kind not recorded in the scores)"
    rel = "/".join(backends["relation_ends"]) or "relation count not recorded"
    ties = "" if sel.itm_ties is None else f"; {sel.itm_ties} tied at the ITM cut (seeded tie order, seed {args.seed})"
    print(f"capaudit detail select: {st['strategy']}: {st['selected']} of {st['pool']} (K={st['k']}, T={st['t']}); "
          f"avg {icr} {fmt(st['avg_icr'])}, AOD ({rel}) {fmt(st['avg_aod'])}, length {fmt(st['avg_length'])}, "
          f"ITM {fmt(st['avg_itm'])}{ties} -> {paths['jsonl']}, {paths['parquet'].name}, {paths['manifest'].name}",
          file=sys.stderr)
    return 0


def cmd_subgraphs(args: argparse.Namespace) -> int:
    from capaudit.errors import InputError
    from capaudit.io.atomic import atomic_path

    from .graph import SceneGraph
    from .grounding import parse_grounding_specs
    from .params import SubgraphParams
    from .score import read_score_rows
    from .subgraph_report import subgraph_records
    from .subgraphs import REALISER_LABEL, TemplateRealiser, realise_with_model

    rows = read_score_rows(args.scores)
    measures = args.measure or list(SubgraphParams.measures)
    fractions = list(args.fractions)
    grounding = parse_grounding_specs(args.grounding)
    if "icr" in measures and grounding is None:
        raise InputError("ICR subgraphs need --grounding", field="--grounding")
    out_rows: List[dict] = []
    for i, r in enumerate(rows):
        if r.get("scene_graph") is None:
            continue
        fields = {"parser": r.get("parser"), "grounding": grounding.name if grounding is not None else None}
        out_rows += [rec for rec, _ in subgraph_records(r, grounding, measures, fractions, args.seed, r.get("id", i),
                                                        args.tolerance, args.relation_ends, fields,
                                                        where=f"{args.scores}: row {i + 1}")]
    ok = [o for o in out_rows if o["status"] == "ok"]
    graphs = [SceneGraph.from_json(o["graph"]) for o in ok]
    if args.realiser == "llm":
        if not args.url or not args.model:
            raise InputError("--realiser llm needs --url and --model", field="--url")
        caps = realise_with_model(graphs, [f"{o['id']}:{o['measure']}:{o['fraction']}" for o in ok], args.url,
                                  args.model, args.responses or _with_suffix(args.out, ".realise.jsonl"))
        realiser = args.model
    else:
        caps = [TemplateRealiser().realise(g) for g in graphs]
        realiser = REALISER_LABEL
    for o, c in zip(ok, caps):
        o["realised_caption"] = c
        o["realiser"] = realiser
    with atomic_path(args.out) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            for o in out_rows:
                fh.write(json.dumps(o, ensure_ascii=False) + "\n")
    print(f"capaudit detail subgraphs: {len(ok)} of {len(out_rows)} targets reached; realiser {realiser} -> {args.out}",
          file=sys.stderr)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from capaudit.io.params import load_params

    from .stage import run

    out = run(load_params(args.params))
    print(out.surface_table.to_string(index=False))
    print(out.selection_table.to_string(index=False))
    return 0


__all__ = ["register", "cmd_score", "cmd_select", "cmd_subgraphs", "cmd_run"]
