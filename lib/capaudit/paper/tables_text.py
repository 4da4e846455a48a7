"""Text-stage tables (reference-spec §1–2): the text budget at B and the paired deltas of fair slices."""

from __future__ import annotations

from typing import Any, Mapping

from ..budgets import DEFAULT_BUDGET
from .stage_tables import builder, columns
from .table_model import Table

PREFIX_FOOTNOTE = r"$^{\dagger}$ top-k prefix mass is 1.0 by construction (k covers every distinct prefix)"


@builder("text_stats", notebook="02_text_stats")
def text_stats(data: Mapping[str, Any]) -> Table:
    """One row per surface at budget B (64 by default): captions, Avg lex, B-eligibility, truncation,
    opener rate, top-k prefix mass (raw, content; dagger when 1.0 by construction), Distinct-1..3,
    rep-3/4 and the normalised duplicate rate."""
    meta = data["meta"]
    b = int(meta.get("budget", DEFAULT_BUDGET))
    note = f"prefix_note{b}"
    rows = list(data["rows"])
    rate = ("num", 4)
    return Table(
        id="text_stats", title=f"Text budget and surface concentration at B={b}", axis="text",
        columns=columns(("surface", "surface", "text"), ("records", "captions", "int"), ("avg_lex", "Avg lex", "num", 2),
                        (f"elig{b}", f"elig@{b}", *rate), (f"trunc{b}", f"trunc@{b}", *rate),
                        (f"opener{b}", "opener", *rate),
                        (f"prefix_raw{b}", "prefix raw", *rate, {"mark_key": note}),
                        (f"prefix_content{b}", "prefix content", *rate, {"mark_key": note}),
                        (f"d1_{b}", "D-1", *rate), (f"d2_{b}", "D-2", *rate), (f"d3_{b}", "D-3", *rate),
                        (f"rep3_{b}", "rep-3", *rate), (f"rep4_{b}", "rep-4", *rate), ("dup_rate", "dup", *rate)),
        rows=rows, provenance=data["provenance"],
        notes=(f"Windows and violation catalog: {meta.get('window_definition', '')}.",),
        footnotes=(PREFIX_FOOTNOTE,) if any(r.get(note) for r in rows) else ())


@builder("text_paired_deltas", notebook="02_text_stats")
def text_paired_deltas(data: Mapping[str, Any]) -> Table:
    """Per fair slice and metric: pairs, mean local − reference delta and its normal 95% interval."""
    return Table(
        id="text_paired_deltas", title="Paired local - reference deltas", axis="text",
        columns=columns(("comparison", "Comparison", "text", {"group": True}), ("metric", "Metric", "text"),
                        ("pairs", "Pairs", "int"), ("delta_mean", "Delta", "signed", 4),
                        ("ci95_low", "CI low", "signed", 4), ("ci95_high", "CI high", "signed", 4)),
        rows=list(data["rows"]), provenance=data["provenance"], latex="tabular",
        csv_columns=("comparison", "metric", "pairs", "delta_mean", "ci95_low", "ci95_high"),
        notes=("paired deltas (local - reference) over the pairs of each fair slice, normal 95% interval",))
