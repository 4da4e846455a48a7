"""The ``recap:`` params section (see :mod:`capaudit.recap.stage`) as one frozen value, the only defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from capaudit.config import ParamsSection, PathLike
from capaudit.errors import InputError

SECTION = "recap"
#: the model when the params name none: the offline captioner (a stand-in) served in process
DEFAULT_MODEL = "capaudit-offline-coco-captioner"
FORMATS = ("jsonl", "parquet")


@dataclass(frozen=True)
class RecapParams:
    """The captioner, the policies and inputs, the exported formats and the request settings."""

    model: str = DEFAULT_MODEL
    url: Tuple[str, ...] = ()  # OpenAI-compatible vision endpoints; () = in-process capaudit serve
    revision: Optional[str] = None  # None: the version the server declares for the model
    policies: Tuple[str, ...] = ("photorealistic", "naive")
    policies_dir: Optional[str] = None
    inputs: Tuple[Any, ...] = ()  # {dataset, path} registry folders or {file} / a path
    surface_prefix: str = "recap"
    formats: Tuple[str, ...] = FORMATS
    image_mode: str = "data"
    concurrency: int = 8
    timeout: float = 60.0
    retries: int = 3
    workers: int = 2
    server_workers: int = 1
    progress: bool = False
    mask_pii: bool = False
    limit: Optional[int] = None
    examples: int = 3

    KEYS = ("model", "url", "revision", "policies", "policies_dir", "inputs", "surface_prefix", "formats",
            "image_mode", "concurrency", "timeout", "retries", "workers", "server_workers", "progress", "mask_pii",
            "limit", "examples")

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "RecapParams":
        """From the params section; an unknown key or a bad value is one line naming the file, section and key."""
        s = ParamsSection.of(section, SECTION, path).only(cls.KEYS)
        formats = s.raw("formats", list(cls.formats))
        formats = [formats] if isinstance(formats, str) else list(formats)
        if not formats or any(f not in FORMATS for f in formats):
            raise InputError("formats must be jsonl and/or parquet", path=path, field="recap.formats")
        url = s.raw("url")
        items = s.raw("inputs")
        if not isinstance(items, list) or not items:
            raise InputError("must be a non-empty list of {dataset, path} or {file}", path=path, field="recap.inputs")
        revision = s.raw("revision")
        return cls(model=s.text("model", cls.model), url=tuple([url] if isinstance(url, str) else list(url or [])),
                   revision=None if revision is None else str(revision), policies=tuple(s.raw("policies", cls.policies)),
                   policies_dir=s.raw("policies_dir"), inputs=tuple(items),
                   surface_prefix=s.text("surface_prefix", cls.surface_prefix), formats=tuple(formats),
                   image_mode=s.text("image_mode", cls.image_mode, ("data", "file")),
                   concurrency=s.integer("concurrency", cls.concurrency), timeout=s.number("timeout", cls.timeout, 0),
                   retries=s.integer("retries", cls.retries, 0), workers=s.integer("workers", cls.workers, 0),
                   server_workers=s.integer("server_workers", cls.server_workers),
                   progress=s.boolean("progress", cls.progress), mask_pii=s.boolean("mask_pii", cls.mask_pii),
                   limit=s.integer("limit", cls.limit), examples=s.integer("examples", cls.examples, 0))


__all__ = ["DEFAULT_MODEL", "FORMATS", "RecapParams", "SECTION"]
