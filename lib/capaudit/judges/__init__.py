"""Image-conditioned judging (reference-spec §5): claims → questions → judge requests → answers →
per-judge summaries, both-judges cells with the caption bootstrap, judge agreement, extraction
accounting, the judged-claims table, two offline judges and the yes-bias probe.

Submodules: ``questions`` (§5.1), ``prompts``, ``answer_schema`` (task id, answers, guided JSON
schema), ``requests`` (builder and images, §5.1–5.2), ``rules`` (answer validation, registered as
the ``cbu_vqa`` task rule), ``answers`` (compact request index and validated answers), ``summarize`` (§5.3), ``cells`` (§5.4), ``judged_claims``,
``offline`` (``capaudit-offline-annotation-judge``, ``capaudit-offline-refcaption-judge``),
``slices`` (judged-slice surfaces), ``stage`` (``run(cfg)``), ``probe`` (yes-bias probe), ``cli``.
Importing this package is cheap: WordNet, Tesseract and the COCO index load on first use.
"""

from capaudit.judges import rules as _rules  # noqa: F401  (registers the task rule)
from capaudit.judges.questions import questions_from_units, question_text
from capaudit.judges.answer_schema import TASK, TASK_VERSION, vqa_schema
from capaudit.judges.requests import JudgeBuildParams, build_judge_requests

__all__ = ["TASK", "TASK_VERSION", "JudgeBuildParams", "build_judge_requests", "vqa_schema", "questions_from_units",
           "question_text"]
