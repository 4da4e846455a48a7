"""Embedding cache: L2-normalised rows as ``.npy`` shards with a content-hashed manifest (spec §8.1).

A cache entry lives in ``<cache_dir>/<key>/`` where ``key`` = sha256 over the cache format, the
model's name, revision and settings, the shard size and every input text (in order). It holds
``shard-00000.npy`` … (float32, ``shard_size`` rows each), ``row_ids.jsonl`` (one id per row) and
``manifest.json`` (model, input sha256, rows, dims, shards with their sha256), written last.

* **reuse**: a complete manifest whose shard files match their size and sha256 → loaded, nothing is
  encoded (``status='hit'``);
* **resume**: an interrupted run left some shards (each written atomically) → those are kept and
  only the missing ones are encoded (``status='partial'``);
* **invalidation**: another model, revision, setting or input text gives another key (a new
  entry); a shard that no longer matches the manifest is re-encoded (``status='repaired'``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from capaudit.io.atomic import atomic_path, write_json_atomic, write_text_atomic
from capaudit.io.manifest import file_record, read_manifest, sha256_of

PathLike = Union[str, Path]
CACHE_FORMAT = "capaudit-embeddings/1"
DEFAULT_SHARD_SIZE = 16384


def default_cache_dir() -> Path:
    """``$CAPAUDIT_CACHE/embeddings`` (default ``~/.cache/capaudit/embeddings``)."""
    from capaudit.resources import cache_dir

    return cache_dir() / "embeddings"


def input_sha256(texts: Sequence[str]) -> str:
    """sha256 of the texts in order (each UTF-8, followed by a NUL byte)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def cache_key(model: Dict[str, Any], texts_sha256: str, shard_size: int) -> str:
    """The entry key: sha256 of format, model name/revision/settings, shard size and input hash."""
    head = {"format": CACHE_FORMAT, "name": model.get("name"), "revision": model.get("revision"),
            "settings": model.get("settings", {}), "shard_size": int(shard_size), "input_sha256": texts_sha256}
    return hashlib.sha256(json.dumps(head, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass
class CachedEmbeddings:
    """Embeddings of one input with where they came from."""

    vectors: np.ndarray
    row_ids: List[str]
    model: Dict[str, Any]
    key: str
    dir: Path
    status: str
    encoded_rows: int = 0
    manifest: Dict[str, Any] = field(default_factory=dict)

    def describe(self) -> Dict[str, Any]:
        return {"key": self.key, "dir": str(self.dir), "status": self.status, "encoded_rows": self.encoded_rows,
                "rows": int(self.vectors.shape[0]), "input_sha256": self.manifest.get("input", {}).get("sha256")}


def _shard_name(i: int) -> str:
    return f"shard-{i:05d}.npy"


def _load_shard(path: Path, rows: int, dim: Optional[int]) -> Optional[np.ndarray]:
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    if a.ndim != 2 or a.shape[0] != rows or (dim is not None and a.shape[1] != dim) or a.dtype != np.float32:
        return None
    return a


def embed_cached(texts: Sequence[str], encoder: Any, cache_dir: Optional[PathLike] = None, *,
                 row_ids: Optional[Sequence[str]] = None, shard_size: int = DEFAULT_SHARD_SIZE,
                 batch_size: int = 64) -> CachedEmbeddings:
    """Embeddings of ``texts`` with ``encoder`` (:class:`capaudit.embed.encoders.TextEncoder`), cached.

    See the module docstring for reuse, resume and invalidation. ``row_ids`` default to ``0..n-1``.
    """
    texts = list(texts)
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    ids = [str(i) for i in (row_ids if row_ids is not None else range(len(texts)))]
    if len(ids) != len(texts):
        raise ValueError(f"row_ids has {len(ids)} entries for {len(texts)} texts")
    model = encoder.describe()
    sha = input_sha256(texts)
    key = cache_key(model, sha, shard_size)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    entry = root / key
    manifest_path = entry / "manifest.json"
    n = len(texts)
    bounds = [(s, min(s + shard_size, n)) for s in range(0, n, shard_size)]
    dim = int(encoder.dim)

    recorded: Dict[str, Dict[str, Any]] = {}
    if manifest_path.is_file():
        try:
            m = read_manifest(manifest_path)
            if m.get("key") == key and m.get("format") == CACHE_FORMAT:
                recorded = m.get("files", {}) or {}
        except ValueError:
            recorded = {}
    shards: List[np.ndarray] = []
    encoded = 0
    stale = False
    for i, (s, e) in enumerate(bounds):
        path = entry / _shard_name(i)
        a = None
        rec = recorded.get(path.name)
        if rec is not None and not path.is_file():
            stale = True  # listed in the manifest but deleted: re-encode
        if path.is_file():
            if rec is not None and (path.stat().st_size != rec.get("bytes") or sha256_of(path) != rec.get("sha256")):
                stale = True  # changed after the manifest was written: re-encode
            else:
                a = _load_shard(path, e - s, dim)
                stale = stale or (a is None and rec is not None)
        if a is None:
            a = encoder.encode(texts[s:e], batch_size=batch_size).astype(np.float32, copy=False)
            encoded += e - s
            with atomic_path(path) as tmp:
                with open(tmp, "wb") as fh:
                    np.save(fh, a, allow_pickle=False)
        shards.append(a)
    vectors = np.concatenate(shards) if shards else np.zeros((0, dim), dtype=np.float32)
    if encoded == 0 and recorded and not stale:
        status = "hit"
    elif encoded == n or n == 0:
        status = "miss"
    else:
        status = "repaired" if stale else "partial"
    if status != "hit":
        entry.mkdir(parents=True, exist_ok=True)
        write_text_atomic(entry / "row_ids.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ids))
    names = [_shard_name(i) for i in range(len(bounds))] + ["row_ids.jsonl"]
    manifest = {"format": CACHE_FORMAT, "key": key, "model": model,
                "input": {"sha256": sha, "rows": n}, "dim": dim, "dtype": "float32", "normalized": "l2",
                "shard_size": shard_size, "shards": [{"file": _shard_name(i), "rows": e - s}
                                                     for i, (s, e) in enumerate(bounds)]}
    if status == "hit":
        manifest = read_manifest(manifest_path)
        stored_ids = (entry / "row_ids.jsonl").read_text(encoding="utf-8").splitlines()
        if [json.loads(x) for x in stored_ids] != ids:  # same texts, other ids: keep ids beside, not in key
            write_text_atomic(entry / "row_ids.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ids))
            manifest["files"] = {p: file_record(entry / p) for p in names}
            write_json_atomic(manifest_path, manifest)
    else:
        manifest["files"] = {p: file_record(entry / p) for p in names}
        write_json_atomic(manifest_path, manifest)  # last: it describes only files that are there
    return CachedEmbeddings(vectors=vectors, row_ids=ids, model=model, key=key, dir=entry, status=status,
                            encoded_rows=encoded, manifest=manifest)


__all__ = ["CACHE_FORMAT", "CachedEmbeddings", "DEFAULT_SHARD_SIZE", "cache_key", "default_cache_dir", "embed_cached",
           "input_sha256"]
