"""Settings and inputs of the encoder-probe stages: surface names, integer settings (errors name the
key), a surface's captions and the image-caption pairs of the retrieval block."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.errors import InputError


def surface_names(section: Mapping[str, Any], key: str, known: Sequence[str], where: str) -> List[str]:
    """``section[key]`` (default: every declared surface), each a surface declared under ``surfaces``."""
    names = section.get(key, list(known))
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InputError(f"{where}.{key}: expected a list of names, got {names!r}", field=key)
    for n in names:
        if n not in known:
            raise InputError(f"{where}.{key}: surface {n!r} is not declared under 'surfaces' "
                             f"(declared: {', '.join(known) or 'none'})", field=key)
    return names


def int_setting(section: Mapping[str, Any], key: str, default: Optional[int], minimum: int, where: str,
                maximum: Optional[int] = None) -> Optional[int]:
    """``section[key]`` (or ``default``) as an integer in [minimum, maximum]; else an error naming the key."""
    v = section.get(key, default)
    if v is None and default is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum or (maximum is not None and v > maximum):
        span = f">= {minimum}" if maximum is None else f"{minimum}-{maximum}"
        raise InputError(f"{where}.{key}: expected an integer {span}, got {v!r}", field=key)
    return v


def read_surface(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """A surface's captions (the surfaces loader) and its row counts."""
    from capaudit.surfaces import LoadStats, iter_captions

    stats = LoadStats()
    caps = [r.caption for r in iter_captions(spec, stats=stats)]
    return {"captions": caps, "rows": stats.rows, "empty_skipped": stats.rows_empty_caption,
            "blank": stats.rows_blank_caption, "rows_missing_caption_field": stats.rows_missing_field}


def retrieval_pairs(section: Mapping[str, Any], where: str) -> Dict[str, List[Dict[str, Any]]]:
    """Per surface of ``embed_probes.retrieval.surfaces``: image path and caption rows (COCO-MINI captions
    of one rank, or an aligned JSONL file)."""
    from capaudit.embed.retrieval import coco_mini_pairs
    from capaudit.surfaces.readers import iter_json_lines

    items = section.get("surfaces") or [{"name": "coco_a", "coco_mini_rank": 0}, {"name": "coco_b", "coco_mini_rank": 1}]
    pairs: Dict[str, List[Dict[str, Any]]] = {}
    for i, it in enumerate(items, start=1):
        if not isinstance(it, Mapping) or not it.get("name"):
            raise InputError(f"{where}.surfaces item {i}: needs a name", field="surfaces")
        if "coco_mini_rank" in it:
            pairs[it["name"]] = coco_mini_pairs(int_setting(it, "coco_mini_rank", 0, 0, f"{where}.surfaces[{i}]", 4))
        elif "file" in it:
            img_f, cap_f = it.get("image_field", "image_path"), it.get("caption_field", "caption")
            pairs[it["name"]] = [{"image_path": row[img_f], "caption": str(row[cap_f]).strip()}
                                 for _, row in iter_json_lines(Path(it["file"]))]
        else:
            raise InputError(f"{where}.surfaces item {i}: give coco_mini_rank or file", field="surfaces")
    return pairs


__all__ = ["int_setting", "read_surface", "retrieval_pairs", "surface_names"]
