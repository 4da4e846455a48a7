"""Which caption inputs the engine can cut into shards (JSONL, JSONL.gz, Parquet files).

Shared by the text, truncation, detail and embed stages: a shardable input is surveyed shard by
shard on the engine, any other is streamed through the surfaces loader.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

from capaudit.engine.shards import expand_inputs, file_format
from capaudit.errors import InputError


def shardable(inputs: Any) -> bool:
    """True when ``inputs`` (paths, a folder, a glob, fsspec URLs) are JSONL / JSONL.gz / Parquet
    files only, which the engine can cut into shards."""
    try:
        return all(file_format(f) for f in expand_inputs(inputs))
    except (InputError, OSError, ValueError, ImportError):
        return False


def spec_shards(spec: Mapping[str, Any], sources: Sequence[Any]) -> Optional[List[str]]:
    """The files of a surface spec (its resolved ``sources``, each with a ``path``) when the engine
    can shard them; None when the spec must be streamed (another format, ``max_records``,
    ``records_field``, a Hugging Face dataset, or files that do not shard)."""
    if spec.get("format") not in (None, "jsonl", "parquet") or spec.get("max_records") is not None \
            or spec.get("records_field") or spec.get("format") == "hf":
        return None
    paths = [s.path for s in sources]
    return paths if paths and shardable(paths) else None


__all__ = ["shardable", "spec_shards"]
