"""Captioning policies as data (reference-spec §6): ``params/policies/<name>.yaml``.

A policy file::

    name: photorealistic            # must equal the file stem
    version: 1                      # bump when the prompt or decoding changes (also hashed, below)
    description: ...
    messages_policy: system_and_user_message_with_image | single_user_message_with_image_no_system_prompt
    system: "..." | null            # null = no system message (the naive control)
    user: "..."                     # the user message's text; the image follows it
    context_fields: [general_tags, ...]   # metadata fields appended as grounding text (anime-booru)
    context_header: "..."           # first line of that grounding text
    decoding: {max_tokens: 512, ...}      # sent as is (temperature/top_k/top_p only where set)
    offline: {style: detailed | plain}    # composition of capaudit-offline-coco-captioner

:attr:`Policy.prompt_version` = ``<name>@<version>#<12 hex of blake2b(system, user, header)>``
enters every request id, so a prompt edited without a version bump still never reuses an old
caption. Where policies are found: an explicit folder, else ``$CAPAUDIT_POLICIES_DIR``, else
``params/policies`` in the working directory, else the repository's ``params/policies``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import yaml

from capaudit.errors import InputError

# the model (Policy and the fields and messages policies it may name) lives in .policy_model, which
# .reference_policies imports too; re-exported here, where callers have always found it
from .policy_model import BOORU_CONTEXT_FIELDS, MESSAGES_POLICIES, OFFLINE_STYLES, Policy

PathLike = Union[str, Path]

_KNOWN_KEYS = {"name", "version", "description", "messages_policy", "system", "user", "context_fields",
               "context_header", "decoding", "offline"}
_RESERVED_DECODING = {"model", "messages", "stream", "n", "structured_outputs", "response_format", "guided_json"}
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
_REPO_POLICIES = Path(__file__).resolve().parents[3] / "params" / "policies"


def default_policies_dir() -> Path:
    """``$CAPAUDIT_POLICIES_DIR``, else ``./params/policies``, else the repository's folder."""
    env = os.environ.get("CAPAUDIT_POLICIES_DIR")
    if env:
        return Path(env)
    local = Path("params") / "policies"
    if local.is_dir():
        return local
    return _REPO_POLICIES


def _as_int(v: Any, path: Path, fieldname: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError("must be a non-negative integer", path=path, field=fieldname)
    return v


def parse_policy(data: Any, path: PathLike) -> Policy:
    """Validate a policy mapping read from ``path``; errors name the file and field."""
    p = Path(path)
    if not isinstance(data, Mapping):
        raise InputError("a policy file must be a mapping", path=p)
    unknown = set(data) - _KNOWN_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)} (known: {sorted(_KNOWN_KEYS)})", path=p)
    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError("must be a lower-case name ([a-z0-9_.-])", path=p, field="name")
    version = _as_int(data.get("version"), p, "version")
    user = data.get("user")
    if not isinstance(user, str) or not user.strip():
        raise InputError("must be a non-empty string", path=p, field="user")
    system = data.get("system")
    if system is not None and (not isinstance(system, str) or not system.strip()):
        raise InputError("must be a non-empty string or null", path=p, field="system")
    mp = data.get("messages_policy") or (MESSAGES_POLICIES[0] if system else MESSAGES_POLICIES[1])
    if mp not in MESSAGES_POLICIES:
        raise InputError(f"must be one of {MESSAGES_POLICIES}", path=p, field="messages_policy")
    if (mp == MESSAGES_POLICIES[1]) != (system is None):
        raise InputError(f"'{mp}' does not match system: {'null' if system is None else 'set'}",
                         path=p, field="messages_policy")
    cf = data.get("context_fields") or []
    if not isinstance(cf, list) or not all(isinstance(c, str) and c for c in cf):
        raise InputError("must be a list of field names", path=p, field="context_fields")
    if "artist_tags" in cf:
        raise InputError("artist tags are excluded from the context (spec §6)", path=p, field="context_fields")
    decoding = data.get("decoding") or {}
    if not isinstance(decoding, Mapping):
        raise InputError("must be a mapping", path=p, field="decoding")
    if "max_tokens" not in decoding:
        raise InputError("must set max_tokens", path=p, field="decoding")
    bad = _RESERVED_DECODING.intersection(decoding)
    if bad:
        raise InputError(f"may not set {sorted(bad)}", path=p, field="decoding")
    offline = data.get("offline") or {}
    style = offline.get("style", "detailed") if isinstance(offline, Mapping) else None
    if style not in OFFLINE_STYLES:
        raise InputError(f"style must be one of {OFFLINE_STYLES}", path=p, field="offline")
    header = data.get("context_header") or ""
    if not isinstance(header, str):
        raise InputError("must be a string", path=p, field="context_header")
    return Policy(name=name, version=version, user=user.strip(), system=system.strip() if system else None,
                  description=str(data.get("description") or ""), messages_policy=mp,
                  context_fields=tuple(cf), context_header=header.strip(), decoding=dict(decoding),
                  offline_style=style, path=str(p))


def load_policy(name_or_path: PathLike, policies_dir: Optional[PathLike] = None) -> Policy:
    """A policy by name (``<dir>/<name>.yaml``; ``reference-<domain>`` for the reference's published
    configs, :mod:`.reference_policies`) or by the path of its YAML file (either format)."""
    raw = str(name_or_path)
    p = Path(raw)
    if raw.startswith("reference-") and not raw.endswith((".yaml", ".yml")):
        from .reference_policies import reference_policy_by_name

        return reference_policy_by_name(raw)
    if raw.endswith((".yaml", ".yml")) or os.sep in raw:
        path = p
    else:
        d = Path(policies_dir) if policies_dir is not None else default_policies_dir()
        path = d / f"{raw}.yaml"
        if not path.is_file():
            known = ", ".join(policy_names(d)) if d.is_dir() else f"none ({d} is not a folder)"
            raise InputError(f"unknown policy {raw!r}; known: {known}", path=path, field="policy")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("policy file not found", path=path) from None
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML ({exc})", path=path) from None
    from .reference_policies import is_recap_config, reference_policy

    if is_recap_config(data):  # a published reference recap config (configs/recap/domains/*.yaml)
        return reference_policy(path)
    pol = parse_policy(data, path)
    if path.stem != pol.name:
        raise InputError(f"name {pol.name!r} differs from the file name", path=path, field="name")
    return pol


def policy_names(policies_dir: Optional[PathLike] = None) -> List[str]:
    """Names of the policies in a folder (sorted)."""
    d = Path(policies_dir) if policies_dir is not None else default_policies_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


def load_policies(policies_dir: Optional[PathLike] = None) -> Dict[str, Policy]:
    """Every policy of a folder by name; a missing folder, or one without policies, is an error."""
    d = Path(policies_dir) if policies_dir is not None else default_policies_dir()
    if not d.is_dir():
        raise InputError("policies folder not found", path=d, field="policies-dir")
    names = policy_names(d)
    if not names:
        raise InputError("no policy (*.yaml) in this folder", path=d, field="policies-dir")
    return {n: load_policy(n, d) for n in names}


def normalize_context(policy: Policy, raw: Mapping[str, Any], where: str = "") -> Dict[str, Any]:
    """The policy's context fields from an input row, normalised (spec §6 anime-booru context).

    Tag fields (``*_tags``) and ``confirmed_characters``: a list of strings, or one string split
    on commas when it has any, else on whitespace (booru tag strings); order kept, empties and
    repeats dropped. ``rating``: a string. Absent or empty fields are left out.
    """
    out: Dict[str, Any] = {}
    for f in policy.context_fields:
        v = raw.get(f)
        if v is None:
            continue
        if f == "rating" or not (f.endswith("_tags") or f == "confirmed_characters"):
            if isinstance(v, (list, tuple)):
                v = ", ".join(str(x) for x in v)
            if not isinstance(v, (str, int, float)):
                raise InputError(f"must be a string, got {type(v).__name__}", path=where or None, field=f)
            s = str(v).strip()
            if s:
                out[f] = s
            continue
        if isinstance(v, str):
            items = v.split(",") if "," in v else v.split()
        elif isinstance(v, (list, tuple)):
            items = list(v)
        else:
            raise InputError(f"must be a list of strings or a string, got {type(v).__name__}",
                             path=where or None, field=f)
        seen: List[str] = []
        for x in items:
            if not isinstance(x, (str, int)):
                raise InputError(f"items must be strings, got {type(x).__name__}", path=where or None, field=f)
            s = str(x).strip()
            if s and s not in seen:
                seen.append(s)
        if seen:
            out[f] = seen
    return out


def identify_policy(messages: Sequence[Mapping[str, Any]],
                    policies: Optional[Mapping[str, Policy]] = None) -> Optional[Policy]:
    """The policy whose system text and user instruction a chat request carries (``None`` if none)."""
    system = next((m.get("content") for m in messages if m.get("role") == "system"), None)
    user_text = ""
    for m in messages:
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                user_text = c
            elif isinstance(c, list):
                user_text = "".join(p.get("text", "") for p in c if isinstance(p, Mapping) and p.get("type") == "text")
    pols = policies if policies is not None else load_policies()
    for pol in sorted(pols.values(), key=lambda p: (-len(p.user), p.name)):
        if (pol.system or None) == (system.strip() if isinstance(system, str) else None) \
                and user_text.strip().startswith(pol.user):
            return pol
    return None


__all__ = ["BOORU_CONTEXT_FIELDS", "MESSAGES_POLICIES", "OFFLINE_STYLES", "Policy", "default_policies_dir",
           "parse_policy", "load_policy", "load_policies", "policy_names", "normalize_context", "identify_policy"]
