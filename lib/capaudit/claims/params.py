"""The ``claims:`` params section, and the extraction settings of the judged slices (``judges:``), as
frozen values: the only defaults of the claims stage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Tuple

from capaudit.budgets import DEFAULT_BUDGET
from capaudit.config import ParamsSection, PathLike
from capaudit.prompt_sets import DEFAULT_PROMPT_SET, REFERENCE_EXTRACTION_MAX_TOKENS

from .requests import MAX_CAPTION_CHARS

SECTION = "claims"
#: the extractor when the params name none: the heuristic extractor (a stand-in) served in process
DEFAULT_EXTRACTOR = "capaudit-heuristic-extractor"


@dataclass(frozen=True)
class ClaimsParams:
    """``claims:`` (see :mod:`capaudit.claims.stage`)."""

    model: str = DEFAULT_EXTRACTOR
    revision: Optional[str] = None  # None: the version the server declares for the model
    url: Optional[str] = None  # None: in-process capaudit serve
    budget: int = DEFAULT_BUDGET  # the main claim window (whitespace words)
    budgets: Optional[Tuple[int, ...]] = None  # the frontier's sweep (None: the main budget alone)
    lexical_window: bool = True
    surfaces: Optional[Tuple[Any, ...]] = None  # names or {name, sample_records, max_records}; None: all
    labels: Mapping[str, str] = field(default_factory=dict)
    sample_seed: int = 0
    max_caption_chars: int = MAX_CAPTION_CHARS
    max_tokens: int = REFERENCE_EXTRACTION_MAX_TOKENS
    prompts: str = DEFAULT_PROMPT_SET
    concurrency: int = 8
    timeout: float = 240.0
    retries: int = 3
    dialect: str = "vllm"
    progress: bool = False
    server_workers: int = 1
    bootstrap_reps: int = 2000  # caption-level bootstrap intervals (0: none, said so)
    bootstrap_seed: int = 0

    KEYS = ("model", "revision", "url", "budget", "budgets", "lexical_window", "surfaces", "labels", "sample_seed",
            "max_caption_chars", "max_tokens", "prompts", "concurrency", "timeout", "retries", "dialect", "progress",
            "server_workers", "bootstrap_reps", "bootstrap_seed")

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "ClaimsParams":
        """From the params section; an unknown key or a bad value is one line naming the file, section and key."""
        from capaudit.stats.bootstrap_caption import check_reps

        s = ParamsSection.of(section, SECTION, path).only(cls.KEYS)
        revision, url = s.raw("revision"), s.raw("url")
        reps = s.raw("bootstrap_reps", cls.bootstrap_reps)
        try:
            reps = check_reps(reps)
        except (TypeError, ValueError) as exc:
            raise s.error("bootstrap_reps", str(exc)) from None
        budgets = s.raw("budgets")
        return cls(model=s.text("model", cls.model), revision=None if revision is None else str(revision),
                   url=str(url) if url else None, budget=s.integer("budget", cls.budget),
                   budgets=None if budgets is None else s.ints("budgets"),
                   lexical_window=s.boolean("lexical_window", cls.lexical_window),
                   surfaces=tuple(s.raw("surfaces")) if s.raw("surfaces") else None,
                   labels={str(k): str(v) for k, v in s.mapping("labels", None).items()},
                   sample_seed=s.integer("sample_seed", cls.sample_seed, None),
                   max_caption_chars=s.integer("max_caption_chars", cls.max_caption_chars),
                   max_tokens=s.integer("max_tokens", cls.max_tokens), prompts=s.text("prompts", cls.prompts),
                   concurrency=s.integer("concurrency", cls.concurrency), timeout=s.number("timeout", cls.timeout, 0),
                   retries=s.integer("retries", cls.retries, 0), dialect=s.text("dialect", cls.dialect),
                   progress=s.boolean("progress", cls.progress),
                   server_workers=s.integer("server_workers", cls.server_workers), bootstrap_reps=reps,
                   bootstrap_seed=s.integer("bootstrap_seed", cls.bootstrap_seed, None))

    def windows(self) -> Tuple[Tuple[str, int, str], ...]:
        """``(directory name, budget, window mode)`` of every window the stage runs."""
        main = self.budget
        budgets = sorted(set(self.budgets if self.budgets is not None else (main,)) | {main})
        out = [(f"b{b}", b, "whitespace") for b in budgets]
        if self.lexical_window:
            out.append((f"lexical_b{main}", main, "lexical"))
        return tuple(out)


@dataclass(frozen=True)
class JudgedClaimsParams:
    """How the judged slices' claims are extracted (keys of the ``judges:`` section, which the judges
    stage checks as a whole): the claims of a judged slice are the claims stage's work."""

    extractor: str = DEFAULT_EXTRACTOR
    extractor_url: Optional[str] = None  # None: in-process capaudit serve
    extractor_revision: Optional[str] = None
    extractor_max_tokens: int = REFERENCE_EXTRACTION_MAX_TOKENS
    budget: int = DEFAULT_BUDGET
    prompts: str = DEFAULT_PROMPT_SET
    concurrency: int = 4
    timeout: float = 240.0
    retries: int = 3
    progress: bool = False
    server_workers: int = 1

    KEYS = ("extractor", "extractor_url", "extractor_revision", "extractor_max_tokens", "budget", "prompts",
            "concurrency", "timeout", "retries", "progress", "server_workers")

    @classmethod
    def from_section(cls, section: Mapping[str, Any], path: Optional[PathLike] = None) -> "JudgedClaimsParams":
        """From the ``judges:`` section (its other keys are the judges stage's)."""
        s = ParamsSection.of(section, "judges", path)
        revision, url = s.raw("extractor_revision"), s.raw("extractor_url")
        return cls(extractor=s.text("extractor", cls.extractor), extractor_url=str(url) if url else None,
                   extractor_revision=None if revision is None else str(revision),
                   extractor_max_tokens=s.integer("extractor_max_tokens", cls.extractor_max_tokens),
                   budget=s.integer("budget", cls.budget), prompts=s.text("prompts", cls.prompts),
                   concurrency=s.integer("concurrency", cls.concurrency), timeout=s.number("timeout", cls.timeout, 0),
                   retries=s.integer("retries", cls.retries, 0), progress=s.boolean("progress", cls.progress),
                   server_workers=s.integer("server_workers", cls.server_workers))


__all__ = ["ClaimsParams", "DEFAULT_EXTRACTOR", "JudgedClaimsParams", "MAX_CAPTION_CHARS", "SECTION"]
