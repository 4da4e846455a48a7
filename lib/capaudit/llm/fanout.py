"""Sharded model calls: ``capaudit llm run --engine ray`` (or a local process pool).

The request file is cut into ``shards`` line-aligned byte ranges (:func:`list_shards`); one task
per shard runs our async client (:func:`capaudit.llm.client.run_requests`: schema validation,
content-addressed ids, retries, re-asks) against every listed endpoint and appends to its own
single-file store ``<out>/shard-<i>-of-<n>.jsonl``. The output folder is a directory store
(:mod:`capaudit.llm.store` reads every ``*.jsonl`` in it), so ``merge(out)`` gives one row per
request id exactly as a local run's store does (timing fields aside).

Resume is per shard: each task skips the ids answered in its own shard file (``--only-failed``
asks only its failed ids). The cut is recorded in ``<out>/_shards.json`` (request file name,
size, shard count); a resumed run must use the same request file and shard count, otherwise
it stops with an error instead of asking answered requests again.

Every task needs the request file and the output folder at the same path (a shared file system
on a multi-node cluster) and network access to the endpoints. HTTP stays in :mod:`capaudit.llm`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from capaudit.engine.executors import map_merge
from capaudit.engine.shards import Shard, iter_shard_lines, list_shards
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic

MANIFEST = "_shards.json"


@dataclass(frozen=True)
class RequestShard:
    """A byte range of a request JSONL file, readable by the client (``iter_request_rows``)."""

    shard: Shard

    def iter_request_rows(self) -> Iterator[Tuple[str, Dict[str, Any]]]:
        from capaudit.llm.requests import parse_request_line

        for off, line in iter_shard_lines(self.shard):
            if not line.strip():
                continue
            where = f"{self.shard.path} (byte {off})"
            yield where, parse_request_line(line, where)


def shard_store_path(out_dir: Path, shard: Shard) -> Path:
    return Path(out_dir) / f"{shard.name}.jsonl"


def _check_manifest(out_dir: Path, requests: Path, shards: int, resume: bool) -> None:
    man = out_dir / MANIFEST
    info = {"requests": requests.name, "size": requests.stat().st_size, "shards": shards}
    if man.exists():
        old = json.loads(man.read_text(encoding="utf-8"))
        if (old.get("requests"), old.get("size"), old.get("shards")) != (info["requests"], info["size"], info["shards"]):
            raise InputError(f"this store was cut as {old.get('shards')} shards of {old.get('requests')} "
                             f"({old.get('size')} bytes); run with the same request file and --shards "
                             f"{old.get('shards')}, or use a new --out", path=out_dir)
    if not resume and out_dir.is_dir() and any(out_dir.glob("*.jsonl")):
        raise InputError("response store already has rows; resume it or remove it first", path=out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not man.exists():
        write_json_atomic(man, info)


def _run_shard(shard: Shard, out_dir: str, urls: Sequence[str], model: str, kwargs: Dict[str, Any],
               rule_providers: Tuple[str, ...] = ()) -> Dict[str, Any]:
    from capaudit.llm.client import run_requests
    from capaudit.llm.validate import add_rule_providers

    add_rule_providers(rule_providers)  # a worker process knows the caller's task rules too

    stats = run_requests(RequestShard(shard), shard_store_path(Path(out_dir), shard), list(urls), model,
                         progress=False, handle_signals=False, **kwargs)
    return stats.to_dict()


def _merge_stats(parts: List[Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for p in parts:
        for k, v in p.items():
            if k == "failed_by_kind":
                fk = out.setdefault(k, {})
                for kind, n in v.items():
                    fk[kind] = fk.get(kind, 0) + n
            elif k == "interrupted":
                out[k] = bool(out.get(k)) or bool(v)
            elif k == "elapsed_sec":
                out[k] = max(out.get(k, 0.0), v)
            elif k in ("first_failure", "context_check_off"):  # the first shard's reason
                out[k] = out.get(k) or v
            elif k != "rate_per_sec":
                out[k] = out.get(k, 0) + v
    return out


def run_requests_sharded(requests: str | Path, out_dir: str | Path, urls: Sequence[str], model: str, *,
                         shards: int = 8, engine: str = "ray", workers: int = 2, address: Optional[str] = None,
                         resume: bool = True, **client_kwargs: Any):
    """Run a request file as ``shards`` tasks on ``engine`` (module docstring).

    ``client_kwargs`` are those of :func:`capaudit.llm.client.run_requests` (``concurrency`` is per
    task, ``transport``, ``retries``, ``timeout``, ``only_failed`` ...). Returns a
    :class:`capaudit.llm.client.RunStats` summed over shards (``elapsed_sec`` = wall time).
    """
    import time

    from capaudit.llm.client import RunStats

    req = Path(requests)
    if not req.is_file():
        raise InputError("no such request file", path=req)
    if shards < 1:
        raise InputError(f"--shards must be >= 1, got {shards}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError("a sharded run writes a directory store; this path is a file", path=out)
    _check_manifest(out, req, shards, resume)
    parts = list_shards(str(req.resolve()), num_shards=shards)
    t0 = time.monotonic()
    from capaudit.llm.validate import DEFAULT_RULES

    fn = partial(_run_shard, out_dir=str(out.resolve()), urls=tuple(urls), model=model,
                 kwargs={"resume": True, **client_kwargs}, rule_providers=DEFAULT_RULES.providers)
    merged = map_merge(parts, fn, lambda ps: _merge_stats(ps), engine=engine, workers=workers, address=address,
                       max_in_flight=workers)
    stats = RunStats()
    names = {f.name for f in fields(RunStats)}
    for k, v in merged.items():
        if k in names and k != "elapsed_sec":
            setattr(stats, k, v)
    stats.elapsed_sec = time.monotonic() - t0
    return stats


__all__ = ["MANIFEST", "RequestShard", "run_requests_sharded", "shard_store_path"]
