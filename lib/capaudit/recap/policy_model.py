"""The model of a captioning policy (:class:`Policy`) and the values it may name; read and
validated by :mod:`.policies` (capaudit's policy files) and :mod:`.reference_policies` (the
reference's published recap configs), which both import it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

#: The booru context fields of §6 (artist tags are deliberately excluded).
BOORU_CONTEXT_FIELDS: Tuple[str, ...] = (
    "general_tags", "character_tags", "confirmed_characters", "copyright_tags", "rating",
)
MESSAGES_POLICIES = ("system_and_user_message_with_image", "single_user_message_with_image_no_system_prompt")
OFFLINE_STYLES = ("detailed", "plain")

@dataclass(frozen=True)
class Policy:
    """One captioning policy (module docstring)."""

    name: str
    version: int
    user: str
    system: Optional[str] = None
    description: str = ""
    messages_policy: str = "system_and_user_message_with_image"
    context_fields: Tuple[str, ...] = ()
    context_header: str = ""
    decoding: Mapping[str, Any] = field(default_factory=lambda: {"max_tokens": 512})
    offline_style: str = "detailed"
    path: Optional[str] = None

    @property
    def prompt_sha(self) -> str:
        """12 hex digits of blake2b over the prompt texts (system, user, context header)."""
        text = "\x00".join((self.system or "", self.user, self.context_header))
        return hashlib.blake2b(text.encode("utf-8"), digest_size=6).hexdigest()

    @property
    def prompt_version(self) -> str:
        """``<name>@<version>#<prompt_sha>``: hashed into every request id."""
        return f"{self.name}@{self.version}#{self.prompt_sha}"

    def grounding_text(self, context: Mapping[str, Any]) -> str:
        """The metadata block appended to the user text (empty when no context field is set)."""
        lines = []
        for f in self.context_fields:
            v = context.get(f)
            if v in (None, "", [], ()):
                continue
            shown = ", ".join(str(x).replace("_", " ") for x in v) if isinstance(v, (list, tuple)) else str(v)
            label = f.replace("_", " ") if f != "confirmed_characters" else \
                "confirmed_characters (broadest to most specific)"
            lines.append(f"{label}: {shown}")
        if not lines:
            return ""
        head = [self.context_header] if self.context_header else []
        return "\n".join(head + lines)

    def user_text(self, context: Optional[Mapping[str, Any]] = None) -> str:
        """The user message's text: the policy's instruction plus any grounding text."""
        g = self.grounding_text(context or {})
        return f"{self.user}\n\n{g}" if g else self.user

    def messages(self, image_url: str, context: Optional[Mapping[str, Any]] = None) -> List[Dict[str, Any]]:
        """Chat messages: ``[system?, user(text + image_url)]`` (spec §6 request payload)."""
        user = {"role": "user", "content": [
            {"type": "text", "text": self.user_text(context)},
            {"type": "image_url", "image_url": {"url": image_url}},
        ]}
        return ([{"role": "system", "content": self.system}] if self.system else []) + [user]

    def to_dict(self) -> Dict[str, Any]:
        return {"name": self.name, "version": self.version, "prompt_version": self.prompt_version,
                "messages_policy": self.messages_policy, "context_fields": list(self.context_fields),
                "decoding": dict(self.decoding), "offline_style": self.offline_style, "path": self.path}


__all__ = ["BOORU_CONTEXT_FIELDS", "MESSAGES_POLICIES", "OFFLINE_STYLES", "Policy"]
