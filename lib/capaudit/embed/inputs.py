"""Inputs of the encoder-probe stages: surface names, integer settings (errors name the key) and the
image-caption pairs of the retrieval block."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.errors import InputError


def surface_names(names: Optional[Sequence[str]], known: Sequence[str], key: str, where: str) -> List[str]:
    """``names`` (default: every declared surface), each a surface declared under ``surfaces``."""
    names = list(known) if names is None else list(names)
    for n in names:
        if n not in known:
            raise InputError(f"{where}.{key}: surface {n!r} is not declared under 'surfaces' "
                             f"(declared: {', '.join(known) or 'none'})", field=key)
    return names


def int_setting(section: Mapping[str, Any], key: str, default: Optional[int], minimum: int, where: str,
                maximum: Optional[int] = None) -> Optional[int]:
    """``section[key]`` (or ``default``) as an integer in [minimum, maximum]; else an error naming the key."""
    v = section[key] if key in section else default
    if v is None and default is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum or (maximum is not None and v > maximum):
        span = f">= {minimum}" if maximum is None else f"{minimum}-{maximum}"
        raise InputError(f"{where}.{key}: expected an integer {span}, got {v!r}", field=key)
    return v


def retrieval_pairs(items: Sequence[Mapping[str, Any]], where: str) -> Dict[str, List[Dict[str, Any]]]:
    """Per surface of ``embed_probes.retrieval.surfaces`` (``items``): image path and caption rows
    (COCO-MINI captions of one rank, or an aligned JSONL file)."""
    from capaudit.embed.retrieval import coco_mini_pairs
    from capaudit.surfaces.readers import iter_json_lines

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


__all__ = ["int_setting", "retrieval_pairs", "surface_names"]
