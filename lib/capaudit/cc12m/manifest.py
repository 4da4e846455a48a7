"""``capaudit cc12m manifest``: one row per image of a joined table (the canonical image manifest).

Columns: ``image_id``, ``key`` (the anchor's normalised key, or null), ``normalized_url``,
``url_<surface>`` (each surface's URL as written), ``shard``/``member`` (file name of the tar
shard and member name, when ``--shards`` located it), and the fields materialisation fills:
``image`` (path relative to the manifest's folder), ``sha256``, ``bytes``, ``width``, ``height``,
``status`` (``pending``, ``materialized``, ``missing``, ``corrupt``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from capaudit.errors import InputError

from .shard_index import ShardIndex
from .tables import read_table
from .urls import normalize_url

MATERIAL_FIELDS = ("image", "sha256", "bytes", "width", "height")
STATUSES = ("pending", "materialized", "missing", "corrupt")


def manifest_from_joined(path: str) -> List[Dict[str, Any]]:
    """Manifest rows of a joined table (``capaudit cc12m bridge`` output); a row without
    ``image_id`` or ``url``, or a repeated ``image_id``, is refused naming file, line and field."""
    rows: List[Dict[str, Any]] = []
    seen: Dict[str, str] = {}
    for row, where, _ in read_table(path):
        image_id = row.get("image_id")
        if not isinstance(image_id, str) or not image_id.strip():
            raise InputError(f"{where}: field 'image_id': missing or blank (is this a 'cc12m bridge' table?)")
        if image_id in seen:
            raise InputError(f"{where}: field 'image_id': {image_id!r} repeats {seen[image_id]}")
        seen[image_id] = where
        url = normalize_url(row.get("url"))
        if url is None:
            raise InputError(f"{where}: field 'url': missing or blank normalised URL")
        out: Dict[str, Any] = {"image_id": image_id, "key": row.get("key"), "normalized_url": url}
        out.update({k: v for k, v in row.items() if k.startswith("url_")})
        out.update({"shard": None, "member": None, **dict.fromkeys(MATERIAL_FIELDS), "status": "pending"})
        rows.append(out)
    if not rows:
        raise InputError("joined table has no rows", path=path)
    return rows


def locate(rows: Sequence[Dict[str, Any]], index: ShardIndex, match: str) -> Dict[str, int]:
    """Fill ``shard``/``member`` of the rows found in ``index``; returns the counts."""
    located = 0
    for row in rows:
        s = index.find({**row, "shard": None, "member": None}, match)
        if s is not None:
            row["shard"], row["member"] = s.shard.name, s.image_member
            located += 1
    return {"located": located, "not_located": len(rows) - located}


def check_manifest_row(row: Dict[str, Any], where: str) -> Tuple[str, str, Optional[str]]:
    """``(image_id, normalized_url, key)`` of a manifest row read back; refuses a malformed one."""
    image_id = row.get("image_id")
    if not isinstance(image_id, str) or not image_id.strip():
        raise InputError(f"{where}: field 'image_id': missing or blank (is this a 'cc12m manifest' file?)")
    url = normalize_url(row.get("normalized_url"))
    if url is None:
        raise InputError(f"{where}: field 'normalized_url': missing or blank")
    if bool(row.get("shard")) != bool(row.get("member")):
        missing = "member" if row.get("shard") else "shard"
        raise InputError(f"{where}: field {missing!r}: 'shard' and 'member' go together")
    key = row.get("key")
    return image_id, url, (str(key) if key is not None else None)


__all__ = ["MATERIAL_FIELDS", "STATUSES", "manifest_from_joined", "locate", "check_manifest_row"]
