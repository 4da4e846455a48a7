"""Human verification of judged claims (reference-spec §7): protocol, sampler, study store,
annotator API, agreement, export, simulated annotators, and the notebook widgets
(:mod:`capaudit.human.widgets`, imported on demand); before launch: image materialisation
(:mod:`.materialize`), validation (:mod:`.validate`), the launch seal (:mod:`.launch`) and the
rehearsal copy (:mod:`.rehearsal`).

``human/`` makes no model calls: it reads the judges' answers from ``judged_claims.jsonl``.
"""

from .protocol import PHASE_FIELDS, PHASES, StudyConfig, validate_judgment
from .study import AccessError, AnnotatorSession, StaleJudgmentError, Study

__all__ = [
    "AccessError", "AnnotatorSession", "PHASES", "PHASE_FIELDS", "StaleJudgmentError", "Study", "StudyConfig",
    "validate_judgment",
]
