"""Per-judge summary (reference-spec §5.3) → :class:`capaudit.summaries.vqa.VqaSummary`.

One row per request id (answered-wins merge, :mod:`._stream`; replaces the reference's
last-row-wins). Per surface: ``responses`` (merged request ids with a response, failures
included, §14 G5), ``ok`` (answered and valid), ``bad``, ``questions`` = yes + no + uncertain over
ok rows, the answer counts and the six rates (``support_rate`` = yes/questions, ``risk_rate`` =
no/questions, ``uncertainty_rate`` = uncertain/questions); the same per category. ``examples``:
up to 20 each of ``bad_response`` (file, line, request and reason: failed rows and answers whose
ids do not match their questions), ``no`` and ``uncertain`` answers (with question text). Surfaces
are listed in request order, categories in the summarizer's type order.

``capaudit judges summarize`` never prints a number from missing data: a response path with no
file, an empty store, or a set of responses none of which is a valid answer is an error; so is a
cut last line (a write interrupted) — unless its store is still being written (a run in progress,
its lock held), in which case the summary is of what is there and says so: ``input.cut_last_lines``
lists the cut lines and the command line counts them. ``input.degraded`` lists the notes of
responses a server answered with less than its full means (``capaudit_degraded``, e.g. the
annotation judge without Tesseract) and how many responses carry each.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from capaudit.errors import InputError
from capaudit.summaries.categories import UNIT_CATEGORIES
from capaudit.summaries.vqa import MAX_EXAMPLES, AnswerCounts, VqaSummary, VqaSurface, write_vqa_summary

from ._stream import check_cut_lines
from .answers import JudgeAnswers, RequestIndex, iter_request_rows, load_answers, question_positions

PathLike = Union[str, Path]


def summarize_judge(index: RequestIndex, answers: JudgeAnswers, request_paths: Sequence[PathLike] = (),
                    input_label: Any = None) -> VqaSummary:
    """The §5.3 summary of one judge's answers over ``index`` (counted with numpy over the
    compact arrays of :mod:`.answers`)."""
    ns = len(index.surfaces)
    nt = len(UNIT_CATEGORIES)
    arr = index.arrays()
    arows = np.frombuffer(answers.answered_rows, dtype=np.dtype(answers.answered_rows.typecode))
    surf = arr["surface_of"][arows].astype(np.int64)
    ok = np.bincount(surf, minlength=ns)
    resp = ok.copy()
    for f in answers.failures:
        resp[index.surface_of[index.ids[f.request_id]]] += 1
    pos = question_positions(arr["qoff"], arr["qlen"], arows)
    codes = np.frombuffer(answers.codes, dtype=np.uint8)[pos].astype(np.int64)
    qsurf = np.repeat(surf, arr["qlen"][arows].astype(np.int64))
    counts = np.bincount(qsurf * 3 + codes, minlength=3 * ns).reshape(ns, 3)
    cats = np.bincount(arr["cats"][pos].astype(np.int64) * 3 + codes, minlength=3 * nt).reshape(nt, 3)
    surfaces: Dict[str, VqaSurface] = {}
    for s, name in enumerate(index.surfaces):
        if resp[s] == 0:
            continue
        y, n, u = (int(v) for v in counts[s])
        surfaces[name] = VqaSurface(responses=int(resp[s]), ok=int(ok[s]), bad=int(resp[s] - ok[s]),
                                    counts=AnswerCounts(questions=y + n + u, yes=y, no=n, uncertain=u))
    categories = {t: AnswerCounts(questions=int(cats[i].sum()), yes=int(cats[i][0]), no=int(cats[i][1]),
                                  uncertain=int(cats[i][2]))
                  for i, t in enumerate(UNIT_CATEGORIES) if cats[i].sum()}
    examples: Dict[str, List[Dict[str, Any]]] = {"bad_response": [f.example() for f in answers.failures[:MAX_EXAMPLES]]}
    wanted = {rid for lst in answers.examples.values() for rid, _, _ in lst}
    if wanted and request_paths:
        rows = {r["request_id"]: r for r in iter_request_rows(request_paths, wanted)}
        for kind, lst in answers.examples.items():
            examples[kind] = []
            for rid, k, res in lst[:MAX_EXAMPLES]:
                req = rows.get(rid)
                if req is None:
                    continue
                q = req["input"]["questions"][k]
                examples[kind].append({"surface": req["input"].get("surface"), "caption_id": req["input"]["caption_id"],
                                       "category": q["category"], "question": q["question"], "answer": kind,
                                       "confidence": res.get("confidence"), "evidence": res.get("evidence")})
    total = int(resp.sum())
    n_ok = int(ok.sum())
    out = VqaSummary(responses=total, ok=n_ok, bad=total - n_ok, surfaces=surfaces, categories=categories,
                     examples={k: v for k, v in examples.items() if v}, latest_by_request=True, input=input_label)
    out.validate()
    return out


def summarize_files(responses: Sequence[PathLike], requests: Sequence[PathLike], out: Optional[PathLike] = None,
                    judge: Optional[str] = None) -> VqaSummary:
    """``capaudit judges summarize``: read, summarize, optionally write ``out`` (atomically); the
    refusals and the in-progress count of the module docstring."""
    if out is not None:
        from capaudit.io.atomic import check_output_path

        check_output_path(out)
    index = RequestIndex.from_files(requests)
    answers = load_answers(index, responses, keep_examples=MAX_EXAMPLES)
    in_progress = check_cut_lines(answers.cut_lines, allow_in_progress=True)
    if not answers.answered_rows:
        first = answers.failures[0] if answers.failures else None
        raise InputError(f"none of the {answers.responses} responses is a valid answer; nothing to summarize"
                         + (f" (first: {first.kind}: {first.error[:200]})" if first else ""),
                         path=first.file if first else ", ".join(map(str, responses)),
                         line=first.line if first else None)
    label = {"responses": [str(p) for p in responses], "requests": [str(p) for p in requests],
             "merge": "answered-wins (capaudit.llm.store rule)", "judge": judge,
             "models": dict(sorted(answers.model_names.items())),
             "unknown_responses": answers.unknown,
             "cut_last_lines": [{"file": c.file, "line": c.line, "store": c.store, "being_written": True}
                                for c in in_progress],
             "degraded": degraded_list(answers), "degraded_responses": answers.degraded_responses}
    summary = summarize_judge(index, answers, requests, label)
    if out is not None:
        from capaudit.io.atomic import write_text_atomic
        from capaudit.summaries.vqa import format_vqa_summary

        write_text_atomic(out, format_vqa_summary(summary))
    return summary


def degraded_list(answers: JudgeAnswers) -> List[Dict[str, Any]]:
    """``[{note, responses}]``: each ``capaudit_degraded`` note of the merged responses and how many carry it."""
    return [{"note": k, "responses": v} for k, v in sorted(answers.degraded.items())]


__all__ = ["summarize_judge", "summarize_files", "degraded_list"]
