"""Two-rater agreement from a labels file: ``capaudit human agreement`` (reference-spec §7).

``LABELS.csv`` has the columns ``item_id,rater,label`` (extra columns are ignored): exactly two
raters, labels from ``yes``/``no``/``uncertain``, at most one label per (item, rater). Statistics are
computed over the items both raters labelled (:func:`capaudit.stats.agreement.two_rater_report`):
nominal over the three labels (Gwet's chance term with q = 3) and binary after dropping every item
either rater answered ``uncertain`` (q = 2).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Dict, List, Tuple, Union

from capaudit.errors import EmptyInputError, InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.io.text import checked_lines, open_text
from capaudit.stats.agreement import NOMINAL_LABELS, two_rater_report

PathLike = Union[str, Path]
COLUMNS = ("item_id", "rater", "label")


def read_two_rater_labels(path: PathLike) -> Tuple[Tuple[str, str], List[str], List[str], List[str]]:
    """``((rater_a, rater_b), item_ids, labels_a, labels_b)`` over items labelled by both (raters sorted)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("labels file not found", path=path)
    seen: Dict[Tuple[str, str], int] = {}
    labels: Dict[str, Dict[str, str]] = {}
    raters: List[str] = []
    try:
        with open_text(path) as fh:
            reader = csv.DictReader(checked_lines(fh, path))
            if reader.fieldnames is None:
                raise EmptyInputError(f"the file is empty (need a header {','.join(COLUMNS)})", path=path)
            header = reader.fieldnames
            for c in COLUMNS:
                if c not in header:
                    raise InputError(f"missing column (header: {','.join(header) or 'empty'}; need "
                                     f"{','.join(COLUMNS)})", path=path, line=1, field=c)
            for row in reader:
                line = reader.line_num
                vals = {}
                for c in COLUMNS:
                    v = row.get(c)
                    v = v.strip() if isinstance(v, str) else ""
                    if not v:
                        raise InputError("empty value", path=path, line=line, field=c)
                    vals[c] = v
                if vals["label"] not in NOMINAL_LABELS:
                    raise InputError(f"{vals['label']!r} is not one of {list(NOMINAL_LABELS)}", path=path, line=line,
                                     field="label")
                key = (vals["item_id"], vals["rater"])
                if key in seen:
                    raise InputError(f"item {key[0]!r} already labelled by rater {key[1]!r} on line {seen[key]}",
                                     path=path, line=line, field="item_id")
                seen[key] = line
                if vals["rater"] not in raters:
                    raters.append(vals["rater"])
                    if len(raters) > 2:
                        raise InputError(f"a third rater {vals['rater']!r}: the file must hold exactly two raters "
                                         f"({raters[0]!r}, {raters[1]!r})", path=path, line=line, field="rater")
                labels.setdefault(vals["item_id"], {})[vals["rater"]] = vals["label"]
    except csv.Error as exc:
        raise InputError(f"not a valid CSV file ({exc})", path=path) from None
    if len(raters) != 2:
        raise EmptyInputError(f"exactly two raters are needed, found {len(raters)} ({', '.join(raters) or 'none'})",
                              path=path, field="rater")
    ra, rb = sorted(raters)
    both = [i for i in labels if ra in labels[i] and rb in labels[i]]
    if not both:
        raise EmptyInputError("no item was labelled by both raters", path=path, field="item_id")
    return (ra, rb), both, [labels[i][ra] for i in both], [labels[i][rb] for i in both]


def labels_agreement(labels_csv: PathLike, out: PathLike) -> Dict[str, Any]:
    """Compute the two-rater report of ``labels_csv`` and write it to ``out`` (JSON, atomically)."""
    _, _, a, b = read_two_rater_labels(labels_csv)
    report = two_rater_report(a, b)
    write_json_atomic(out, report)
    return report


__all__ = ["COLUMNS", "labels_agreement", "read_two_rater_labels"]
