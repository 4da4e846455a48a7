"""The judged-claims table ``judged_claims.jsonl`` (read by human verification and detailness).

One row per question answered by every judge of its slice (the both-judges intersection of
:mod:`.cells`), captions in request order, questions in unit order::

    {question_id, caption_id, surface, slice, category, unit, target, span, span_offsets,
     caption_window, image_path, image_key, answers: {judge: "yes"|"no"|"uncertain"},
     judges: [judge names], backend: {judge: "offline"|"model"}}

``span_offsets`` = ``[start, end]`` of the first case-insensitive occurrence of the span (else of
the unit) in ``caption_window`` (the text the extractor saw), or ``null``. Unit, target and span
come from the first judge's request (``meta.units``); the window from the claims request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.io.atomic import atomic_path
from capaudit.io.canonical_json import dumps_line

from .answers import ANSWER_NAMES, JudgeAnswers, RequestIndex, iter_request_rows
from .cells import intersect
from .questions import parse_question_text, span_offsets
from .requests import iter_claims_requests

PathLike = Union[str, Path]
FIELDS = ("question_id", "caption_id", "surface", "slice", "category", "unit", "target", "span", "span_offsets",
          "caption_window", "image_path", "image_key", "answers", "judges", "backend")


def judged_claim_rows(slice_name: str, names: Sequence[str], index: RequestIndex, answers: Sequence[JudgeAnswers],
                      request_paths: Sequence[PathLike], claims_requests: Sequence[PathLike],
                      backends: Mapping[str, str]) -> Iterator[Dict[str, Any]]:
    """The table rows (module docstring)."""
    keys, per_judge = intersect(index, answers)
    first_ids = {per_judge[0][k] for k in keys}
    reqs = {r["request_id"]: r for r in iter_request_rows(request_paths, first_ids)}
    wanted = {(reqs[rid].get("meta") or {}).get("claims_request_id") for rid in first_ids if rid in reqs}
    windows: Dict[str, str] = {}
    for _, _, row in iter_claims_requests(claims_requests):
        if row["request_id"] in wanted:
            windows[row["request_id"]] = str(row["input"].get("caption", ""))
    backend = {n: backends.get(n, "model") for n in names}
    for key in keys:
        rid0 = per_judge[0][key]
        req = reqs[rid0]
        inp, meta = req["input"], req.get("meta") or {}
        units = meta.get("units") or []
        window = windows.get(meta.get("claims_request_id"), "")
        qids0 = index.rows[rid0].qids()
        per_q: List[Dict[str, str]] = [dict() for _ in qids0]
        pos0 = {q: k for k, q in enumerate(qids0)}
        for ji, name in enumerate(names):
            rid = per_judge[ji][key]
            codes = answers[ji].answered[rid]
            for q, a in zip(index.rows[rid].qids(), codes):
                k = pos0.get(q)
                if k is not None:
                    per_q[k][name] = ANSWER_NAMES[a]
        for k, q in enumerate(inp["questions"]):
            if len(per_q[k]) != len(names):
                continue  # not answered by every judge (different question sets)
            if k < len(units) and isinstance(units[k], list) and len(units[k]) == 3:
                unit, target, span = (str(x) for x in units[k])
            else:
                unit, target = parse_question_text(q["category"], q["question"])
                span = ""
            yield {
                "question_id": q["question_id"], "caption_id": inp["caption_id"], "surface": inp.get("surface", ""),
                "slice": slice_name, "category": q["category"], "unit": unit, "target": target, "span": span,
                "span_offsets": span_offsets(window, span, unit), "caption_window": window,
                "image_path": meta.get("image_path"), "image_key": inp.get("image_key"),
                "answers": {n: per_q[k][n] for n in names}, "judges": list(names), "backend": backend,
            }


def write_judged_claims(path: PathLike, rows: Iterator[Dict[str, Any]]) -> int:
    """Write the table atomically; returns the row count."""
    n = 0
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            for r in rows:
                fh.write(dumps_line(r))
                n += 1
    return n


__all__ = ["FIELDS", "judged_claim_rows", "write_judged_claims"]
