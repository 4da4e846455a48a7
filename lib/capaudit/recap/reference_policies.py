"""The reference study's captioning policies run as published (reference-spec §6).

The reference publishes its policies as recap configs: ``configs/recap/domains/<domain>.yaml``,
each ``extends: ../base.yaml``. :func:`reference_policy` turns one into a :class:`Policy` that sends
what the reference runner sends: the config's ``caption.system_prompt`` as the system message, the
first stage's ``prompt`` (``stage_order[0]``, ``long``) as the user text with the image after it,
that stage's ``max_tokens`` and ``enable_thinking: false``, and no temperature/top-k/top-p (§6: the
server's generation defaults). The stage's ``context_fields`` become the policy's metadata fields.

Two readings, stated because the published files leave them open: YAML literal blocks end in a
newline, which is dropped (the runner's prompt assembly is not published); the grounding text
appended for metadata fields is capaudit's format (the reference's ``tag_grounding`` is unverified).

Names: ``reference-<domain>`` (``reference-photorealistic``, ``reference-anime_booru``) resolve to
the reference folder's file through the checksummed reference registry; a path to such a YAML
(one with ``extends`` or a ``caption`` section) loads the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Union

import yaml

from capaudit.errors import InputError

from .policy_model import BOORU_CONTEXT_FIELDS, Policy

PREFIX = "reference-"
PathLike = Union[str, Path]


def is_recap_config(data: Any) -> bool:
    """Whether a parsed YAML is a reference recap config (not a capaudit policy file)."""
    return isinstance(data, Mapping) and ("extends" in data or isinstance(data.get("caption"), Mapping))


def _read(path: Path) -> Dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("recap config not found", path=path) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML ({exc})", path=path) from None
    if not isinstance(data, dict):
        raise InputError("a recap config must be a mapping", path=path)
    return data


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> Dict[str, Any]:
    """``over`` on top of ``base``, mappings merged key by key (the configs' ``extends``)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def resolved_config(path: PathLike, _depth: int = 0) -> Dict[str, Any]:
    """A recap config with its ``extends`` chain applied (paths relative to the file)."""
    p = Path(path)
    data = _read(p)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if _depth > 8:
        raise InputError("extends chain deeper than 8 files", path=p, field="extends")
    return _merge(resolved_config(p.parent / str(parent), _depth + 1), data)


def _text(value: Any, path: Path, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError("must be a non-empty string", path=path, field=field)
    return value.rstrip("\n")


def reference_policy(path: PathLike) -> Policy:
    """The :class:`Policy` of one published recap config (module docstring)."""
    p = Path(path)
    cfg = resolved_config(p)
    cap = cfg.get("caption")
    if not isinstance(cap, Mapping):
        raise InputError("has no caption section", path=p, field="caption")
    order = cap.get("stage_order") or []
    stages = cap.get("stages") or {}
    if not order or not isinstance(stages, Mapping) or order[0] not in stages:
        raise InputError("needs a stage_order whose first stage is in stages", path=p, field="caption.stage_order")
    name = str(order[0])
    stage = stages[name]
    if not isinstance(stage, Mapping):
        raise InputError("must be a mapping", path=p, field=f"caption.stages.{name}")
    fields = tuple(stage.get("context_fields") or ())
    unknown = [f for f in fields if f not in BOORU_CONTEXT_FIELDS]
    if unknown:
        raise InputError(f"unknown context field(s) {unknown} (known: {list(BOORU_CONTEXT_FIELDS)})", path=p,
                         field=f"caption.stages.{name}.context_fields")
    max_tokens = stage.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InputError("must be a positive integer", path=p, field=f"caption.stages.{name}.max_tokens")
    domain = str(cfg.get("domain") or p.stem)
    return Policy(
        name=PREFIX + domain, version=int(cfg.get("schema_version") or 1),
        user=_text(stage.get("prompt"), p, f"caption.stages.{name}.prompt"),
        system=_text(cap.get("system_prompt"), p, "caption.system_prompt"),
        description=f"the reference study's published {domain} policy ({p.name})",
        messages_policy="system_and_user_message_with_image", context_fields=fields,
        decoding={"max_tokens": max_tokens, "chat_template_kwargs": {"enable_thinking": False}},
        offline_style="detailed", path=str(p))


def reference_policy_by_name(name: str) -> Policy:
    """``reference-<domain>``: the reference folder's ``configs/recap/domains/<domain>.yaml``
    (sha256-checked through the reference registry)."""
    from capaudit.data.reference import fetch_reference

    domain = name[len(PREFIX):]
    try:
        path = fetch_reference(f"configs/recap/domains/{domain}.yaml")
        fetch_reference("configs/recap/base.yaml")
    except KeyError:
        raise InputError(f"unknown reference policy {name!r}; known: reference-photorealistic, "
                         "reference-anime_booru", field="policy") from None
    return reference_policy(path)


__all__ = ["PREFIX", "is_recap_config", "resolved_config", "reference_policy", "reference_policy_by_name"]
