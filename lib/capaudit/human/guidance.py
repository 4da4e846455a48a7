"""Annotator guidance: instructions, phase help and the definitions of "atomic", "visual" and every
claim type, each with one example (reviewed data in ``human/data/guidance.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, Tuple

import yaml

from capaudit.errors import InputError

from .protocol import CATEGORIES, PHASES, SCALE_FIELDS

GUIDANCE_FILE = Path(__file__).resolve().parent / "data" / "guidance.yaml"


@dataclass(frozen=True)
class Term:
    """A definition with one example (a caption and the claim it states)."""

    name: str
    definition: str
    example_caption: str
    example_claim: str
    example_note: str = ""


@dataclass(frozen=True)
class Guidance:
    instructions: Tuple[str, ...]
    phases: Dict[str, str]
    terms: Dict[str, Term]
    categories: Dict[str, Term]
    scales: Dict[str, Tuple[str, str]]
    messages: Dict[str, str]

    def message(self, field: "str | None", detail: str = "") -> str:
        """The annotator's wording of a refusal naming ``field`` (``detail``: the check's sentence)."""
        text = self.messages.get(field or "", self.messages["default"])
        return text.replace("{detail}", detail.rstrip(". "))


def _term(name: str, d: object, where: str, path: Path) -> Term:
    if not isinstance(d, dict) or not isinstance(d.get("definition"), str) or not isinstance(d.get("example"), dict):
        raise InputError("needs a definition and an example", path=path, field=where)
    ex = d["example"]
    if not isinstance(ex.get("caption"), str) or not isinstance(ex.get("claim"), str):
        raise InputError("example needs a caption and a claim", path=path, field=f"{where}.example")
    return Term(str(d.get("name", name)).replace("_", " "), d["definition"].strip(), ex["caption"], ex["claim"],
                str(ex.get("note", "")))


@lru_cache(maxsize=4)
def load_guidance(path: Path = GUIDANCE_FILE) -> Guidance:
    """The reviewed guidance; every phase, claim type and 5-point scale must be covered."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    phases = {str(k): str(v) for k, v in (data.get("phases") or {}).items()}
    cats = {str(k): _term(str(k), v, f"categories.{k}", path) for k, v in (data.get("categories") or {}).items()}
    terms = {str(k): _term(str(k), v, f"terms.{k}", path) for k, v in (data.get("terms") or {}).items()}
    scales = {str(k): (str(v["low"]), str(v["high"])) for k, v in (data.get("scales") or {}).items()}
    for name, have, want in (("phases", phases, PHASES), ("categories", cats, CATEGORIES),
                             ("terms", terms, ("atomic", "visual")), ("scales", scales, SCALE_FIELDS)):
        missing = [w for w in want if w not in have]
        if missing:
            raise InputError(f"missing {missing}", path=path, field=name)
    messages = {str(k): str(v) for k, v in (data.get("messages") or {}).items()}
    if "default" not in messages:
        raise InputError("missing the default message", path=path, field="messages.default")
    instructions = tuple(str(x) for x in data.get("instructions") or ())
    if not instructions:
        raise InputError("no instructions", path=path, field="instructions")
    return Guidance(instructions, phases, terms, cats, scales, messages)


__all__ = ["GUIDANCE_FILE", "Guidance", "Term", "load_guidance"]
