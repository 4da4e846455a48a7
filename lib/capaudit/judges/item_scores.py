"""Per-image scores of a judge store (``capaudit judges item-scores``).

One row per request (image): ``item_id`` (the caption id), ``group`` (the surface: for an import,
the text-to-image model), ``score`` = share of its questions answered ``yes`` (after dependency
scoring with ``dependency=True``, :mod:`.dependency`), ``questions``, ``yes``, ``answered``
(False: the store has no valid answer for the image; ``score`` is then ``null``, never 0) and
``zeroed`` (questions turned to ``no`` by dependency scoring) and ``missing_answers``: questions an
imported release left unanswered for an answered image (``answer_status`` ``missing``) are left out
of ``questions`` and the score, as DSG's scripts score only the answered rows (with dependency on,
such a parent counts as not answered yes; DSG's scripts would fail there). This is DSG's item score
(``average_score_with_dependency`` / ``..._without_dependency``) and TIFA's caption score.
Rows follow the request order. What to do with an unanswered image is the caller's choice
(``judges correlate --missing zero|skip``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import InputError

from ._stream import check_cut_lines
from .answers import ANSWER_CODE, RequestIndex, load_answers
from .dependency import DependencyCounts, load_parents, with_dependency

PathLike = Union[str, Path]


@dataclass(frozen=True)
class ItemScore:
    item_id: str
    group: str
    score: Optional[float]
    questions: int
    yes: int
    answered: bool
    zeroed: int
    missing_answers: int = 0


@dataclass
class ItemScores:
    rows: List[ItemScore]
    dependency: DependencyCounts
    failed: int  # requests with a response that is not a valid answer

    def by_key(self) -> Dict[Tuple[str, str], ItemScore]:
        return {(r.group, r.item_id): r for r in self.rows}


def item_scores(requests: Sequence[PathLike], responses: Sequence[PathLike], *, dependency: bool,
                dsg_script_quirks: bool = False) -> ItemScores:
    """Item scores of one judge (module docstring)."""
    index = RequestIndex.from_files(requests)
    answers = load_answers(index, responses)
    check_cut_lines(answers.cut_lines)
    counts = DependencyCounts()
    plain = np.frombuffer(answers.codes, dtype=np.uint8)
    if dependency:
        answers, counts = with_dependency(index, answers, load_parents(requests), dsg_script_quirks)
    elif dsg_script_quirks:
        raise InputError("--dsg-script-quirks changes dependency scoring only; use it with --dependency on",
                         field="--dsg-script-quirks")
    codes = np.frombuffer(answers.codes, dtype=np.uint8)
    rows: List[ItemScore] = []
    yes = ANSWER_CODE["yes"]
    missing = missing_answer_positions(index, responses)
    for r in range(len(index.request_ids)):
        o, n = index.qoff[r], index.qlen[r]
        surface = index.surfaces[index.surface_of[r]]
        if answers.flags[r]:
            keep = np.ones(n, dtype=bool)
            keep[missing.get(r, [])] = False
            q = codes[o:o + n][keep]
            k = int(keep.sum())
            y = int(np.count_nonzero(q == yes))
            zeroed = int(np.count_nonzero(plain[o:o + n][keep] != q)) if dependency else 0
            rows.append(ItemScore(index.caption_ids[r], surface, y / k if k else None, k, y, True, zeroed, n - k))
        else:
            rows.append(ItemScore(index.caption_ids[r], surface, None, n, 0, False, 0))
    seen: Dict[Tuple[str, str], int] = {}
    for k, row in enumerate(rows):
        key = (row.group, row.item_id)
        if key in seen:
            raise InputError(f"two requests for image ({row.group}, {row.item_id}) in the store; an item score "
                             "needs one request per image", path=", ".join(map(str, requests)))
        seen[key] = k
    return ItemScores(rows, counts, len(answers.failures))


def missing_answer_positions(index: RequestIndex, responses: Sequence[PathLike]) -> Dict[int, List[int]]:
    """Index row → positions of its questions whose imported answer is ``missing`` (only rows that
    mention the status are parsed)."""
    from ._stream import store_file_list

    out: Dict[int, List[int]] = {}
    files, _ = store_file_list(responses)
    for f in files:
        with open(f, "rb") as fh:
            for line in fh:
                if b'"missing"' not in line:
                    continue
                try:
                    row = json.loads(line)
                    r = index.ids.get(row["request_id"])
                    results = row["parsed"]["question_results"]
                except (ValueError, KeyError, TypeError):
                    continue  # a row load_answers already judged; nothing to leave out
                if r is not None and row.get("ok"):
                    pos = [k for k, q in enumerate(results) if isinstance(q, dict) and q.get("answer_status") == "missing"]
                    if pos:
                        out[r] = pos
    return out


def write_item_scores(path: PathLike, scores: ItemScores) -> int:
    """``SCORES.jsonl``, one row per image, written atomically."""
    from capaudit.io.atomic import write_text_atomic

    text = "".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in scores.rows)
    write_text_atomic(path, text)
    return len(scores.rows)


def read_item_scores(path: PathLike) -> List[ItemScore]:
    """Rows written by :func:`write_item_scores` (file and line named on a bad row)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("item scores file not found", path=p)
    out: List[ItemScore] = []
    fields = set(ItemScore.__dataclass_fields__)
    with open(p, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d: Any = json.loads(line)
            except ValueError:
                raise InputError("not a JSON line", path=p, line=line_no) from None
            if not isinstance(d, dict) or not set(d) <= fields or not fields - {"missing_answers"} <= set(d):
                raise InputError(f"expected the fields {sorted(fields)}", path=p, line=line_no)
            out.append(ItemScore(**d))
    if not out:
        raise InputError("no item score rows", path=p)
    return out


__all__ = ["ItemScore", "ItemScores", "item_scores", "write_item_scores", "read_item_scores"]
