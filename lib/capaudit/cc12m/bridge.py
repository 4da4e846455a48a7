"""``capaudit cc12m bridge``: join caption surfaces keyed differently into one row per image.

The reference's rule (``build_cc12m_four_caption_llava_url_bridge_slice.py``): key-joined surfaces
meet the anchor surface (LLaVA-NeXT there, which carries both the old numeric key and the URL) on
the normalised key; URL-joined surfaces (PixelProse) meet it on the anchor's *normalised URL*.
Candidates are the sorted anchor keys present in every surface; they are shuffled with
``random.Random(seed)`` (the reference always shuffles; its default seed is 0) and cut to
``max_rows`` when given. The image id is the anchor's normalised key (the reference's
``pair_key``), or ``u`` + a sha1 prefix of the normalised URL when every surface joins by URL.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from capaudit.errors import InputError

from .surface_loading import LoadedSurface, load_surface
from .surface_spec import SurfaceSpec
from .urls import url_image_id

EXAMPLES = 5  # unmatched join values listed per surface in the summary
URL_RULE = "strip; lower-case scheme and host, drop the fragment when both exist; path and query unchanged"


@dataclass
class BridgeResult:
    rows: List[Dict[str, Any]]
    summary: Dict[str, Any]


def check_specs(specs: Sequence[SurfaceSpec], anchor: str) -> SurfaceSpec:
    """The anchor's spec, after checking the surfaces can be joined at all."""
    names = [s.name for s in specs]
    if len(specs) < 2:
        raise InputError("give at least two --surface (one of them the anchor)")
    if len(set(names)) != len(names):
        raise InputError(f"--surface names must be unique, got {names}")
    by_name = {s.name: s for s in specs}
    if anchor not in by_name:
        raise InputError(f"--anchor {anchor!r} is not a surface (surfaces: {', '.join(names)})")
    a = by_name[anchor]
    others = [s for s in specs if s.name != anchor]
    if any(s.join == "key" for s in others) and a.join != "key":
        raise InputError(f"--anchor {anchor!r} must use join=key: other surfaces join by key")
    if any(s.join == "url" for s in others) and a.url_field is None:
        raise InputError(f"--anchor {anchor!r} needs url=FIELD: surfaces joined by URL meet its normalised URL")
    return a


def run_bridge(specs: Sequence[SurfaceSpec], *, anchor: Optional[str] = None, key_mode: str = "zfill9",
               seed: int = 0, max_rows: Optional[int] = None, skip_incomplete: bool = False) -> BridgeResult:
    """Load every surface, join them on the anchor and count what each surface loses."""
    anchor = anchor or specs[0].name
    a_spec = check_specs(specs, anchor)
    need_url = any(s.join == "url" for s in specs if s.name != anchor)
    loaded: Dict[str, LoadedSurface] = {}
    for spec in specs:
        loaded[spec.name] = load_surface(spec, key_mode=key_mode, need_url=need_url and spec.name == anchor,
                                         skip_incomplete=skip_incomplete)
    a = loaded[anchor]
    others = [loaded[s.name] for s in specs if s.name != anchor]

    def partner_value(surface: LoadedSurface, anchor_value: str) -> Optional[str]:
        # the value the surface is looked up with: the anchor's key, or its normalised URL
        if surface.spec.join == a_spec.join:
            return anchor_value
        return a.rows[anchor_value].normalized_url

    candidates: List[str] = []
    unmatched_by_surface = {s.spec.name: 0 for s in others}
    used: Dict[str, set] = {s.spec.name: set() for s in others}
    for value in sorted(a.rows):
        ok = True
        for s in others:
            pv = partner_value(s, value)
            if pv is None or pv not in s.rows:
                unmatched_by_surface[s.spec.name] += 1
                ok = False
        if ok:
            candidates.append(value)
            for s in others:
                used[s.spec.name].add(partner_value(s, value))
    if not candidates:
        lost = ", ".join(f"{n}: {c} of {len(a.rows)} anchor rows unmatched" for n, c in unmatched_by_surface.items())
        raise InputError(f"no image has all {len(specs)} surfaces ({lost}); check each surface's join field "
                         f"and the key normalisation (--key-normalization {key_mode})")
    rng = random.Random(seed)
    order = list(candidates)
    rng.shuffle(order)
    kept = order[:max_rows] if max_rows else order

    rows = [joined_row(value, a, others, partner_value) for value in kept]
    surfaces_stats: Dict[str, Any] = {}
    for spec in specs:
        s = loaded[spec.name]
        matched = len(candidates) if spec.name == anchor else len(used[spec.name])
        unmatched = sorted(set(s.rows) - (set(candidates) if spec.name == anchor else used[spec.name]))
        surfaces_stats[spec.name] = {**s.stats(), "matched": matched, "unmatched": len(s.rows) - matched,
                                     "unmatched_examples": unmatched[:EXAMPLES]}
    urls = [a.rows[v].normalized_url for v in candidates]
    summary = {
        "anchor": anchor,
        "join_rule": (f"surfaces with join=key meet '{anchor}' on the normalised key ({key_mode}); surfaces "
                      f"with join=url meet it on its normalised URL"),
        "key_normalization": key_mode,
        "url_normalization": URL_RULE,
        "seed": seed,
        "max_rows": max_rows,
        "skip_incomplete": skip_incomplete,
        "surfaces": surfaces_stats,
        "join": {
            "anchor_rows": len(a.rows),
            "anchor_rows_unmatched_by_surface": unmatched_by_surface,
            "candidates": len(candidates),
            "candidates_sharing_a_url": len(urls) - len(set(urls)) if need_url else 0,
            "cut_by_max_rows": len(candidates) - len(kept),
            "rows": len(rows),
        },
    }
    return BridgeResult(rows=rows, summary=summary)


def joined_row(value: str, a: LoadedSurface, others: Sequence[LoadedSurface], partner_value: Any) -> Dict[str, Any]:
    """One joined row: image id, anchor key and normalised URL, then per surface its caption and
    the key and URL as that surface wrote them."""
    ar = a.rows[value]
    image_id = ar.normalized_key if a.spec.join == "key" else url_image_id(value)
    row: Dict[str, Any] = {"image_id": image_id, "key": ar.normalized_key, "url": ar.normalized_url}
    for s, r in [(a, ar), *[(o, o.rows[partner_value(o, value)]) for o in others]]:
        row[f"caption_{s.spec.name}"] = r.caption
        if s.spec.key_field:
            row[f"key_{s.spec.name}"] = r.key
        if s.spec.url_field:
            row[f"url_{s.spec.name}"] = r.url
    return row


def stderr_lines(summary: Dict[str, Any]) -> List[str]:
    """What the summary counts, one line per surface and one for the join."""
    out = []
    for name, s in summary["surfaces"].items():
        dup = s.get("duplicate_keys", s.get("duplicate_urls", 0))
        skipped = s.get("skipped_missing_key", s.get("skipped_missing_url", 0)) + s["skipped_missing_caption"]
        extra = f", {s['loaded_without_url']} without URL" if s.get("loaded_without_url") else ""
        out.append(f"{name}: seen {s['seen']}, loaded {s['loaded']} (duplicate {s['join']}s {dup}, "
                   f"skipped incomplete {skipped}{extra}), matched {s['matched']}, unmatched {s['unmatched']}")
    j = summary["join"]
    out.append(f"join: {j['candidates']} images in every surface ({j['candidates_sharing_a_url']} sharing a URL with "
               f"another), {j['cut_by_max_rows']} cut by --max-rows, {j['rows']} rows")
    return out


__all__ = ["BridgeResult", "URL_RULE", "check_specs", "run_bridge", "joined_row", "stderr_lines"]
