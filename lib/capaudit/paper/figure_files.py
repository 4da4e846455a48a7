"""Writing one figure's files: ``<name>.pdf``, ``<name>.png`` (200 dpi) and ``<name>.csv`` (the plotted rows).

PDF and PNG carry no timestamps or software version, so a rerun writes the same bytes.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Dict, Mapping, Sequence


def save_figure_files(fig: Any, out_dir: Path, name: str, rows: Sequence[Mapping[str, Any]]) -> Dict[str, Path]:
    """Save ``fig`` as ``out_dir/<name>.pdf`` and ``.png`` and ``rows`` as ``<name>.csv`` (columns: the
    first row's keys); returns the three paths by suffix."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"pdf": out_dir / f"{name}.pdf", "png": out_dir / f"{name}.png", "csv": out_dir / f"{name}.csv"}
    fig.savefig(paths["pdf"], bbox_inches="tight", metadata={"CreationDate": None, "ModDate": None})
    fig.savefig(paths["png"], bbox_inches="tight", dpi=200, metadata={"Software": None})
    with paths["csv"].open("w", newline="", encoding="utf-8") as fh:
        names = list(rows[0]) if rows else []
        w = csv.DictWriter(fh, fieldnames=names, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(dict(r))
    return paths
