"""Judges-stage parameters: the judges (offline backends or endpoints) and the judged slices."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Mapping, Optional, Tuple

from capaudit.config import ParamsSection
from capaudit.errors import InputError

from .slices import SurfaceSpec

SECTION = "judges"
DEFAULT_JUDGES = ("capaudit-offline-annotation-judge", "capaudit-offline-refcaption-judge")


@dataclass(frozen=True)
class JudgeSpec:
    """One judge of the stage: cell name, model sent, endpoint (``None`` = in-process), revision."""

    name: str
    model: str
    url: Optional[str]
    revision: Optional[str]
    label: str
    short: str
    offline: bool
    dialect: str = "vllm"


def slug(name: str) -> str:
    """A file-name-safe form of a judge or slice name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "x"


def judge_specs(section: Mapping[str, Any], where: str) -> List[JudgeSpec]:
    """The judges of the params section. A judge without ``url`` is a backend of the in-process
    ``capaudit serve``; its label, short label and revision default to the model card the server
    declares for it (:func:`capaudit.llm.server.served_cards`), never to a name recognised here."""
    from capaudit.llm.server import served_cards

    items = ParamsSection.of(section, SECTION, where).raw("judges") or [{"name": n} for n in DEFAULT_JUDGES]
    cards = served_cards()
    out = []
    for i, j in enumerate(items):
        if isinstance(j, str):
            j = {"name": j}
        if not isinstance(j, Mapping) or not j.get("name"):
            raise InputError(f"judges.judges[{i}] needs a 'name'", path=where, field="judges")
        model = str(j.get("model", j["name"]))
        url = j.get("url")
        offline = url is None
        if offline and model not in cards:
            raise InputError(f"judges.judges[{i}]: {model!r} has no url and is not an offline backend "
                             f"(known: {', '.join(sorted(cards))})", path=where, field="url")
        card = cards.get(model, {}) if offline else {}
        revision = j.get("revision", card.get("version") or None)
        out.append(JudgeSpec(str(j["name"]), model, url, None if revision is None else str(revision),
                             str(j.get("label", card.get("label") or j["name"])),
                             str(j.get("short", card.get("short") or j["name"])), offline,
                             str(j.get("dialect", "vllm"))))
    if len({j.name for j in out}) != len(out):
        raise InputError("judge names must be distinct", path=where, field="judges")
    return out


def _expand(value: Any, placeholders: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for k, v in placeholders.items():
            value = value.replace("{" + k + "}", v)
    return value


def slice_specs(section: Mapping[str, Any], where: str,
                placeholders: Optional[Mapping[str, str]] = None) -> List[Tuple[str, List[SurfaceSpec]]]:
    """Judged slices of the params; ``{run_dir}``/``{artifacts}`` in a surface's ``path`` expand."""
    slices = ParamsSection.of(section, SECTION, where).raw("slices")
    if not isinstance(slices, list) or not slices:
        raise InputError("judges.slices must list at least one slice", path=where, field="slices")
    out = []
    for i, sl in enumerate(slices):
        if not isinstance(sl, Mapping) or not sl.get("name") or not isinstance(sl.get("surfaces"), list):
            raise InputError(f"judges.slices[{i}] needs 'name' and a 'surfaces' list", path=where, field="slices")
        surfaces = [{**s, "path": _expand(s["path"], placeholders or {})} if isinstance(s, Mapping) and "path" in s
                    else s for s in sl["surfaces"]]
        specs = [SurfaceSpec.from_params(s, f"{where}: judges.slices[{i}].surfaces[{k}]")
                 for k, s in enumerate(surfaces)]
        if len({s.name for s in specs}) != len(specs):
            raise InputError(f"judges.slices[{i}]: surface names must be distinct", path=where, field="surfaces")
        out.append((str(sl["name"]), specs))
    return out


__all__ = ["DEFAULT_JUDGES", "JudgeSpec", "SECTION", "judge_specs", "slice_specs", "slug"]
