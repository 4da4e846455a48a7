"""Model-call layer: content-addressed requests, an append-only response store, an async
OpenAI-compatible client, schema/rule validation, a local server for offline backends and vLLM
serving configs (spec §4.3, §5.2, §9, §13.5-6; architecture.md "llm/").

Submodules: ``requests`` (ids, rows), ``store`` (``ResponseStore``, ``merge``), ``validate``
(``validate``, ``register_task_rules``), ``dialects`` (payloads), ``client`` (``run_requests``),
``backends`` (``register_backend``), ``server`` (``capaudit serve``), ``serving`` (vLLM commands).
HTTP lives only in this package.
"""

from capaudit.llm.requests import make_request, request_id
from capaudit.llm.store import ResponseStore, merge
from capaudit.llm.validate import register_task_rules, validate

__all__ = ["make_request", "request_id", "ResponseStore", "merge", "register_task_rules", "validate"]
