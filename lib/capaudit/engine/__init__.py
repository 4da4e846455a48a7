"""Local and Ray execution of a stage's map + merge over shards (same numbers either way).

A stage provides ``map_fn(shard) -> part`` and an associative ``merge_fn([part, ...]) -> part``;
:func:`map_merge` runs them in this process, a process pool or on Ray and merges in shard order.
:func:`list_shards` cuts inputs (paths, folders, globs, fsspec URLs) into shards;
:func:`summary_json` is the canonical (sorted-key, exact-float) form used to compare runs.
"""

from capaudit.engine.executors import (ENGINES, check_engine, engine_from_params, ensure_ray, map_merge,
                                       ray_available, shutdown_ray)
from capaudit.engine.shards import CaptionRule, Shard, expand_inputs, iter_shard_captions, iter_shard_records, list_shards
from capaudit.engine.summary import summary_json, to_jsonable

__all__ = ["CaptionRule", "ENGINES", "Shard", "check_engine", "engine_from_params", "ensure_ray", "expand_inputs",
           "iter_shard_captions", "iter_shard_records", "list_shards", "map_merge", "ray_available",
           "shutdown_ray", "summary_json", "to_jsonable"]
