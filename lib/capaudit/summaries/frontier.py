"""Budget-frontier table schema (reference-spec §4.4, §14 G6): ``cc12m_budget_frontier_plot_*.csv``.

One row per (budget B, surface): ``valid`` = captions with an ok extraction, ``bad_json`` =
``status.bad`` of the merged claimed summary of that budget (shared by its surfaces),
``cbu_per_cap``, ``cbu_per_100tok``, ``dup_row_rate``, dedup per-type per-caption rates and
``pareto_efficiency_yield``: 1 if no other surface at the same budget is ≥ on both
``cbu_per_cap`` and ``cbu_per_100tok`` and > on at least one. The reader recomputes the flag and
rejects a file whose stored flag disagrees. Written like ``csv.DictWriter`` (CRLF line ends,
``repr`` floats), so a reference file round-trips byte-identically.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ._common import UNIT_CATEGORIES, PathLike, write_text
from .claimed import ClaimedSummary

TYPE_COLUMNS: Tuple[str, ...] = tuple(f"{t}_per_cap" for t in UNIT_CATEGORIES)
COLUMNS: Tuple[str, ...] = (
    ("budget", "surface", "label", "valid", "bad_json", "cbu_per_cap", "cbu_per_100tok", "dup_row_rate")
    + TYPE_COLUMNS
    + ("pareto_efficiency_yield",)
)
_INT_COLUMNS = ("budget", "valid", "bad_json", "pareto_efficiency_yield")
_STR_COLUMNS = ("surface", "label")


@dataclass(frozen=True)
class FrontierRow:
    """One (budget, surface) row of the frontier table."""

    budget: int
    surface: str
    label: str
    valid: int
    bad_json: int
    cbu_per_cap: float
    cbu_per_100tok: float
    dup_row_rate: float
    per_type_per_cap: Dict[str, float]
    pareto_efficiency_yield: int = 0

    def to_row(self) -> Dict[str, object]:
        out: Dict[str, object] = {
            "budget": self.budget,
            "surface": self.surface,
            "label": self.label,
            "valid": self.valid,
            "bad_json": self.bad_json,
            "cbu_per_cap": self.cbu_per_cap,
            "cbu_per_100tok": self.cbu_per_100tok,
            "dup_row_rate": self.dup_row_rate,
        }
        out.update({f"{t}_per_cap": self.per_type_per_cap[t] for t in UNIT_CATEGORIES})
        out["pareto_efficiency_yield"] = self.pareto_efficiency_yield
        return out


def dominates(a: FrontierRow, b: FrontierRow) -> bool:
    """``a`` is ≥ ``b`` on both CBU/cap and CBU/100 lex and > on at least one (§4.4)."""
    ge = a.cbu_per_cap >= b.cbu_per_cap and a.cbu_per_100tok >= b.cbu_per_100tok
    gt = a.cbu_per_cap > b.cbu_per_cap or a.cbu_per_100tok > b.cbu_per_100tok
    return ge and gt


def pareto_flags(rows: Sequence[FrontierRow]) -> List[int]:
    """Per row: 1 if no other row with the same budget dominates it, else 0."""
    return [
        0 if any(o is not r and o.budget == r.budget and dominates(o, r) for o in rows) else 1 for r in rows
    ]


def with_pareto_flags(rows: Sequence[FrontierRow]) -> List[FrontierRow]:
    """Copies of ``rows`` with ``pareto_efficiency_yield`` recomputed by the dominance rule."""
    return [replace(r, pareto_efficiency_yield=f) for r, f in zip(rows, pareto_flags(rows))]


def rows_from_claimed(
    budget: int, summary: ClaimedSummary, labels: Mapping[str, str], surfaces: Optional[Sequence[str]] = None
) -> List[FrontierRow]:
    """Frontier rows (flags unset) for one budget's merged claimed summary (§4.4).

    ``labels`` maps surface ids to display labels; ``surfaces`` defaults to ``labels``' order.
    ``bad_json`` is the summary's ``status.bad`` (0 if absent).
    """
    out = []
    for name in surfaces if surfaces is not None else list(labels):
        s = summary.surface(name)
        out.append(
            FrontierRow(
                budget=budget,
                surface=name,
                label=labels[name],
                valid=s.captions,
                bad_json=summary.status.bad or 0,
                cbu_per_cap=s.cbu_per_cap,
                cbu_per_100tok=s.cbu_per_100_lex,
                dup_row_rate=s.ratios["duplicate_row_rate"],
                per_type_per_cap=dict(s.per_type_dedup_per_caption),
            )
        )
    return out


def _fmt(v: object) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def format_frontier_csv(rows: Iterable[FrontierRow]) -> str:
    """CSV text like ``csv.DictWriter`` (CRLF, ``repr`` floats)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(COLUMNS)
    for r in rows:
        d = r.to_row()
        w.writerow([_fmt(d[c]) for c in COLUMNS])
    return buf.getvalue()


def write_frontier_csv(rows: Sequence[FrontierRow], path: PathLike, recompute_flags: bool = True) -> Path:
    """Write the frontier table (flags recomputed by default); returns the path."""
    rows = with_pareto_flags(rows) if recompute_flags else list(rows)
    return write_text(format_frontier_csv(rows), path)


def read_frontier_csv(path: PathLike, check_flags: bool = True) -> List[FrontierRow]:
    """Read and validate a frontier CSV; errors name the file, row (1 = header) and column.

    With ``check_flags`` the stored ``pareto_efficiency_yield`` must equal the recomputed one.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: frontier table not found") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise ValueError(f"{path}: empty file (expected header {list(COLUMNS)})") from None
    if tuple(header) != COLUMNS:
        raise ValueError(
            f"{path}: row 1 (header): expected columns {list(COLUMNS)}, "
            f"missing {[c for c in COLUMNS if c not in header]}, unexpected {[c for c in header if c not in COLUMNS]}"
        )
    rows: List[FrontierRow] = []
    seen: Dict[Tuple[int, str], int] = {}
    for lineno, cells in enumerate(reader, start=2):
        if not cells:
            continue
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{path}: row {lineno}: expected {len(COLUMNS)} cells, got {len(cells)}")
        vals: Dict[str, object] = {}
        for c, v in zip(COLUMNS, cells):
            try:
                vals[c] = int(v) if c in _INT_COLUMNS else v if c in _STR_COLUMNS else float(v)
            except ValueError:
                kind = "an integer" if c in _INT_COLUMNS else "a number"
                raise ValueError(f"{path}: row {lineno}, column '{c}': expected {kind}, got {v!r}") from None
        for c in ("budget", "valid", "bad_json"):
            if vals[c] < 0:  # type: ignore[operator]
                raise ValueError(f"{path}: row {lineno}, column '{c}': must be >= 0, got {vals[c]}")
        if vals["pareto_efficiency_yield"] not in (0, 1):
            raise ValueError(f"{path}: row {lineno}, column 'pareto_efficiency_yield': must be 0 or 1")
        for c in ("cbu_per_cap", "cbu_per_100tok", "dup_row_rate") + TYPE_COLUMNS:
            if vals[c] < 0:  # type: ignore[operator]
                raise ValueError(f"{path}: row {lineno}, column '{c}': must be >= 0, got {vals[c]}")
        row = FrontierRow(
            budget=vals["budget"],  # type: ignore[arg-type]
            surface=vals["surface"],  # type: ignore[arg-type]
            label=vals["label"],  # type: ignore[arg-type]
            valid=vals["valid"],  # type: ignore[arg-type]
            bad_json=vals["bad_json"],  # type: ignore[arg-type]
            cbu_per_cap=vals["cbu_per_cap"],  # type: ignore[arg-type]
            cbu_per_100tok=vals["cbu_per_100tok"],  # type: ignore[arg-type]
            dup_row_rate=vals["dup_row_rate"],  # type: ignore[arg-type]
            per_type_per_cap={t: vals[f"{t}_per_cap"] for t in UNIT_CATEGORIES},  # type: ignore[misc]
            pareto_efficiency_yield=vals["pareto_efficiency_yield"],  # type: ignore[arg-type]
        )
        key = (row.budget, row.surface)
        if key in seen:
            raise ValueError(f"{path}: row {lineno}: duplicate (budget, surface) {key}, first at row {seen[key]}")
        seen[key] = lineno
        rows.append(row)
    bad = {}
    for r in rows:
        bad.setdefault(r.budget, set()).add(r.bad_json)
    for b, values in bad.items():
        if len(values) > 1:
            raise ValueError(f"{path}: budget {b}: 'bad_json' must be shared by all surfaces, got {sorted(values)}")
    if check_flags:
        for i, (r, f) in enumerate(zip(rows, pareto_flags(rows))):
            if r.pareto_efficiency_yield != f:
                raise ValueError(
                    f"{path}: budget {r.budget}, surface {r.surface}: pareto_efficiency_yield "
                    f"{r.pareto_efficiency_yield} != {f} recomputed by the dominance rule"
                )
    return rows


def by_budget(rows: Iterable[FrontierRow]) -> Dict[int, List[FrontierRow]]:
    """Rows grouped by budget (ascending), in file order within a budget."""
    out: Dict[int, List[FrontierRow]] = {}
    for r in rows:
        out.setdefault(r.budget, []).append(r)
    return dict(sorted(out.items()))
