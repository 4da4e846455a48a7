"""``capaudit llm run|merge|serve-cmd`` and ``capaudit serve`` (the model-call layer's CLIs).

    capaudit llm run --requests R.jsonl --out RESP.jsonl --url URL [--url URL ...] --model NAME \
        --concurrency N --timeout S --retries K [--resume] [--only-failed] [--dialect vllm|openai|llamacpp]
    capaudit llm merge --out MERGED.jsonl RESP.jsonl [RESP_DIR ...]
    capaudit llm wait --url URL [--timeout 60]
    capaudit llm serve-cmd CONFIG [--host H] [--port P] [--model PATH] [--set KEY=VALUE ...] [--json]
    capaudit serve --host 127.0.0.1 --port P --backend NAME[=module:function] [--backend ...]

Exit status of ``llm run``: 0 when every request ended answered or recorded as failed
(``--fail-on-failed`` makes failures exit 3), 130 when interrupted, 1 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, List

from capaudit.argtypes import nonnegative_int, positive_float, positive_int


def register(subparsers: Any) -> None:
    """Add ``llm`` (run, merge, serve-cmd) and ``serve`` to the ``capaudit`` command."""
    llm = subparsers.add_parser("llm", help="model calls: run requests, merge responses, vLLM serve commands")
    sub = llm.add_subparsers(dest="llm_command", metavar="LLM_COMMAND")

    run = sub.add_parser("run", help="send JSON-schema chat requests to OpenAI-compatible endpoints")
    run.add_argument("--requests", required=True, help="request JSONL (capaudit.llm.requests rows)")
    run.add_argument("--out", required=True, help="response store: a .jsonl file or a directory (sharded)")
    add_endpoint_options(run, timeout=240.0, backoff=0.5,
                         reasks_help="extra attempts on unparsable / schema- or rule-violating output")
    run.add_argument("--dialect", choices=["vllm", "openai", "llamacpp"], default="vllm",
                     help="structured-output form of the request's schema (default vllm)")
    run.add_argument("--resume", action="store_true", help="skip ids already answered in --out")
    run.add_argument("--only-failed", action="store_true", help="ask only ids whose rows in --out all failed")
    run.add_argument("--overwrite", action="store_true", help="delete an existing --out first")
    run.add_argument("--allow-model-mismatch", action="store_true",
                     help="run requests whose model_hint differs from --model")
    add_run_control_options(run, unit="request")
    run.add_argument("--transport", choices=["fast", "openai"], default="fast",
                     help="fast: our keep-alive HTTP/1.1 client (local vLLM fleets); openai: the openai package's "
                          "AsyncOpenAI (hosted APIs, OPENAI_ORG_ID/OPENAI_PROJECT_ID headers); same rows")
    run.add_argument("--engine", choices=["local", "ray"], default=None,
                     help="shard the request file: one task per shard, each with its own store file in the --out "
                          "directory (ray: a local cluster unless --address); default: one process, no shards")
    run.add_argument("--shards", type=positive_int, default=None,
                     help="number of request shards (--engine; default 2 x --workers); keep it when resuming")
    run.add_argument("--workers", type=positive_int, default=2, help="shard tasks at once (--engine)")
    run.add_argument("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS; unset: local)")
    run.set_defaults(func=cmd_run)

    mg = sub.add_parser("merge", help="one row per request id (answered beats failed, order independent)")
    mg.add_argument("inputs", nargs="+", help="response files or store directories")
    mg.add_argument("--out", required=True)
    mg.set_defaults(func=cmd_merge)

    sc = sub.add_parser("serve-cmd", help="print the vLLM serve command of a serving/ config")
    sc.add_argument("config", help="YAML path, or a name in serving/ (e.g. judge_gemma4_31b_it)")
    sc.add_argument("--host")
    sc.add_argument("--port", type=int)
    sc.add_argument("--model", help="override the model (e.g. a local snapshot directory)")
    sc.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set/override a vLLM option")
    sc.add_argument("--python", help="python for the {python} launcher placeholder")
    sc.add_argument("--json", action="store_true", help="print {argv, env, ...} as JSON instead of a shell line")
    sc.set_defaults(func=cmd_serve_cmd)

    wt = sub.add_parser("wait", help="wait until an OpenAI-compatible server answers (GET /v1/models)")
    wt.add_argument("--url", action="append", required=True, help="base URL (repeatable)")
    wt.add_argument("--timeout", type=positive_float, default=60.0, help="give up after this many seconds")
    wt.set_defaults(func=cmd_wait)

    llm.set_defaults(func=lambda args: (llm.print_help(), 2)[1])

    srv = subparsers.add_parser("serve", help="local OpenAI-compatible server for offline backends")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--backend", action="append", default=[], metavar="NAME[=module:function]",
                     help="backend to serve (repeatable; default: all registered)")
    srv.add_argument("--workers", type=positive_int, default=1, help="backend threads")
    srv.add_argument("--list", action="store_true", help="list registered backends and exit")
    srv.set_defaults(func=cmd_serve)


def add_endpoint_options(parser: argparse.ArgumentParser, *, timeout: float, backoff: float, reasks_help: str,
                         timeout_help: str = "seconds per attempt") -> None:
    """Add the client options of a run built on :class:`capaudit.llm.client.RequestRun` (``llm run``,
    ``recap run``): ``--url`` (repeatable), ``--model``, ``--concurrency``, ``--timeout``, ``--retries``,
    ``--reasks``, ``--backoff``, ``--backoff-max``; ``timeout``/``backoff`` are the command's defaults."""
    parser.add_argument("--url", action="append", required=True,
                        help="base URL, e.g. http://127.0.0.1:8000 (repeat for data-parallel endpoints)")
    parser.add_argument("--model", required=True, help="model name sent to the server")
    parser.add_argument("--concurrency", type=positive_int, default=8)
    parser.add_argument("--timeout", type=positive_float, default=timeout, help=timeout_help)
    parser.add_argument("--retries", type=nonnegative_int, default=3,
                        help="extra attempts on connection errors, timeouts, 429, 5xx")
    parser.add_argument("--reasks", type=nonnegative_int, default=1, help=reasks_help)
    parser.add_argument("--backoff", type=float, default=backoff, help="base of the exponential backoff (s)")
    parser.add_argument("--backoff-max", type=float, default=30.0)


def add_run_control_options(parser: argparse.ArgumentParser, *, unit: str) -> None:
    """Add ``--api-key-env``, ``--drain-timeout``, ``--no-progress``, ``--stats-json``,
    ``--allow-failures`` (exit 0 although some ``unit``, e.g. request or image, ended failed; by
    default such a run exits 3) and ``--no-probe``."""
    parser.add_argument("--api-key-env", default="CAPAUDIT_API_KEY",
                        help="environment variable holding the bearer token (default CAPAUDIT_API_KEY; else sk-fake)")
    parser.add_argument("--drain-timeout", type=float, default=30.0,
                        help="seconds to let in-flight requests finish on stop")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--stats-json", help="also write the run statistics to this JSON file")
    parser.add_argument("--allow-failures", action="store_true",
                        help=f"exit 0 even when some {unit}s ended failed (default: exit 3 naming how many)")
    parser.add_argument("--fail-on-failed", action="store_true", help=argparse.SUPPRESS)  # the default now
    parser.add_argument("--no-probe", dest="probe", action="store_false",
                        help="skip the endpoint check and the first request sent alone")
    parser.add_argument("--no-context-check", dest="context_check", action="store_false",
                        help=f"send every {unit} even where the server declares the model's context and counts a "
                             "prompt (with its image tokens) over it (default: refuse it before sending)")


def check_requests_file(path: Path, model: str, allow_model_mismatch: bool = False) -> int:
    """Read the whole request file before anything is sent: every line must parse and be a valid
    request for ``model``; a manifest beside it (``<name>.manifest.json``) must match the file.
    Returns the number of requests. Errors name the file and line."""
    from capaudit.io.manifest import check_file
    from capaudit.llm.requests import iter_request_lines, parse_request_line

    if not path.is_file():
        raise FileNotFoundError(f"--requests {path}: no such file")
    name = path.name[: -len(".jsonl")] if path.name.endswith(".jsonl") else path.name
    check_file(path, path.with_name(name + ".manifest.json"), hint="rebuild the requests (capaudit claims build)")
    n = 0
    for lineno, line in iter_request_lines(path):
        row = parse_request_line(line, f"{path}:{lineno}")
        hint = row.get("model_hint")
        if hint is not None and hint != model and not allow_model_mismatch:
            raise ValueError(f"{path}:{lineno}: field 'model_hint' is {hint!r} but the run uses --model {model!r} (the "
                             f"request id hashes the model; rebuild the requests with --model {model!r} or pass "
                             f"--allow-model-mismatch)")
        n += 1
    if n == 0:
        raise ValueError(f"{path}: no requests (the file is empty)")
    return n


def cmd_run(args: argparse.Namespace) -> int:
    from capaudit.llm.client import run_requests
    from capaudit.llm.store import MODELS_SUFFIX, ResponseStore, models_path

    req = Path(args.requests)
    for u in args.url:
        if not u.startswith(("http://", "https://")):
            raise ValueError(f"--url {u!r}: expected http://HOST:PORT or https://...")
    out = Path(args.out)
    if args.engine is not None or args.shards is not None:
        return _cmd_run_sharded(args, req, out)
    sharded = out.is_dir() or str(args.out).endswith(("/", os.sep))
    from capaudit.io.atomic import check_output_path

    if not sharded:
        check_output_path(out)
    if args.stats_json:
        check_output_path(args.stats_json)
    check_requests_file(req, args.model, args.allow_model_mismatch)
    store = ResponseStore(str(out) + os.sep if sharded else out)
    # One writer per store: the lock is taken before anything is deleted or sent; a second
    # `llm run` on the same --out stops here with one line and writes nothing.
    store.lock()
    try:
        if args.overwrite and out.exists():
            if out.is_dir():
                for f in list(out.glob("*.jsonl")) + list(out.glob(f"*{MODELS_SUFFIX}")):
                    f.unlink()
            else:
                out.unlink()
                models_path(out).unlink(missing_ok=True)  # who answered the rows just deleted
        resume = bool(args.resume or args.only_failed)
        stats = run_requests(
            str(req), store, args.url, args.model,
            concurrency=args.concurrency, timeout=args.timeout, retries=args.retries, dialect=args.dialect,
            resume=resume, only_failed=args.only_failed, progress=not args.no_progress,
            reasks=args.reasks, backoff_base=args.backoff, backoff_max=args.backoff_max,
            api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
            allow_model_mismatch=args.allow_model_mismatch, drain_timeout=args.drain_timeout,
            transport=args.transport, probe=args.probe, context_check=args.context_check,
        )
    finally:
        store.close()
    return report_run(args, stats)


def _cmd_run_sharded(args: argparse.Namespace, req: Path, out: Path) -> int:
    """``llm run --engine local|ray``: one task per request shard (capaudit.llm.fanout)."""
    from capaudit.llm.fanout import run_requests_sharded
    from capaudit.errors import InputError
    from capaudit.llm.store import MODELS_SUFFIX, ResponseStore

    if out.exists() and not out.is_dir():
        raise InputError("--engine writes a directory store (one file per shard); give a folder", path=out)
    if args.stats_json:
        from capaudit.io.atomic import check_output_path

        check_output_path(args.stats_json)
    check_requests_file(req, args.model, args.allow_model_mismatch)
    store = ResponseStore(str(out) + os.sep)
    store.lock()  # one run per store folder; each shard task also locks its own file
    try:
        if args.overwrite and out.exists():
            for f in list(out.glob("*.jsonl")) + list(out.glob("_shards.json")) + list(out.glob(f"*{MODELS_SUFFIX}")):
                f.unlink()
        resume = bool(args.resume or args.only_failed)
        stats = run_requests_sharded(
            req, out, args.url, args.model, shards=args.shards or 2 * args.workers, engine=args.engine or "local",
            workers=args.workers, address=args.address, resume=resume,
            concurrency=args.concurrency, timeout=args.timeout, retries=args.retries, dialect=args.dialect,
            only_failed=args.only_failed, reasks=args.reasks, backoff_base=args.backoff, backoff_max=args.backoff_max,
            api_key=os.environ.get(args.api_key_env) if args.api_key_env else None,
            allow_model_mismatch=args.allow_model_mismatch, drain_timeout=args.drain_timeout, transport=args.transport,
            probe=args.probe, context_check=args.context_check,
        )
    finally:
        store.close()
    return report_run(args, stats)


def report_run(args: argparse.Namespace, stats: Any) -> int:
    """Print the run's stats line (and ``--stats-json``); the exit status: 130 interrupted,
    3 when requests failed (one line saying how many; ``--allow-failures`` keeps 0), else 0."""
    from capaudit.llm.context_check import CONTEXT_KIND

    d = stats.to_dict()
    print(f"capaudit llm run: {json.dumps(d, sort_keys=True)}", file=sys.stderr)
    if args.stats_json:
        from capaudit.io.atomic import write_json_atomic

        write_json_atomic(args.stats_json, d, sort_keys=True)
    off = getattr(stats, "context_check_off", None)
    if off:
        print(f"capaudit llm run: warning: the context check stopped after {stats.context_checked} counted "
              f"requests ({off}); the rest were sent unchecked", file=sys.stderr)
    if stats.interrupted:
        return 130
    if stats.failed:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(stats.failed_by_kind.items()))
        first = getattr(stats, "first_failure", None)
        refused = stats.failed_by_kind.get(CONTEXT_KIND, 0)
        retry = ("rerun with --resume to retry them" if refused < stats.failed else "")
        if refused:
            retry += ("; " if retry else "") + (
                f"the {refused} over the model's context are refused again on --resume: serve a larger "
                "max-model-len, lower max_tokens or shorten the prompt (--no-context-check sends them anyway)")
        msg = (f"{stats.failed} of {stats.answered + stats.failed} requests failed ({kinds}"
               + (f"; first: {first}" if first else "")
               + f"); the store keeps them as failed rows: {retry}")
        if args.allow_failures:
            print(f"capaudit llm run: warning: {msg}", file=sys.stderr)
            return 0
        print(f"capaudit llm run: error: {msg}, or pass --allow-failures", file=sys.stderr)
        return 3
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from capaudit.io.canonical_json import dumps_line
    from capaudit.llm.store import merge

    from capaudit.io.atomic import atomic_write, check_output_path

    out = check_output_path(args.out)
    for p in args.inputs:
        if not Path(p).exists():
            raise FileNotFoundError(f"{p}: response file or store not found")
    rows = merge(*args.inputs)
    with atomic_write(out, "wb") as fh:
        for rid in sorted(rows):
            fh.write(dumps_line(rows[rid]))
    ok = sum(1 for r in rows.values() if r["ok"])
    print(f"capaudit llm merge: {len(rows)} ids ({ok} answered, {len(rows) - ok} failed) -> {out}", file=sys.stderr)
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    """Poll ``GET <url>/v1/models`` until every URL answers 200, or fail after ``--timeout`` s."""
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + args.timeout
    for url in args.url:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--url {url!r}: expected http://HOST:PORT or https://...")
        probe = url.rstrip("/") + ("/models" if url.rstrip("/").endswith("/v1") else "/v1/models")
        last = ""
        while True:
            try:
                with urllib.request.urlopen(probe, timeout=2.0) as resp:
                    if resp.status == 200:
                        break
                    last = f"HTTP {resp.status}"
            except (urllib.error.URLError, OSError) as exc:
                last = str(getattr(exc, "reason", exc))
            if time.monotonic() >= deadline:
                raise ValueError(f"--url {url}: no answer from {probe} within {args.timeout:g} s (last: {last})")
            time.sleep(0.2)
    print(f"capaudit llm wait: {', '.join(args.url)} ready", file=sys.stderr)
    return 0


def cmd_serve_cmd(args: argparse.Namespace) -> int:
    from capaudit.llm.serving import build_serve_command, parse_override

    overrides = dict(parse_override(s) for s in args.set)
    cmd = build_serve_command(args.config, host=args.host, port=args.port, model=args.model,
                              overrides=overrides, python=args.python)
    for w in cmd.warnings:
        print(f"capaudit llm serve-cmd: warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps({"name": cmd.name, "model": cmd.model, "revision": cmd.revision,
                          "served_model_name": cmd.served_model_name, "argv": cmd.argv, "env": cmd.env}, indent=2))
    else:
        print(cmd.shell())
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from capaudit.llm.backends import load_backend_spec
    from capaudit.llm.server import registry, serve

    reg = registry()  # the built-ins and the stand-in models
    names: List[str] = [load_backend_spec(spec, reg) for spec in args.backend]  # registers module:function specs
    if args.list:  # what this command line would serve
        print("\n".join(names or reg.names()))
        return 0
    serve(args.host, args.port, names or None, workers=args.workers)
    return 0
