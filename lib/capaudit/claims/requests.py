"""Claim-extraction request builder (reference-spec §4.2; windows §1.2).

One request per caption: the claim window (first B whitespace words, or the lexical cut for the
sensitivity run), a versioned system/user prompt (:mod:`capaudit.claims.prompts`) and the guided
JSON schema. Rows are built with :func:`capaudit.llm.requests.make_request`, so the request id
hashes task, task version, model, prompt version, schema, decoding and input (this replaces the
reference's ``claimed_cbu_v2:<budget>:<surface>:<row>:<caption_id>`` ids).

``input`` (hashed): ``caption_id, surface, token_budget, window, caption`` (the unclipped window),
``source_caption`` (the full caption) and ``max_caption_chars``. ``meta`` (not hashed):
``source_row, emitted_index`` and whatever the caller adds (e.g. the surface key).

Sampling (§4.2): every usable row gets the stable float
``int(blake2b("seed:surface:row_index:row_id", digest_size=8), big-endian) / 2**64``; rows are
sorted by it (ties by row index), the first N kept and re-sorted by row index. ``row_id`` is the
caption id (the ``--id-field`` value, else ``"<surface>:<source_row>"``) — the spec leaves it
unnamed, this is our reading.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

from capaudit.budgets import DEFAULT_BUDGET
from capaudit.errors import EmptyInputError, FieldNotFoundError, InputError
from capaudit.io.atomic import atomic_path, check_output_path, write_json_atomic
from capaudit.io.manifest import files_block
from capaudit.llm.requests import make_request, write_requests
from capaudit.summaries.categories import UNIT_CATEGORIES
from capaudit.text.lexical import lex_cut_text, whitespace_window

from capaudit.prompt_sets import DEFAULT_PROMPT_SET, REFERENCE_EXTRACTION_MAX_TOKENS, check_prompt_set, reference_extraction

from .prompts import SYSTEM_PROMPT, prompt_version, user_prompt

TASK = "claimed_cbu"
TASK_VERSION = 2
DEFAULT_MODEL = "Qwen/Qwen3.5-35B-A3B"
MAX_CAPTION_CHARS = 1800
WINDOW_MODES = ("whitespace", "lexical")
UNIT_MAX_LENGTH = 80
SPAN_MAX_LENGTH = 120
TARGET_MAX_LENGTH = 80


def claims_schema(max_units: Optional[int] = None, caption_id: Optional[str] = None,
                  parent_links: bool = False) -> Dict[str, Any]:
    """Guided JSON schema (§4.2): ``{caption_id, claimed_units: [{category, unit, span, target}]}``.

    ``additionalProperties: false`` at both levels; ``max_units`` adds ``maxItems`` (debug only);
    ``caption_id`` pins the id with a one-value ``enum`` (``BuildParams.pin_caption_id``).
    ``parent_links`` (not in the reference protocol) adds the optional ``parents`` of a unit: the
    0-based positions, in ``claimed_units``, of the object records an attribute, count or relation
    record is about — DSG's dependency graph for our claims (``judges cells --dependency on``).
    """
    units: Dict[str, Any] = {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "category": {"type": "string", "enum": list(UNIT_CATEGORIES)},
                "unit": {"type": "string", "maxLength": UNIT_MAX_LENGTH},
                "span": {"type": "string", "maxLength": SPAN_MAX_LENGTH},
                "target": {"type": "string", "maxLength": TARGET_MAX_LENGTH},
                **({"parents": {"type": "array", "items": {"type": "integer", "minimum": 0}}} if parent_links else {}),
            },
            "required": ["category", "unit", "span", "target"],
            "additionalProperties": False,
        },
    }
    if max_units is not None:
        if int(max_units) < 1:
            raise ValueError(f"max_units must be >= 1, got {max_units}")
        units["maxItems"] = int(max_units)
    return {
        "type": "object",
        "properties": {"caption_id": {"type": "string"} if caption_id is None else
                       {"type": "string", "enum": [caption_id]}, "claimed_units": units},
        "required": ["caption_id", "claimed_units"],
        "additionalProperties": False,
    }


def stable_float(seed: int, surface: str, row_index: int, row_id: str) -> float:
    """``blake2b-8("seed:surface:row_index:row_id")`` as an int (big-endian) / 2**64, in [0, 1)."""
    h = hashlib.blake2b(f"{seed}:{surface}:{row_index}:{row_id}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0**64


def sample_rows(rows: Sequence[Tuple[int, str]], n: int, seed: int, surface: str) -> List[int]:
    """Positions (into ``rows`` of ``(row_index, row_id)``) of the seeded sample of ``n`` (§4.2)."""
    if n < 0:
        raise ValueError(f"sample size must be >= 0, got {n}")
    keyed = sorted(range(len(rows)), key=lambda i: (stable_float(seed, surface, rows[i][0], rows[i][1]), rows[i][0]))
    return sorted(keyed[:n], key=lambda i: rows[i][0])


def caption_window(text: str, budget: Optional[int], mode: str = "whitespace") -> str:
    """The claim window (§1.2): ``whitespace`` = first B whitespace words joined by one space;
    ``lexical`` = raw text cut after the B-th lex unit (no whitespace cut). ``budget=None`` = full."""
    if mode not in WINDOW_MODES:
        raise ValueError(f"window mode must be one of {WINDOW_MODES}, got {mode!r}")
    if budget is None:
        return text
    if int(budget) < 1:
        raise ValueError(f"budget must be >= 1, got {budget}")
    return whitespace_window(text, int(budget)) if mode == "whitespace" else lex_cut_text(text, int(budget))


def prompt_caption(window: str, max_chars: int = MAX_CAPTION_CHARS) -> str:
    """The caption as it appears in the prompt: clipped to ``max_chars``, newlines → spaces."""
    return window[:max_chars].replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def budget_label(budget: Optional[int]) -> str:
    """``b64`` or ``full``."""
    return "full" if budget is None else f"b{int(budget)}"


@dataclass(frozen=True)
class BuildParams:
    """Parameters of one request build (all recorded in the manifest)."""

    surface: str
    budget: Optional[int] = DEFAULT_BUDGET
    window: str = "whitespace"
    model: str = DEFAULT_MODEL
    revision: Optional[str] = None
    max_caption_chars: int = MAX_CAPTION_CHARS
    temperature: float = 0.0
    #: the reference's paper runs send 4096 (§4.3; its runner's own default is 1024)
    max_tokens: int = REFERENCE_EXTRACTION_MAX_TOKENS
    #: ``None``: omitted with the capaudit wording, ``false`` with the reference's (its runner always sends it)
    thinking: Optional[bool] = None
    sample_records: Optional[int] = None
    sample_seed: int = 0
    max_records: Optional[int] = None
    max_units: Optional[int] = None
    #: Not in the reference protocol: each request's schema pins its own caption id, so constrained
    #: decoding cannot echo a wrong one (small models do); every request then has its own schema.
    pin_caption_id: bool = False
    #: Not in the reference protocol: units may carry ``parents`` (:func:`claims_schema`).
    parent_links: bool = False
    #: the wording of the messages (:mod:`capaudit.prompt_sets`): ``reference`` or ``capaudit``
    prompts: str = DEFAULT_PROMPT_SET
    extra: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.surface, str) or not self.surface:
            raise ValueError("surface label must be a non-empty string")
        if self.window not in WINDOW_MODES:
            raise ValueError(f"window must be one of {WINDOW_MODES}, got {self.window!r}")
        if self.sample_records is not None and self.max_records is not None:
            raise ValueError("sample_records and max_records are mutually exclusive")
        if self.max_caption_chars < 1:
            raise ValueError("max_caption_chars must be >= 1")
        check_prompt_set(self.prompts)
        if self.prompts == "reference" and (self.parent_links or self.pin_caption_id):
            raise InputError("parent links and pinned caption ids are not in the reference protocol; "
                             "use them with the capaudit wording (--prompts capaudit)", field="prompts")

    def decoding(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"temperature": float(self.temperature), "max_tokens": int(self.max_tokens)}
        thinking = False if self.thinking is None and self.prompts == "reference" else self.thinking
        if thinking is not None:
            d["chat_template_kwargs"] = {"enable_thinking": bool(thinking)}
        return d

    def schema(self, caption_id: Optional[str] = None) -> Dict[str, Any]:
        """The guided JSON schema of this build's requests (``caption_id`` pins it, capaudit wording only)."""
        if self.prompts == "reference":
            return reference_extraction().schema_for(self.max_units)
        return claims_schema(self.max_units, caption_id if self.pin_caption_id else None, self.parent_links)

    def prompt_version(self) -> str:
        if self.prompts == "reference":
            return reference_extraction().prompt_version
        return prompt_version(self.schema())

    def system_prompt(self) -> str:
        return reference_extraction().system_prompt if self.prompts == "reference" else SYSTEM_PROMPT

    def user_prompt(self, caption_id: str, window: str, schema: Mapping[str, Any]) -> str:
        """The user message of one caption window, in this build's wording."""
        if self.prompts == "reference":
            return reference_extraction().user_prompt(caption_id, window, schema, self.max_caption_chars)
        return user_prompt(caption_id, prompt_caption(window, self.max_caption_chars), schema)


def build_request(
    caption: str,
    *,
    caption_id: str,
    source_row: int,
    emitted_index: int,
    params: BuildParams,
    meta: Optional[Mapping[str, Any]] = None,
    schema: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """One request row for one caption (module docstring)."""
    if params.pin_caption_id or schema is None:
        schema = params.schema(caption_id)
    schema = dict(schema)
    win = caption_window(caption, params.budget, params.window)
    text = params.user_prompt(caption_id, win, schema)
    return make_request(
        task=TASK,
        task_version=TASK_VERSION,
        model=params.model,
        revision=params.revision,
        prompt_version=params.prompt_version() if params.prompts == "reference" else prompt_version(schema),
        schema=schema,
        messages=[{"role": "system", "content": params.system_prompt()}, {"role": "user", "content": text}],
        decoding=params.decoding(),
        input={
            "caption_id": caption_id,
            "surface": params.surface,
            "token_budget": params.budget,
            "window": params.window,
            "caption": win,
            "source_caption": caption,
            "max_caption_chars": params.max_caption_chars,
        },
        meta={"source_row": int(source_row), "emitted_index": int(emitted_index), **(dict(meta) if meta else {})},
    )


#: One usable caption: (source_row, caption, caption_id or None, meta or None).
CaptionItem = Tuple[int, str, Optional[str], Optional[Mapping[str, Any]]]


def build_requests(items: Iterable[CaptionItem], params: BuildParams) -> Tuple[List[Dict[str, Any]], Dict[str, int]]:
    """Request rows for usable captions (after sampling / prefix), plus counts.

    ``items`` yields ``(source_row, caption, caption_id, meta)``; a ``None`` caption id becomes
    ``"<surface>:<source_row>"``. Returns ``(rows, {"usable", "emitted"})``.
    """
    chosen, n_usable = select_captions(items, params)
    rows = list(iter_requests(chosen, params))
    return rows, {"usable": n_usable, "emitted": len(rows)}


Chosen = List[Tuple[int, str, str, Optional[Mapping[str, Any]]]]  # (source_row, caption, caption_id, meta)


def select_captions(items: Iterable[CaptionItem], params: BuildParams) -> Tuple[Chosen, int]:
    """The usable captions after sampling / prefix (:func:`build_requests`), and how many were usable."""
    usable: Chosen = []
    for source_row, caption, cid, meta in items:
        usable.append((int(source_row), caption, cid if cid is not None else f"{params.surface}:{source_row}", meta))
    if params.sample_records is not None:
        keep = sample_rows([(u[0], u[2]) for u in usable], int(params.sample_records), params.sample_seed, params.surface)
        return [usable[i] for i in keep], len(usable)
    if params.max_records is not None:
        return usable[: int(params.max_records)], len(usable)
    return usable, len(usable)


def iter_requests(chosen: Chosen, params: BuildParams) -> Iterator[Dict[str, Any]]:
    """Request rows of the chosen captions, one at a time (a file of millions never sits in memory)."""
    schema = params.schema()
    for i, (src, cap, cid, meta) in enumerate(chosen):
        yield build_request(cap, caption_id=cid, source_row=src, emitted_index=i, params=params, meta=meta,
                            schema=schema)


#: Caption files ``claims build`` reads (JSON lines; ``source_row`` = 0-based line index, §4.2).
INPUT_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")


@dataclass
class ReadCounts:
    """Rows of a caption file and why rows were not used (reported in the manifest)."""

    rows: int = 0
    missing_field: int = 0
    empty_caption: int = 0

    def to_dict(self) -> Dict[str, int]:
        return {"rows": self.rows, "rows_missing_caption_field": self.missing_field,
                "rows_empty_caption": self.empty_caption}


def check_input_file(path: Path) -> Path:
    """A readable JSONL caption file, or an error saying which formats ``claims build`` accepts."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: caption file not found")
    if path.is_dir():
        raise InputError("is a folder; claims build reads one JSON-lines caption file "
                         f"({', '.join(INPUT_SUFFIXES)})", path=path)
    name = path.name.lower()
    if not name.endswith(INPUT_SUFFIXES):
        kind = "a Parquet file" if name.endswith(".parquet") else f"'{''.join(path.suffixes) or 'no suffix'}'"
        raise InputError(f"claims build reads JSON-lines caption files ({', '.join(INPUT_SUFFIXES)}), not {kind}; "
                         f"convert it first, e.g. pandas.read_parquet(...).to_json('captions.jsonl', "
                         f"orient='records', lines=True)", path=path)
    return path


def iter_jsonl_captions(path: Path, caption_field: str, id_field: Optional[str] = None,
                        counts: Optional[ReadCounts] = None, on_missing: str = "error") -> Iterator[CaptionItem]:
    """Usable captions of a JSONL file (§4.2): ``source_row`` = 0-based line index.

    Rows whose caption is empty, blank, null or not a string are skipped (§4.2) and counted
    (``counts.empty_caption``).
    A row without ``caption_field`` is an error naming the file, line and the fields present,
    unless ``on_missing="skip"`` (counted in ``counts.missing_field``). A file in which no row
    has the field raises :class:`FieldNotFoundError` listing the fields that exist; a file
    without any usable caption raises :class:`EmptyInputError`. A missing/empty ``id_field``
    is an error.
    """
    path = check_input_file(Path(path))
    if on_missing not in ("error", "skip"):
        raise ValueError(f"on_missing must be 'error' or 'skip', got {on_missing!r}")
    counts = counts if counts is not None else ReadCounts()
    fields: Dict[str, None] = {}
    used = 0
    present = False
    first_missing: Optional[Tuple[int, List[str]]] = None

    def missing_error(lineno: int, row_fields: List[str]) -> InputError:
        return InputError(f"caption field is missing on this row but present on others (fields here: "
                          f"{', '.join(sorted(row_fields))}); pass --on-missing skip to skip such rows",
                          path=path, line=lineno, field=caption_field)

    # imported here: capaudit.surfaces loads pandas, which `claims summarize` (importing this
    # package) never needs
    from capaudit.surfaces.readers import iter_json_lines

    for lineno, row in iter_json_lines(path):
        counts.rows += 1
        if counts.rows <= 1000:
            fields.update(dict.fromkeys(map(str, row)))
        if caption_field not in row:
            counts.missing_field += 1
            if on_missing != "skip":
                if present:
                    raise missing_error(lineno, list(map(str, row)))
                first_missing = first_missing or (lineno, list(map(str, row)))
            continue
        if first_missing is not None:  # earlier rows lacked the field, this one has it
            raise missing_error(*first_missing)
        present = True
        text = row.get(caption_field)
        if not isinstance(text, str) or not text.strip():  # §4.2: non-string or empty text is skipped
            counts.empty_caption += 1
            continue
        cid = None
        if id_field:
            raw = row.get(id_field)
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                raise ValueError(f"{path}: line {lineno}: id field '{id_field}' is missing or empty")
            cid = str(raw)
        used += 1
        yield lineno - 1, text, cid, None
    if counts.rows == 0:
        raise EmptyInputError("no rows: the caption file is empty", path=path)
    if counts.missing_field == counts.rows:
        raise FieldNotFoundError(caption_field, list(fields), path=path,
                                 hint="name the caption field with --caption-field")
    if used == 0:
        raise EmptyInputError(f"no usable caption: {counts.empty_caption} rows have an empty, null or non-string "
                              f"caption and "
                              f"{counts.missing_field} lack the field", path=path, field=caption_field)


def manifest_path(requests_path: Path) -> Path:
    """``REQUESTS.jsonl`` → ``REQUESTS.manifest.json``."""
    p = Path(requests_path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + ".manifest.json")


def write_manifest(requests_path: Path, params: BuildParams, counts: Mapping[str, int],
                   source: Optional[Mapping[str, Any]] = None) -> Path:
    """Write the ``.manifest.json`` beside the requests (after them): schema, prompt, parameters,
    counts and the requests file's sha256/size (``files``), which readers check."""
    p = asdict(params)
    extra = p.pop("extra")
    body = {
        "task": TASK,
        "task_version": TASK_VERSION,
        "prompt_set": params.prompts,
        "prompt_version": params.prompt_version(),
        "model": params.model,
        "budget_label": budget_label(params.budget),
        "parameters": {**p, **extra},
        "decoding": params.decoding(),
        "schema": params.schema(),
        "system_prompt": params.system_prompt(),
        "source": dict(source or {}),
        "counts": dict(counts),
        "requests": Path(requests_path).name,
    }
    if Path(requests_path).is_file():
        body["files"] = files_block([requests_path])
    out = manifest_path(requests_path)
    write_json_atomic(out, body)
    return out


def build_requests_file(input_path: Path, caption_field: str, out: Path, params: BuildParams,
                        id_field: Optional[str] = None, on_missing: str = "error") -> Dict[str, int]:
    """``capaudit claims build``: read a caption JSONL, write requests + manifest; returns counts.

    Counts: ``usable`` captions, ``emitted`` requests, and the rows read / skipped (missing field,
    empty or null caption). Nothing is written unless the whole input was read; the requests are
    written atomically and the manifest last.
    """
    out = check_output_path(out)
    check_output_path(manifest_path(out))
    read = ReadCounts()
    chosen, n_usable = select_captions(iter_jsonl_captions(Path(input_path), caption_field, id_field, read, on_missing),
                                       params)
    with atomic_path(out) as tmp:
        emitted = write_requests(tmp, iter_requests(chosen, params))
    counts = {"usable": n_usable, "emitted": emitted, **read.to_dict()}
    write_manifest(out, params, counts, {"input": str(input_path), "caption_field": caption_field, "id_field": id_field})
    return counts


__all__ = [
    "TASK", "TASK_VERSION", "DEFAULT_MODEL", "MAX_CAPTION_CHARS", "WINDOW_MODES", "BuildParams",
    "claims_schema", "stable_float", "sample_rows", "caption_window", "prompt_caption", "budget_label",
    "build_request", "build_requests", "select_captions", "iter_requests", "iter_jsonl_captions", "check_input_file", "ReadCounts", "INPUT_SUFFIXES", "manifest_path", "write_manifest",
    "build_requests_file",
]
