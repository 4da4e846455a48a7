"""Prompt-support tables (reference-spec §3): pools won per comparison and cross-pool overlap."""

from __future__ import annotations

from typing import Any, Mapping

from .stage_tables import builder, columns
from .table_model import Table


@builder("prompt_pool_wins", notebook="03_prompt_support")
def prompt_pool_wins(data: Mapping[str, Any]) -> Table:
    """Per comparison: pools won of the pools counted, the means over the pools of the local (L) and
    reference (R) block means of prompt mass and JSD, and the pools lost (a whole tabular)."""
    meta = data["meta"]
    budget = "full" if meta.get("budget") is None else meta["budget"]
    blocks = ", ".join(f"{k} {v}" for k, v in (meta.get("block_sizes") or {}).items())
    return Table(
        id="prompt_pool_wins", title="Prompt-pool support: pools won by the local surface", axis="prompts",
        columns=columns(("comparison", "Comparison", "text"), ("wins", "Wins", "count_of", {"std_key": "pools"}),
                        ("prompt_mass_local", "Prompt mass (L)", "num", 4),
                        ("prompt_mass_reference", "Prompt mass (R)", "num", 4),
                        ("jsd_local", "JSD (L)", "num", 4), ("jsd_reference", "JSD (R)", "num", 4),
                        ("pools_lost", "Pools lost", "text")),
        rows=list(data["rows"]), provenance=data["provenance"], latex="tabular",
        notes=("Prompt-pool support: pools won by the local surface (prompt-mass delta > 0); L local, R reference, "
               "means over the pools of the block means",
               f"{meta.get('pools')} pools; B={budget}, n={meta.get('ngram')}, {meta.get('reps')} bootstrap "
               f"replicates; block sizes: {blocks}"))


@builder("prompt_pool_overlap", notebook="03_prompt_support")
def prompt_pool_overlap(data: Mapping[str, Any]) -> Table:
    """Per pair of prepared pools: distinct prompts of each, prompts shared and their share of each."""
    return Table(
        id="prompt_pool_overlap", title="Prompts shared between prepared pools", axis="prompts",
        columns=columns(("pool_a", "Pool A", "text", {"group": True}), ("pool_b", "Pool B", "text"),
                        ("prompts_a", "Prompts A", "int"), ("prompts_b", "Prompts B", "int"),
                        ("shared", "Shared", "int"), ("share_of_a", "Share of A", "num", 4),
                        ("share_of_b", "Share of B", "num", 4)),
        rows=list(data["rows"]), provenance=data["provenance"], latex="tabular",
        csv_columns=("pool_a", "pool_b", "prompts_a", "prompts_b", "shared", "share_of_a", "share_of_b"),
        notes=("shared prompts: same blake2b key of the lower-cased, normalised prompt (prompt-only pools)",))
