"""Claimed-density rollup schema (reference-spec §14 G4): ``all_cbu_b64_summary.csv``.

One row per ``<comparison>__<surface>`` with caption count, CBU/cap (``cbu_cap``), CBU/100 lex
(``cbu_100tok``), duplicate-row rate and dedup per-type per-caption rates. LF line ends,
``repr`` floats (the reference's hand-assembled rollups).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable

from ._common import UNIT_CATEGORIES, PathLike, write_text

COLUMNS = ("surface", "label", "captions", "cbu_cap", "cbu_100tok", "dup_row") + tuple(f"{t}_cap" for t in UNIT_CATEGORIES)


@dataclass(frozen=True)
class ClaimedRollupRow:
    """Claimed density of one surface of one paired comparison."""

    comparison: str
    surface: str
    label: str
    captions: int
    cbu_cap: float
    cbu_100tok: float
    dup_row: float
    per_type_cap: Dict[str, float]

    @property
    def key(self) -> str:
        return f"{self.comparison}__{self.surface}"


def read_claimed_rollup_csv(path: PathLike) -> Dict[str, ClaimedRollupRow]:
    """Read ``all_cbu_b64_summary.csv``; keyed by ``<comparison>__<surface>``; errors name row and column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: claimed rollup not found") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None or tuple(header) != COLUMNS:
        raise ValueError(f"{path}: row 1 (header): expected columns {list(COLUMNS)}, got {header}")
    out: Dict[str, ClaimedRollupRow] = {}
    for lineno, cells in enumerate(reader, start=2):
        if not cells:
            continue
        if len(cells) != len(COLUMNS):
            raise ValueError(f"{path}: row {lineno}: expected {len(COLUMNS)} cells, got {len(cells)}")
        d = dict(zip(COLUMNS, cells))
        if "__" not in d["surface"]:
            raise ValueError(f"{path}: row {lineno}, column 'surface': expected '<comparison>__<surface>', got {d['surface']!r}")
        comparison, surface = d["surface"].split("__", 1)
        try:
            captions = int(d["captions"])
        except ValueError:
            raise ValueError(f"{path}: row {lineno}, column 'captions': expected an integer, got {d['captions']!r}") from None
        floats: Dict[str, float] = {}
        for c in COLUMNS[3:]:
            try:
                floats[c] = float(d[c])
            except ValueError:
                raise ValueError(f"{path}: row {lineno}, column '{c}': expected a number, got {d[c]!r}") from None
            if floats[c] < 0:
                raise ValueError(f"{path}: row {lineno}, column '{c}': must be >= 0")
        row = ClaimedRollupRow(
            comparison=comparison,
            surface=surface,
            label=d["label"],
            captions=captions,
            cbu_cap=floats["cbu_cap"],
            cbu_100tok=floats["cbu_100tok"],
            dup_row=floats["dup_row"],
            per_type_cap={t: floats[f"{t}_cap"] for t in UNIT_CATEGORIES},
        )
        if row.key in out:
            raise ValueError(f"{path}: row {lineno}: duplicate surface {row.key!r}")
        out[row.key] = row
    return out


def format_claimed_rollup_csv(rows: Iterable[ClaimedRollupRow]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in rows:
        w.writerow(
            [r.key, r.label, r.captions, repr(r.cbu_cap), repr(r.cbu_100tok), repr(r.dup_row)]
            + [repr(r.per_type_cap[t]) for t in UNIT_CATEGORIES]
        )
    return buf.getvalue()


def write_claimed_rollup_csv(rows: Iterable[ClaimedRollupRow], path: PathLike) -> Path:
    return write_text(format_claimed_rollup_csv(rows), path)
