"""Rows of the prompt-support stage's tables (reference-spec §3.2); ``paper.tables_prompts`` renders them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

from capaudit.summaries.prompt_support import JSD, PROMPT_MASS, PromptSupportRow, pool_losses, pool_wins, seven_pool_means

PathLike = Union[str, Path]


def pool_wins_rows(rows: Iterable[PromptSupportRow], pools: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    """Per comparison (sorted): pools won (prompt-mass delta > 0) of the pools counted, mean over the
    pools of the local / reference block means (prompt mass, JSD; None when a metric is absent) and
    the pools lost (comma-separated; None when none was lost).

    ``pools=None`` counts every pool present; pass the seven paper pools for the reference run.
    """
    rows = list(rows)
    wins = pool_wins(rows, pools)
    losses = pool_losses(rows, pools)
    means = {(m.comparison, m.metric): m for m in seven_pool_means(rows, pools)}
    out = []
    for comparison in sorted(wins):
        mass = means[(comparison, PROMPT_MASS)]
        jsd = means.get((comparison, JSD))
        out.append({"comparison": comparison, "wins": wins[comparison], "pools": mass.pools,
                    "prompt_mass_local": mass.local_mean, "prompt_mass_reference": mass.reference_mean,
                    "jsd_local": jsd.local_mean if jsd else None, "jsd_reference": jsd.reference_mean if jsd else None,
                    "pools_lost": ", ".join(losses[comparison]) or None})
    return out


def write_text(text: str, path: PathLike) -> Path:
    """Write ``text`` (UTF-8) atomically: the old file stays until the new one is complete."""
    from capaudit.io.atomic import write_text_atomic

    return write_text_atomic(path, text)


__all__ = ["pool_wins_rows", "write_text"]
