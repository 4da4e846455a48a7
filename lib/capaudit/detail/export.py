"""Export of a selected subset for a trainer (issue 13, "Export"; we do not train).

``export_subset(rows, selection, out)`` writes, each atomically and the manifest last:

* ``OUT.jsonl`` — the selected score rows in selection order, each with ``rank`` (1-based),
  ``source_row`` (0-based input row) and ``__key__``;
* ``OUT.parquet`` — the same rows, columns :data:`PARQUET_COLUMNS` (image path, caption, scores and
  the names of the parser, grounding and ITM backends that produced them, the ICR kind —
  ``things-only`` for COCO instance masks — and the AOD/CD ``relation_ends``);
* ``OUT.wds.json`` — a WebDataset-style manifest: ``{"format": "webdataset-manifest/1",
  "selection", "backends", "files": {name: {"path", "sha256", "rows"}}, "samples": [{"__key__",
  "jpg": image path, "txt": caption, "json": {scores}}]}``. ``__key__`` is the row id with every
  character outside ``[A-Za-z0-9_-]`` replaced by ``_`` (WebDataset splits keys at dots),
  suffixed ``-2``, ``-3`` … when two ids collide.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from capaudit.io.atomic import atomic_path, write_json_atomic
from capaudit.io.manifest import sha256_of

from .selection import Selection

PARQUET_COLUMNS = ("__key__", "rank", "source_row", "id", "image", "caption", "icr", "aod", "cd", "cd_unnormalized",
                   "length", "objects", "attributes", "relations", "itm", "parser", "grounding", "itm_scorer",
                   "icr_kind", "relation_ends")
SCORE_FIELDS = ("icr", "aod", "cd", "cd_unnormalized", "length", "objects", "attributes", "relations", "itm",
                "icr_kind", "relation_ends")
_KEY_BAD = re.compile(r"[^A-Za-z0-9_-]")


def sample_keys(ids: Sequence[Any]) -> List[str]:
    """WebDataset-safe unique keys for ``ids`` (module docstring)."""
    out: List[str] = []
    seen: Dict[str, int] = {}
    for i in ids:
        base = _KEY_BAD.sub("_", str(i)) or "_"
        n = seen.get(base, 0) + 1
        seen[base] = n
        out.append(base if n == 1 else f"{base}-{n}")
    return out


def output_paths(out: Union[str, Path]) -> Dict[str, Path]:
    """``{"jsonl", "parquet", "manifest"}`` paths for ``OUT.jsonl`` (any suffix is replaced)."""
    p = Path(out)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.stem if p.suffix else p.name
    return {"jsonl": p.with_name(stem + ".jsonl"), "parquet": p.with_name(stem + ".parquet"),
            "manifest": p.with_name(stem + ".wds.json")}


def export_subset(rows: Sequence[Mapping[str, Any]], selection: Selection, out: Union[str, Path],
                  itm_field: str = "itm", backends: Optional[Mapping[str, Any]] = None,
                  extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Path]:
    """Write the JSONL, Parquet and WebDataset-style manifest of ``selection`` (module docstring)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = output_paths(out)
    chosen = [rows[i] for i in selection.indices]
    keys = sample_keys([r.get("id", i) for r, i in zip(chosen, selection.indices)])
    recs: List[Dict[str, Any]] = []
    for rank, (src, r, key) in enumerate(zip(selection.indices, chosen, keys), start=1):
        rec = {"__key__": key, "rank": rank, "source_row": src, **dict(r)}
        if itm_field != "itm" and itm_field in r:
            rec["itm"] = r[itm_field]
        recs.append(rec)
    with atomic_path(paths["jsonl"]) as tmp:
        with open(tmp, "w", encoding="utf-8") as fh:
            for rec in recs:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")

    def col(name: str) -> List[Any]:
        vals = [rec.get(name) for rec in recs]
        if name in ("icr", "aod", "cd", "cd_unnormalized", "itm"):
            return [None if v is None else float(v) for v in vals]
        if name in ("rank", "source_row", "length", "objects", "attributes", "relations"):
            return [None if v is None else int(v) for v in vals]
        return [None if v is None else str(v) for v in vals]

    types = {"icr": pa.float64(), "aod": pa.float64(), "cd": pa.float64(), "cd_unnormalized": pa.float64(),
             "itm": pa.float64(), "rank": pa.int64(), "source_row": pa.int64(), "length": pa.int64(),
             "objects": pa.int64(), "attributes": pa.int64(), "relations": pa.int64()}
    table = pa.table({c: pa.array(col(c), type=types.get(c, pa.string())) for c in PARQUET_COLUMNS})
    with atomic_path(paths["parquet"]) as tmp:
        pq.write_table(table, tmp)
    samples = [{"__key__": rec["__key__"], "jpg": rec.get("image"), "txt": rec.get("caption"),
                "json": {k: rec.get(k) for k in ("id", "rank", "source_row") + SCORE_FIELDS}} for rec in recs]
    manifest = {
        "format": "webdataset-manifest/1",
        "selection": selection.to_dict(),
        "backends": dict(backends or {}),
        **({"extra": dict(extra)} if extra else {}),
        "files": {name: {"path": paths[name].name, "sha256": sha256_of(paths[name]), "rows": len(recs)}
                  for name in ("jsonl", "parquet")},
        "samples": samples,
    }
    write_json_atomic(paths["manifest"], manifest)
    return paths


__all__ = ["PARQUET_COLUMNS", "SCORE_FIELDS", "sample_keys", "output_paths", "export_subset"]
