"""Data frames of a prompt-support run for the 03_prompt_support notebook (no computation of
their own: each reshapes a part of :class:`capaudit.prompts.stage.PromptSupportResult`)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

import pandas as pd

from capaudit.prompts.pools import PreparedPools
from capaudit.prompts.stage import PromptSupportResult
from capaudit.summaries.prompt_support import rows_to_records

SENSITIVITY_METRICS = ("prompt_mass_on_caption_support", "caption_mass_on_prompt_support", "jsd")


def _require_prepared(prepared: Optional[PreparedPools]) -> PreparedPools:
    if prepared is None:
        raise ValueError("prompt_support.pools.prepare: no pools were prepared in this run, so there is "
                         "no preparation table (pool files given as ready have no §3.1 counts)")
    return prepared


def preparation_counts(prepared: Optional[PreparedPools]) -> pd.DataFrame:
    """One row per prepared source: the §3.1 filter counts of its manifest entry."""
    sources: Mapping[str, Mapping[str, Any]] = _require_prepared(prepared).manifest["sources"]
    return pd.DataFrame({name: entry["stats"] for name, entry in sources.items()}).T


def pool_overlap_totals(prepared: Optional[PreparedPools]) -> pd.DataFrame:
    """One row per pool: its overlap counts, plus the number of distinct prompts over all pools."""
    overlap = _require_prepared(prepared).manifest["overlap"]
    return pd.DataFrame(overlap["pools"]).T.assign(distinct_over_all_pools=overlap["distinct_prompts"])


def shared_prompt_pairs(prepared: Optional[PreparedPools]) -> pd.DataFrame:
    """Pool pairs that share at least one prompt, most shared first."""
    overlap = pd.DataFrame(_require_prepared(prepared).overlap)
    return overlap[overlap["shared"] > 0].sort_values("shared", ascending=False)


def bootstrap_rows(result: PromptSupportResult) -> pd.DataFrame:
    """The §3.2 TSV rows (one per pool × comparison × metric)."""
    return pd.DataFrame(rows_to_records(result.rows))


def direction_table(result: PromptSupportResult) -> pd.DataFrame:
    """Per comparison × metric: mean block-delta over all pools and the direction label counts."""
    return pd.DataFrame(rows_to_records(result.direction))


def pool_wins_table(result: PromptSupportResult) -> pd.DataFrame:
    """Per comparison: pools won (positive prompt-mass delta) and the pools lost."""
    return pd.DataFrame({"pools_won": result.wins, "pools_lost": result.losses})


def sensitivity_means(result: PromptSupportResult) -> pd.DataFrame:
    """Whole-surface support per comparison × budget × n-gram, mean over pools, local and reference
    side by side."""
    sens = pd.DataFrame(result.sensitivity)
    if sens.empty:  # no prompt_support.sensitivity section: nothing to average
        return sens
    return sens.groupby(["comparison", "role", "budget", "ngram"], sort=False)[
        list(SENSITIVITY_METRICS)
    ].mean().unstack("role")


def written_files(result: PromptSupportResult) -> pd.Series:
    """What the stage wrote: output name → path."""
    return pd.Series({k: str(v) for k, v in result.paths.items()})
