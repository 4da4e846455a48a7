"""Claim extraction (claimed CBU; reference-spec §4): requests and schema, an offline heuristic
extractor, the claimed summarizer, the budget sweep, the DSG-1k extractor evaluation and the stage.

Submodules: ``prompts`` (versioned prompt text), ``requests`` (builder, §4.2), ``rules`` (task rule
registered with ``capaudit.llm.validate``), ``summarize`` (§4.4), ``dsg_eval`` (DSG-1k precision/recall), ``stage`` (``run(cfg)``),
``cli``. The offline extractor ``capaudit-heuristic-extractor`` (spaCy) is a stand-in model:
:mod:`capaudit.standins.claims_extractor`, served by ``capaudit serve``.
"""

from capaudit.claims import rules as _rules  # noqa: F401  (registers the task rule)
from capaudit.claims.prompts import PROMPT_VERSION
from capaudit.claims.requests import TASK, TASK_VERSION, BuildParams, build_request, build_requests, claims_schema

__all__ = ["PROMPT_VERSION", "TASK", "TASK_VERSION", "BuildParams", "build_request", "build_requests", "claims_schema"]
