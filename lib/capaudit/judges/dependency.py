"""Dependency-aware scoring (DSG, Cho et al. 2024): a question whose parent was not answered yes scores 0.

Parents are per question, by raw unit index within the same request, in ``meta.parents`` of a
judge request (``judges import`` fills it from a release's dependency graph; ``judges build``
from the extractor's optional ``parents`` links). With dependency on, a question with a parent
whose **own** answer is not ``yes`` counts as ``no`` (DSG's released scoring, ``calc_vqa_score``:
a parent with score 0 — any answer but ``yes`` — zeroes its children; the parents' own answers
are used, so zeroing does not cascade through a chain). A parent index that is not a question of
the request is counted (``unknown_parents``) and ignored.

``dsg_script_quirks``: DSG's released loader parses an item's dependency cells inside one
``try``; a cell it cannot parse (``"5, right"``) drops the dependencies of the **whole item**.
With this option an image whose request records such a cell (``meta.malformed_dependency``) is
scored without dependencies, as the scripts do; without it the cell's numbers are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import InputError

from .answers import ANSWER_CODE, JudgeAnswers, RequestIndex, iter_request_rows

PathLike = Union[str, Path]
YES, NO = ANSWER_CODE["yes"], ANSWER_CODE["no"]


@dataclass
class Parents:
    """Request id → per-question parent indices (only requests with at least one parent)."""

    by_request: Dict[str, List[Tuple[int, ...]]] = field(default_factory=dict)
    #: request ids whose dependency record has a cell DSG's loader cannot parse
    malformed: set = field(default_factory=set)


def load_parents(requests: Sequence[PathLike]) -> Parents:
    """Parents recorded in the judge requests' ``meta.parents`` (module docstring)."""
    out = Parents()
    for row in iter_request_rows(requests):
        meta = row.get("meta") or {}
        parents = meta.get("parents")
        if parents is None:
            continue
        rid = row.get("request_id")
        qs = (row.get("input") or {}).get("questions") or []
        if not isinstance(parents, list) or len(parents) != len(qs) or not all(
                isinstance(p, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in p) for p in parents):
            raise InputError(f"request {rid}: meta.parents must be one list of question indices per question",
                             field="meta.parents")
        if any(parents):
            out.by_request[rid] = [tuple(p) for p in parents]
        if any(meta.get("malformed_dependency") or []):
            out.malformed.add(rid)
    return out


@dataclass
class DependencyCounts:
    """What dependency scoring changed: questions turned to ``no`` and parents it could not find."""

    zeroed: int = 0
    unknown_parents: int = 0
    images_without_dependencies: int = 0  # dsg_script_quirks: images whose dependencies were dropped


def apply_to_codes(codes: np.ndarray, indices: Sequence[int], parents: Sequence[Tuple[int, ...]],
                   counts: DependencyCounts) -> np.ndarray:
    """One request's answer codes with dependency applied (module docstring)."""
    pos = {u: k for k, u in enumerate(indices)}
    out = codes.copy()
    for k, ps in enumerate(parents):
        for p in ps:
            j = pos.get(p)
            if j is None:
                counts.unknown_parents += 1
                continue
            if codes[j] != YES:
                if out[k] != NO:
                    counts.zeroed += 1
                out[k] = NO
                break
    return out


def with_dependency(index: RequestIndex, answers: JudgeAnswers, parents: Parents,
                    dsg_script_quirks: bool = False) -> Tuple[JudgeAnswers, DependencyCounts]:
    """A copy of ``answers`` whose codes have dependency applied on every answered request."""
    counts = DependencyCounts()
    codes = np.frombuffer(answers.codes, dtype=np.uint8).copy()
    for rid, ps in parents.by_request.items():
        r = index.ids.get(rid)
        if r is None or not answers.flags[r]:
            continue
        if dsg_script_quirks and rid in parents.malformed:
            counts.images_without_dependencies += 1
            continue
        o, n = index.qoff[r], index.qlen[r]
        codes[o:o + n] = apply_to_codes(codes[o:o + n], index.qidx[o:o + n].tolist(), ps, counts)
    return replace(answers, codes=bytearray(codes.tobytes())), counts


__all__ = ["Parents", "DependencyCounts", "load_parents", "apply_to_codes", "with_dependency"]
