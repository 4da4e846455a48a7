"""Detail-stage tables (issue 13): detailness per surface, selection strategies, controlled subgraphs.

Each table's notes name the ICR the grounding gives, the AOD/CD relation count and the backends
(parser, grounding, ITM) from the rows file's ``meta``; the manuscript's ``\\readnote`` puts them into
the captions.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from capaudit.errors import InputError

from .stage_tables import builder, columns
from .table_model import Table, caveats_in, stand_in_caveats

NOTEBOOK = "09_detail"
#: what every detail table's ``meta`` holds (the stage writes it; ``detail.definitions``)
META_KEYS = ("icr", "relation_ends_label", "backends")


def _meta(data: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    """The rows file's ``meta``, checked for ``keys`` (a missing one names the file and field)."""
    meta = data["meta"]
    for k in (*META_KEYS, *keys):
        if k not in meta:
            raise InputError(f"table rows of {data['table']!r} have no meta {k!r}", path=data.get("path"),
                             field=f"meta.{k}")
    return meta


def definition_notes(meta: Mapping[str, Any], length_unit: Optional[str] = None) -> List[str]:
    """Lines naming the ICR (or that none was computed) and the AOD/CD relation count."""
    icr = meta["icr"]
    head = f"ICR = {icr['name']} ({icr['note']})" if icr["kind"] != "none" else "ICR: not computed (no grounding source)"
    rel = f"AOD and CD relation count: {meta['relation_ends_label']}"
    return [head, rel + (f"; length unit: {length_unit}" if length_unit else "")]


def _caveats(meta: Mapping[str, Any]) -> Tuple[str, ...]:
    found = list(caveats_in([meta["icr"]["name"]]))
    if meta.get("offline_backends"):
        found.append("offline backends")
    # the scene-graph parser as the recorded model cards say (a heuristic is "offline backends" above)
    found += [t for t in stand_in_caveats("extractor", [k for k in meta.get("parser_kinds") or () if k != "heuristic"])
              if t not in found]
    return tuple(found)


def _table(data: Mapping[str, Any], title: str, cols: Any, notes: List[str]) -> Table:
    return Table(id=str(data["table"]), title=title, axis="detail", columns=cols, rows=list(data["rows"]),
                 provenance=data["provenance"], notes=tuple(notes), caveats=_caveats(data["meta"]))


def _ci(measure: str) -> Dict[str, str]:
    return {"lo_key": f"{measure}_lower", "hi_key": f"{measure}_upper"}


@builder("detail_surfaces", notebook=NOTEBOOK)
def detail_surfaces(data: Mapping[str, Any]) -> Table:
    """One row per surface: captions, mean ICR, AOD, CD and length (the CSV adds the image-cluster
    bootstrap intervals, images and the definitions)."""
    meta = _meta(data)
    icr, be = meta["icr"]["name"], meta["backends"]
    notes = [f"per-surface mean {icr} (Eq. 2), AOD (Eq. 4), CD (Eq. 5) with their 95% image-cluster bootstrap "
             "intervals [lo, hi]",
             *definition_notes(meta, meta.get("length_unit")),
             f"parser: {be['parser']}", f"grounding: {be['grounding']}"]
    cols = columns(("label", "surface", "text"), ("captions", "captions", "int"), ("icr_mean", icr, "ci", 3, _ci("icr")),
                   ("aod_mean", "AOD", "ci", 2, _ci("aod")), ("cd_mean", "CD", "ci", 4, _ci("cd")), ("length_mean", "length", "num", 1))
    return _table(data, "Detailness per surface", cols, notes)


@builder("detail_selection", notebook=NOTEBOOK)
def detail_selection(data: Mapping[str, Any]) -> Table:
    """One row per selection strategy: captions selected, their mean ICR, AOD, length and ITM."""
    meta = _meta(data, "surface_label", "pool", "k", "t")
    icr, be = meta["icr"]["name"], meta["backends"]
    notes = [f"selection strategies on {meta['surface_label']} (pool {meta['pool']}; K={meta['k']}, T={meta['t']})",
             *definition_notes(meta), f"ITM: {be['itm']}", f"parser: {be['parser']}", f"grounding: {be['grounding']}"]
    cols = columns(("label", "strategy", "text"), ("selected", "selected", "int"), ("avg_icr", f"avg {icr}", "num", 3),
                   ("avg_aod", "avg AOD", "num", 2), ("avg_length", "avg length", "num", 1),
                   ("avg_itm", "avg ITM", "num", 3))
    return _table(data, "Caption selection strategies", cols, notes)


@builder("detail_subgraphs", notebook=NOTEBOOK)
def detail_subgraphs(data: Mapping[str, Any]) -> Table:
    """One row per measure and target ratio: captions whose subgraph reaches it, mean achieved ratio."""
    meta = _meta(data, "tolerance", "realiser")
    be: Dict[str, str] = meta["backends"]
    notes = [f"controlled subgraphs (tolerance ±{meta['tolerance']}); realiser: {meta['realiser']}",
             *definition_notes(meta), f"parser: {be['parser']}; grounding: {be['grounding']}"]
    cols = columns(("measure_label", "measure", "text"), ("fraction", "target", "pct", 0),
                   ("reached", "reached", "count_of", {"std_key": "captions"}),
                   ("mean_ratio", "mean achieved ratio", "num", 3))
    return _table(data, "Controlled subgraphs", cols, notes)


__all__ = ["definition_notes", "detail_selection", "detail_subgraphs", "detail_surfaces"]
