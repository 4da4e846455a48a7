"""Prompt-support summary schema: the TSV the prompt stage writes and the paper layer reads.

One row per (prompt pool, comparison, metric) in the column layout of the reference bootstrap TSV
(reference-spec §3.2). Floats are written with ``repr`` so a read → write round trip of a reference
file is byte-identical. Derived summaries (§3.2, §14 G8):

* :func:`direction_summary` — per comparison × metric: mean block-delta over *all* pools and counts
  of ``stable_direction`` labels (``results/prompt_support_direction_summary.csv``).
* :func:`pool_wins` — number of the seven paper pools with a positive prompt-mass delta.
* :func:`seven_pool_means` — mean over the seven paper pools of the block means (Figure 1 right).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

PathLike = Union[str, Path]

#: TSV columns, in order (reference-spec §3.2).
COLUMNS: Tuple[str, ...] = (
    "prompt_pool",
    "comparison",
    "local_surface",
    "reference_surface",
    "metric",
    "blocks",
    "block_size",
    "records",
    "delta_mean_local_minus_reference",
    "ci95_low",
    "ci95_high",
    "stable_direction",
    "local_block_mean",
    "reference_block_mean",
)

JSD = "jsd"
PROMPT_MASS = "prompt_mass_on_caption_support"
#: The two block-bootstrapped metrics, in the order the stage writes them.
METRICS: Tuple[str, ...] = (JSD, PROMPT_MASS)

#: Labels allowed per metric (§3.2 ``stable_direction``).
DIRECTION_LABELS: Dict[str, Tuple[str, ...]] = {
    JSD: ("local_lower", "reference_lower", "inconclusive"),
    PROMPT_MASS: ("local_higher", "reference_higher", "inconclusive"),
}

#: The reference's eight pools (§3.1); ``sd_prompts_dedup_xzuyn`` is sensitivity only.
ALL_REFERENCE_POOLS: Tuple[str, ...] = (
    "civitai_flux_prompts_aconexx",
    "flux_improved_k_mktr",
    "flux_prompts_chrisgoringe",
    "flux_prompts_regpeter",
    "pickapic_rankings",
    "sd_prompts_2m_andyyang",
    "sd_prompts_dedup_xzuyn",
    "sdxl_refiner_prompts_falah",
)
#: The seven pools the paper counts in pool-wins and Figure 1 (right).
SEVEN_PAPER_POOLS: Tuple[str, ...] = tuple(p for p in ALL_REFERENCE_POOLS if p != "sd_prompts_dedup_xzuyn")

#: Direction-summary CSV columns (``results/prompt_support_direction_summary.csv``).
DIRECTION_SUMMARY_COLUMNS: Tuple[str, ...] = (
    "comparison",
    "metric",
    "records",
    "n",
    "delta_mean_across_pools",
    "local_higher",
    "local_lower",
    "reference_higher",
    "reference_lower",
    "mixed",
)
#: Labels counted by the direction summary. ``inconclusive`` is *not* counted (as in the
#: reference CSV, where Danbooru/JSD has 6 + 1 of 8); ``mixed`` never occurs but is kept.
COUNTED_LABELS: Tuple[str, ...] = DIRECTION_SUMMARY_COLUMNS[5:]


@dataclass(frozen=True)
class PromptSupportRow:
    """One TSV row: a metric's block-delta bootstrap for one pool and one comparison (§3.2)."""

    prompt_pool: str
    comparison: str
    local_surface: str
    reference_surface: str
    metric: str
    blocks: int
    block_size: int
    records: int
    delta_mean_local_minus_reference: float
    ci95_low: float
    ci95_high: float
    stable_direction: str
    local_block_mean: float
    reference_block_mean: float

    def __post_init__(self) -> None:
        problem = _row_problem(self)
        if problem:
            raise ValueError(problem)


@dataclass(frozen=True)
class DirectionSummaryRow:
    """Per comparison × metric: mean delta over pools and label counts (§3.2)."""

    comparison: str
    metric: str
    records: int
    n: int
    delta_mean_across_pools: float
    local_higher: int
    local_lower: int
    reference_higher: int
    reference_lower: int
    mixed: int


@dataclass(frozen=True)
class PoolMeans:
    """Mean over a pool set of the block means of one comparison × metric (Figure 1 right)."""

    comparison: str
    metric: str
    pools: int
    local_mean: float
    reference_mean: float


_INT_COLS = {f.name for f in fields(PromptSupportRow) if f.type in ("int", int)}
_FLOAT_COLS = {f.name for f in fields(PromptSupportRow) if f.type in ("float", float)}


def _row_problem(row: PromptSupportRow) -> Optional[str]:
    """Return a description of what is wrong with ``row``, or None."""
    for name in ("prompt_pool", "comparison", "local_surface", "reference_surface"):
        value = getattr(row, name)
        if not isinstance(value, str) or not value or any(c in value for c in "\t\r\n"):
            return f"column '{name}': must be a non-empty string without tabs/newlines, got {value!r}"
    if row.metric not in METRICS:
        return f"column 'metric': {row.metric!r} is not one of {list(METRICS)}"
    if row.stable_direction not in DIRECTION_LABELS[row.metric]:
        return (
            f"column 'stable_direction': {row.stable_direction!r} is not valid for metric "
            f"{row.metric!r} (expected one of {list(DIRECTION_LABELS[row.metric])})"
        )
    for name in sorted(_INT_COLS):
        value = getattr(row, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"column '{name}': must be a non-negative integer, got {value!r}"
    if row.blocks < 1:
        return f"column 'blocks': must be at least 1, got {row.blocks}"
    for name in sorted(_FLOAT_COLS):
        value = getattr(row, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"column '{name}': must be a finite number, got {value!r}"
    if row.ci95_low > row.ci95_high:
        return f"columns 'ci95_low'/'ci95_high': low {row.ci95_low!r} > high {row.ci95_high!r}"
    return None


def _format(value: object) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def read_prompt_support_tsv(path: PathLike) -> List[PromptSupportRow]:
    """Read and validate a prompt-support TSV; errors name the file, row (1 = header) and column."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    if not lines:
        raise ValueError(f"{path}: empty file (expected a header with columns {list(COLUMNS)})")
    header = lines[0].split("\t")
    if tuple(header) != COLUMNS:
        missing = [c for c in COLUMNS if c not in header]
        extra = [c for c in header if c not in COLUMNS]
        raise ValueError(
            f"{path}: row 1 (header): columns must be exactly {list(COLUMNS)} in order; "
            f"missing {missing}, unexpected {extra}"
        )
    rows: List[PromptSupportRow] = []
    seen: Dict[Tuple[str, str, str], int] = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{path}: row {lineno}: expected {len(COLUMNS)} tab-separated cells, got {len(cells)}")
        values: Dict[str, object] = {}
        for name, cell in zip(COLUMNS, cells):
            try:
                if name in _INT_COLS:
                    values[name] = int(cell)
                elif name in _FLOAT_COLS:
                    values[name] = float(cell)
                else:
                    values[name] = cell
            except ValueError:
                kind = "an integer" if name in _INT_COLS else "a number"
                raise ValueError(f"{path}: row {lineno}, column '{name}': expected {kind}, got {cell!r}") from None
        try:
            row = PromptSupportRow(**values)  # type: ignore[arg-type]
        except ValueError as exc:
            raise ValueError(f"{path}: row {lineno}, {exc}") from None
        key = (row.prompt_pool, row.comparison, row.metric)
        if key in seen:
            raise ValueError(
                f"{path}: row {lineno}: duplicate (prompt_pool, comparison, metric) {key}, first at row {seen[key]}"
            )
        seen[key] = lineno
        rows.append(row)
    return rows


def format_prompt_support_tsv(rows: Iterable[PromptSupportRow]) -> str:
    """The TSV text (LF line ends, ``repr`` floats) for ``rows``."""
    out = ["\t".join(COLUMNS)]
    for row in rows:
        out.append("\t".join(_format(v) for v in astuple(row)))
    return "\n".join(out) + "\n"


def write_prompt_support_tsv(rows: Iterable[PromptSupportRow], path: PathLike) -> Path:
    """Write ``rows`` as a prompt-support TSV; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_prompt_support_tsv(rows), encoding="utf-8")
    return path


def _groups(rows: Iterable[PromptSupportRow]) -> Dict[Tuple[str, str], List[PromptSupportRow]]:
    groups: Dict[Tuple[str, str], List[PromptSupportRow]] = {}
    for row in rows:
        groups.setdefault((row.comparison, row.metric), []).append(row)
    for key, group in groups.items():
        pools = [r.prompt_pool for r in group]
        if len(set(pools)) != len(pools):
            raise ValueError(f"comparison {key[0]!r}, metric {key[1]!r}: a prompt pool appears twice in {pools}")
        # Sum in pool-name order: the reference globbed pools sorted, so this reproduces its floats.
        group.sort(key=lambda r: r.prompt_pool)
    return dict(sorted(groups.items()))


def direction_summary(rows: Iterable[PromptSupportRow]) -> List[DirectionSummaryRow]:
    """Per comparison × metric (sorted): mean delta over all pools present and label counts (§3.2).

    The mean is ``sum(deltas in pool-name order) / n``, which reproduces the reference CSV exactly.
    """
    out: List[DirectionSummaryRow] = []
    for (comparison, metric), group in _groups(rows).items():
        records = {r.records for r in group}
        if len(records) != 1:
            raise ValueError(
                f"comparison {comparison!r}, metric {metric!r}: pools disagree on 'records' {sorted(records)}"
            )
        labels = [r.stable_direction for r in group]
        out.append(
            DirectionSummaryRow(
                comparison=comparison,
                metric=metric,
                records=records.pop(),
                n=len(group),
                delta_mean_across_pools=sum(r.delta_mean_local_minus_reference for r in group) / len(group),
                **{label: labels.count(label) for label in COUNTED_LABELS},
            )
        )
    return out


def format_direction_summary_csv(summary: Iterable[DirectionSummaryRow]) -> str:
    """CSV text (comma, LF, ``repr`` floats) in the reference's layout."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(DIRECTION_SUMMARY_COLUMNS)
    for row in summary:
        writer.writerow([_format(v) for v in astuple(row)])
    return buf.getvalue()


def write_direction_summary_csv(summary: Iterable[DirectionSummaryRow], path: PathLike) -> Path:
    """Write the direction summary CSV; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_direction_summary_csv(summary), encoding="utf-8")
    return path


def _select(rows: Iterable[PromptSupportRow], pools: Optional[Sequence[str]]) -> List[PromptSupportRow]:
    rows = list(rows)
    if pools is None:
        return rows
    wanted = set(pools)
    return [r for r in rows if r.prompt_pool in wanted]


def _check_complete(group: List[PromptSupportRow], pools: Optional[Sequence[str]], key: Tuple[str, str]) -> None:
    if pools is None:
        return
    missing = sorted(set(pools) - {r.prompt_pool for r in group})
    if missing:
        raise ValueError(f"comparison {key[0]!r}, metric {key[1]!r}: pools missing from the rows: {missing}")


def pool_wins(
    rows: Iterable[PromptSupportRow], pools: Optional[Sequence[str]] = SEVEN_PAPER_POOLS
) -> Dict[str, int]:
    """Per comparison: number of ``pools`` with prompt-mass delta > 0 (§3.2 pool-wins).

    ``pools=None`` uses every pool present. Every listed pool must be present for every comparison.
    """
    out: Dict[str, int] = {}
    for (comparison, metric), group in _groups(_select(rows, pools)).items():
        if metric != PROMPT_MASS:
            continue
        _check_complete(group, pools, (comparison, metric))
        out[comparison] = sum(1 for r in group if r.delta_mean_local_minus_reference > 0)
    return out


def pool_losses(
    rows: Iterable[PromptSupportRow], pools: Optional[Sequence[str]] = SEVEN_PAPER_POOLS
) -> Dict[str, List[str]]:
    """Per comparison: the ``pools`` (sorted) whose prompt-mass delta is not > 0."""
    out: Dict[str, List[str]] = {}
    for (comparison, metric), group in _groups(_select(rows, pools)).items():
        if metric == PROMPT_MASS:
            _check_complete(group, pools, (comparison, metric))
            out[comparison] = [r.prompt_pool for r in group if not r.delta_mean_local_minus_reference > 0]
    return out


def seven_pool_means(
    rows: Iterable[PromptSupportRow], pools: Optional[Sequence[str]] = SEVEN_PAPER_POOLS
) -> List[PoolMeans]:
    """Mean over ``pools`` of local/reference block means, per comparison × metric (Figure 1 right).

    Returns rows sorted by (comparison, metric); ``pools=None`` averages every pool present.
    """
    out: List[PoolMeans] = []
    for key, group in _groups(_select(rows, pools)).items():
        _check_complete(group, pools, key)
        n = len(group)
        out.append(
            PoolMeans(
                comparison=key[0],
                metric=key[1],
                pools=n,
                local_mean=sum(r.local_block_mean for r in group) / n,
                reference_mean=sum(r.reference_block_mean for r in group) / n,
            )
        )
    return out


def pool_means_table(means: Iterable[PoolMeans]) -> Dict[str, Dict[str, Tuple[float, float]]]:
    """``{comparison: {metric: (local_mean, reference_mean)}}`` view of :func:`seven_pool_means`."""
    table: Dict[str, Dict[str, Tuple[float, float]]] = {}
    for m in means:
        table.setdefault(m.comparison, {})[m.metric] = (m.local_mean, m.reference_mean)
    return table


def rows_to_records(rows: Iterable[object]) -> List[Mapping[str, object]]:
    """Dataclass rows → list of dicts (for ``pandas.DataFrame``)."""
    return [{f.name: getattr(r, f.name) for f in fields(r)} for r in rows]  # type: ignore[arg-type]
