"""Validation of judge answers (reference-spec §5.2), registered as the ``cbu_vqa`` task rule.

The schema already enforces the answer enum, numeric confidence and ``minItems = maxItems``; a
JSON schema cannot say "each expected id exactly once", so the rule checks: a string
``caption_id`` equal to the request's (when the message showed it: the reference's wording does
not, so there it need only be a string), ``question_results`` a list of objects, each with a
string id, an answer in yes/no/uncertain and a numeric confidence (a string evidence when the
schema requires one), no duplicate ids, and the sorted ids equal to the request's sorted ids.
The same check (:func:`answer_errors`) decides ``answered`` in the summaries, so a row marked
``ok`` by another tool but with wrong ids is counted as a failure there, not trusted.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence

from capaudit.llm.validate import register_task_rules
from capaudit.prompt_sets import is_reference_version

from .answer_schema import ANSWERS, TASK

MAX_ERRORS = 10


def expected_ids(request: Mapping[str, Any]) -> List[str]:
    """Question ids of a judge request (from ``input.questions``)."""
    qs = (request.get("input") or {}).get("questions") or []
    return [q.get("question_id") for q in qs if isinstance(q, Mapping)]


def answer_errors(parsed: Any, want_ids: Sequence[str], caption_id: Optional[str] = None,
                  evidence: bool = False) -> List[str]:
    """Problems of one parsed answer against the expected ids (empty list = valid)."""
    if not isinstance(parsed, Mapping):
        return ["answer is not a JSON object"]
    errs: List[str] = []
    got_cid = parsed.get("caption_id")
    if not isinstance(got_cid, str):
        errs.append("caption_id: missing or not a string")
    elif caption_id is not None and got_cid.strip() != str(caption_id).strip():
        errs.append(f"caption_id: answer has {got_cid!r}, request has {caption_id!r}")
    results = parsed.get("question_results")
    if not isinstance(results, list):
        return errs + ["question_results: missing or not a list"]
    seen: set = set()
    ids: List[str] = []
    for i, r in enumerate(results):
        if not isinstance(r, Mapping):
            errs.append(f"question_results[{i}]: not an object")
            continue
        qid = r.get("question_id")
        if not isinstance(qid, str):
            errs.append(f"question_results[{i}].question_id: missing or not a string")
            continue
        if qid in seen:
            errs.append(f"question_results[{i}].question_id: duplicate {qid!r}")
        seen.add(qid)
        ids.append(qid)
        if r.get("answer") not in ANSWERS:
            errs.append(f"question_results[{i}].answer: {r.get('answer')!r} not in {list(ANSWERS)}")
        conf = r.get("confidence")
        if isinstance(conf, bool) or not isinstance(conf, (int, float)):
            errs.append(f"question_results[{i}].confidence: not a number")
        if evidence and not isinstance(r.get("evidence"), str):
            errs.append(f"question_results[{i}].evidence: missing or not a string")
    want = set(want_ids)
    if set(ids) != want or len(ids) != len(want_ids):
        missing = sorted(want - set(ids))
        extra = sorted(set(ids) - want)
        errs.append(f"question ids do not match the request: missing {missing[:5]}, unexpected {extra[:5]}"
                    + (f", {len(ids)} answers for {len(want_ids)} questions" if len(ids) != len(want_ids) else ""))
    return errs[:MAX_ERRORS]


def _requires_evidence(request: Mapping[str, Any]) -> bool:
    try:
        items = request["schema"]["properties"]["question_results"]["items"]
        return "evidence" in items.get("required", [])
    except (KeyError, TypeError, AttributeError):
        return False


def shown_caption_id(request: Mapping[str, Any]) -> Optional[str]:
    """The caption id the judge was shown, which its answer must echo; ``None`` for the reference's
    wording, whose message names no caption id (the reference checks only that it is a string)."""
    if is_reference_version(request.get("prompt_version")):
        return None
    return (request.get("input") or {}).get("caption_id")


def judge_answer_rule(parsed: Any, request: Mapping[str, Any]) -> List[str]:
    """The ``cbu_vqa`` task rule for :mod:`capaudit.llm.validate`."""
    return answer_errors(parsed, expected_ids(request), shown_caption_id(request), _requires_evidence(request))


register_task_rules(TASK, judge_answer_rule)

__all__ = ["answer_errors", "expected_ids", "judge_answer_rule", "shown_caption_id"]
