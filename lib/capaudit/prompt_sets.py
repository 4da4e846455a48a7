"""Which wording the model-facing text uses: the reference study's own, or capaudit's.

``reference`` (the default) sends exactly the reference study's messages: its claim-extraction
and judge text are read, as data, from ``prompts/claimed_cbu_v2.json`` and ``prompts/cbu_vqa_v1.json``
of the reference folder through the checksummed reference registry (:mod:`capaudit.data.reference`;
never copied into the project), and the one rule line its judge runner swaps in for answer-only
requests from ``judges/data/reference_runner_text.yaml``. ``capaudit`` is the project's own
paraphrase (:mod:`capaudit.claims.prompts`, :mod:`capaudit.judges.prompts`), which alone knows the
non-reference extensions (parent links, pinned caption ids).

The prompt version of a reference text names the task and the sha256 prefix of its file, so a
request id (which hashes the prompt version) never lets the two wordings, or two revisions of a
file, share an answer.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError

PROMPT_SETS = ("reference", "capaudit")
DEFAULT_PROMPT_SET = "reference"
#: decoding the reference's paper runs send (reference-spec §4.3 and §5.2)
REFERENCE_EXTRACTION_MAX_TOKENS = 4096
REFERENCE_JUDGE_MAX_TOKENS = 2048
RUNNER_TEXT = Path(__file__).parent / "judges" / "data" / "reference_runner_text.yaml"


def check_prompt_set(name: str) -> str:
    """``name`` if it is a prompt set, else an :class:`InputError` naming the option."""
    if name not in PROMPT_SETS:
        raise InputError(f"prompt set must be one of {', '.join(PROMPT_SETS)}, got {name!r}", field="prompts")
    return name


def compact_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``: the reference's compact JSON,
    keys in their given order."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _load(path: str, required: Sequence[str]) -> Tuple[Dict[str, Any], str]:
    from capaudit.data.reference import fetch_reference
    from capaudit.data.registry import file_sha256

    local = fetch_reference(path)
    try:
        data = json.loads(local.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON ({exc.msg})", path=local, line=exc.lineno) from None
    for key in required:
        if key not in data:
            raise InputError("key is missing", path=local, field=key)
    return data, file_sha256(local)


@dataclass(frozen=True)
class ReferenceExtraction:
    """The reference's claim-extraction text (``prompts/claimed_cbu_v2.json``)."""

    task: str
    system_prompt: str
    user_template: str
    categories: Tuple[str, ...]
    schema: Mapping[str, Any]
    max_caption_chars: int
    sha256: str

    @property
    def prompt_version(self) -> str:
        return f"reference:{self.task}@{self.sha256[:16]}"

    def schema_for(self, max_units: Optional[int] = None) -> Dict[str, Any]:
        """The published schema; ``max_units`` adds ``maxItems`` to ``claimed_units`` (debug only)."""
        schema = copy.deepcopy(dict(self.schema))
        if max_units is not None:
            schema["properties"]["claimed_units"]["maxItems"] = int(max_units)
        return schema

    @staticmethod
    def clip(window: str, max_chars: int) -> str:
        """The caption as the reference puts it in the prompt: first ``max_chars`` characters, each
        ``\\n`` a space (a ``\\r`` stays, as in the reference)."""
        return window[:max_chars].replace("\n", " ")

    def user_prompt(self, caption_id: str, window: str, schema: Mapping[str, Any],
                    max_chars: Optional[int] = None) -> str:
        """The user message for one caption window (first B whitespace words)."""
        return self.user_template.format(
            categories=", ".join(self.categories), schema=compact_json(schema), caption_id=caption_id,
            caption=self.clip(window, self.max_caption_chars if max_chars is None else max_chars))


@dataclass(frozen=True)
class ReferenceJudge:
    """The reference's VQA-judge text (``prompts/cbu_vqa_v1.json`` + the runner's answer-only rule)."""

    task: str
    system_prompt: str
    user_template: str
    question_templates: Mapping[str, str]
    evidence_rule: str
    no_evidence_rule: str
    sha256: str

    @property
    def prompt_version(self) -> str:
        return f"reference:{self.task}@{self.sha256[:16]}"

    def user_prompt(self, questions: Sequence[Mapping[str, Any]], evidence: bool) -> str:
        """The user message; ``evidence=False`` (the paper's ``--no-evidence``) swaps the evidence
        rule line for the answer-only one, as the reference runner does."""
        qs = [{"question_id": q["question_id"], "category": q["category"], "question": q["question"]}
              for q in questions]
        return self.head(evidence) + compact_json(qs)

    def head(self, evidence: bool) -> str:
        """The user message up to the questions JSON."""
        template = self.user_template
        if not evidence:
            template = template.replace(self.evidence_rule, self.no_evidence_rule)
        head, mark, tail = template.partition("{questions}")
        if not mark or tail:
            raise ValueError(f"{self.task}: the user template must end with its one {{questions}} placeholder")
        return head.replace("{{", "{").replace("}}", "}")


@functools.lru_cache(maxsize=1)
def reference_extraction() -> ReferenceExtraction:
    """The reference's extraction text, read once (sha256-checked)."""
    d, sha = _load("prompts/claimed_cbu_v2.json",
                   ("task", "system_prompt", "user_prompt_template", "unit_categories", "schema", "max_caption_chars"))
    return ReferenceExtraction(task=str(d["task"]), system_prompt=d["system_prompt"],
                               user_template=d["user_prompt_template"], categories=tuple(d["unit_categories"]),
                               schema=d["schema"], max_caption_chars=int(d["max_caption_chars"]), sha256=sha)


def runner_text() -> Dict[str, str]:
    """The reviewed data file of the judge runner's rule swap (``judges/data/reference_runner_text.yaml``)."""
    import yaml

    data = yaml.safe_load(RUNNER_TEXT.read_text(encoding="utf-8"))
    for key in ("evidence_rule", "no_evidence_rule"):
        if not isinstance(data.get(key), str) or not data[key].endswith("\n"):
            raise InputError("must be one rule line ending in a newline", path=RUNNER_TEXT, field=key)
    return data


@functools.lru_cache(maxsize=1)
def reference_judge() -> ReferenceJudge:
    """The reference's judge text, read once (sha256-checked); the evidence rule must occur once."""
    d, sha = _load("prompts/cbu_vqa_v1.json", ("task", "system_prompt", "user_prompt_template", "question_templates"))
    rt = runner_text()
    if d["user_prompt_template"].count(rt["evidence_rule"]) != 1:
        raise InputError("the evidence rule line does not occur once in the reference judge template",
                         path=RUNNER_TEXT, field="evidence_rule")
    return ReferenceJudge(task=str(d["task"]), system_prompt=d["system_prompt"], user_template=d["user_prompt_template"],
                          question_templates=dict(d["question_templates"]), evidence_rule=rt["evidence_rule"],
                          no_evidence_rule=rt["no_evidence_rule"], sha256=sha)


def is_reference_version(prompt_version: Any) -> bool:
    """Whether a request's ``prompt_version`` is one of the reference's texts."""
    return isinstance(prompt_version, str) and prompt_version.startswith("reference:")


def reference_question(templates: Mapping[str, str], category: str, unit: str, target: str) -> str:
    """One question from the reference's templates (§5.1: unit and target stripped, no escaping)."""
    unit, target = unit.strip(), target.strip()
    if category == "text_rendering":
        return templates["text_rendering"].format(unit=unit)
    if target:
        return templates["with_target"].format(unit=unit, target=target)
    return templates["without_target"].format(unit=unit)


__all__ = ["PROMPT_SETS", "DEFAULT_PROMPT_SET", "REFERENCE_EXTRACTION_MAX_TOKENS", "REFERENCE_JUDGE_MAX_TOKENS",
           "check_prompt_set", "compact_json", "ReferenceExtraction", "ReferenceJudge", "reference_extraction",
           "reference_judge", "runner_text", "reference_question", "is_reference_version"]
