"""Surfaces: named caption sets loaded from a spec (reference-spec §2.1 input loading).

A surface spec is a mapping (one item of a params file's ``surfaces:`` list), e.g.::

    {name: iiw400_human, dataset: imageinwords, path: IIW-400/data.jsonl, format: jsonl,
     caption_field: IIW, key_field: "image/key"}

Where the files come from (one of):
  * ``dataset`` + ``path``: a registry file, resolved and sha256-checked by
    :func:`capaudit.data.registry.fetch` (``path`` may be a glob over the dataset's registered paths);
  * ``file`` (or ``path: "file:<path>"``): a user file, folder (Parquet) or glob;
  * ``format: hf`` + ``hf_path`` (+ ``hf_name``, ``split``, ``data_files``, ``revision``,
    ``streaming``, ``shuffle_buffer``): a Hugging Face dataset via ``datasets.load_dataset``;
    ``format: hf_disk`` + ``file``: ``datasets.load_from_disk``.

How a row becomes records:
  * caption: ``caption_field`` (a string, or a list of strings = one record per caption, with
    ``caption_index``; a row without the field is an error naming file, line and field, unless
    ``on_missing: skip``, which counts it in ``rows_without_caption``); unset → auto-detect,
    spec §2.1: first non-empty string among :data:`CAPTION_FIELDS`.  Captions are ``.strip()``-ed; empty ones are skipped.
  * key: ``key_field`` (literal field name first, then a dotted path); unset → the key the
    format implies (JSON mapping key, file stem for ``txt_files``) or the 0-based row ordinal;
    normalised with ``key_normalization`` (``str`` default, ``zfill9``, ``zfill12``, ``url``; §11.1).
  * ``image_field``: optional image reference; ``meta_fields``: a list of fields to carry, ``[]``
    for none, or ``auto`` (default): scalar fields other than key/caption/image, strings ≤ 64 chars.
  * ``max_records``: stop after that many records; ``seed``: shuffle the expanded file list with
    ``random.Random(seed)`` (§2.1; the default keeps sorted order).
  * CSV/TSV: ``header`` (default true), ``columns`` (names when there is no header),
    ``delimiter``.  JSON: ``records_field`` (dotted path to the list of records, e.g. ``annotations``).
"""

from __future__ import annotations

import fnmatch
import glob
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

from capaudit.errors import EmptyInputError, FieldNotFoundError, InputError

from . import readers
from .keys import normalize_key
from .readers import CAPTIONS, KEY

#: Caption-column auto-detection order, reference-spec §2.1 (first non-empty string wins).
CAPTION_FIELDS: Tuple[str, ...] = (
    "recap_caption", "re_caption", "caption", "caption_long_llama32", "caption_llava",
    "caption_llava_short", "llava_next_caption", "synthetic_caption", "phi3_caption", "parsed",
    "text", "txt",
)
AUTO_META_MAX_CHARS = 64

_SPEC_KEYS = {
    "name", "dataset", "path", "file", "format", "caption_field", "key_field", "key_normalization",
    "image_field", "meta_fields", "max_records", "seed", "records_field", "header", "columns",
    "delimiter", "on_missing", "hf_path", "hf_name", "split", "data_files", "revision", "streaming", "shuffle_buffer",
}
# Descriptive fields a params file may carry; ignored by the loader.
_INFO_KEYS = {"description", "captioner", "family", "license", "notes", "group", "role", "kind"}

SpecLike = Union[str, Path, Mapping[str, Any]]
_MISSING = object()


@dataclass(frozen=True)
class Record:
    """One caption of a surface."""

    key: str
    caption: str
    caption_index: int = 0
    image: Optional[str] = None
    meta: Dict[str, Any] = field(default_factory=dict, compare=False)
    where: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class SourceFile:
    """One input of a surface: local path, and where it came from."""

    path: str
    sha256: Optional[str] = None
    dataset: Optional[str] = None
    registry_path: Optional[str] = None
    hf: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class LoadStats:
    """Counters filled while a surface is read.

    ``rows_without_caption`` = ``rows_missing_field`` (the caption field is absent and
    ``on_missing: skip``, or auto-detection found no caption field) + ``rows_empty_caption``
    (the field is there but empty, blank or null; ``rows_blank_caption`` of them: a string empty
    after ``strip()``, not a null).
    """

    rows: int = 0
    rows_without_caption: int = 0
    records: int = 0
    rows_missing_field: int = 0
    rows_empty_caption: int = 0
    rows_blank_caption: int = 0

    def to_dict(self) -> Dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Surface:
    """A named caption set: ``frame`` has columns ``key, caption, caption_index, image, meta``."""

    name: str
    frame: pd.DataFrame
    spec: Dict[str, Any] = field(default_factory=dict)
    sources: List[SourceFile] = field(default_factory=list)
    stats: LoadStats = field(default_factory=LoadStats)

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def captions(self) -> List[str]:
        return self.frame["caption"].tolist()

    def first_caption_per_key(self) -> Dict[str, str]:
        """Key → its first non-empty caption in file order (spec §11.1: first caption seen wins)."""
        first = self.frame.drop_duplicates("key", keep="first")
        return dict(zip(first["key"], first["caption"]))

    def records(self) -> Iterator[Record]:
        for row in self.frame.itertuples(index=False):
            yield Record(key=row.key, caption=row.caption, caption_index=int(row.caption_index),
                         image=row.image, meta=row.meta)


def _as_spec(spec: SpecLike) -> Dict[str, Any]:
    if isinstance(spec, (str, Path)):
        return {"file": str(spec)}
    if not isinstance(spec, Mapping):
        raise ValueError(f"a surface spec must be a mapping or a file path, got {type(spec).__name__}")
    out = dict(spec)
    unknown = set(out) - _SPEC_KEYS - _INFO_KEYS
    if unknown:
        raise ValueError(f"surface spec {out.get('name', '?')}: unknown field(s) {sorted(unknown)} "
                         f"(known: {sorted(_SPEC_KEYS)})")
    return out


def _label(spec: Mapping[str, Any]) -> str:
    return f"surface '{spec['name']}'" if spec.get("name") else "surface spec"


def _user_files(pattern: str) -> List[Path]:
    pattern = pattern[5:] if pattern.startswith("file:") else pattern
    pattern = str(Path(pattern).expanduser())
    if glob.has_magic(pattern):
        files = sorted({Path(p) for p in glob.glob(pattern, recursive=True)})
        if not files:
            raise FileNotFoundError(f"no file matches '{pattern}'")
        return files
    p = Path(pattern)
    if not p.exists():
        raise FileNotFoundError(f"{p}: surface input not found")
    return [p]


def resolve_sources(spec: SpecLike, *, with_sha256: bool = False) -> List[SourceFile]:
    """The input files of a spec (registry files are fetched and sha256-verified)."""
    spec = _as_spec(spec)
    fmt = spec.get("format")
    if fmt == "hf":
        if not spec.get("hf_path"):
            raise ValueError(f"{_label(spec)}: format 'hf' needs 'hf_path' (repo id or builder such as 'json')")
        info = {k: spec[k] for k in ("hf_path", "hf_name", "split", "data_files", "revision") if spec.get(k) is not None}
        return [SourceFile(path=f"hf:{spec['hf_path']}", hf=info)]
    dataset, rpath, ufile = spec.get("dataset"), spec.get("path"), spec.get("file")
    if ufile is None and isinstance(rpath, str) and rpath.startswith("file:") and not dataset:
        ufile = rpath
    if dataset and rpath and ufile is None:
        from ..data import registry

        if glob.has_magic(rpath):
            paths = sorted(e.path for e in registry.entries(dataset, kind="file") if fnmatch.fnmatchcase(e.path, rpath))
            if not paths:
                raise FileNotFoundError(f"{_label(spec)}: no registry file of '{dataset}' matches '{rpath}'")
        else:
            paths = [rpath]
        locals_ = registry.fetch_many(dataset, paths) if len(paths) > 1 else [registry.fetch(dataset, paths[0])]
        return [SourceFile(path=str(local), sha256=registry.entry(dataset, p).sha256, dataset=dataset,
                           registry_path=p) for local, p in zip(locals_, paths)]
    if ufile is None:
        raise ValueError(f"{_label(spec)}: give 'dataset' + 'path' (registry), 'file' (user file) "
                         f"or format 'hf' + 'hf_path'")
    files = _user_files(str(ufile))
    if with_sha256:
        from ..data.registry import file_sha256

        return [SourceFile(path=str(f), sha256=None if f.is_dir() else file_sha256(f)) for f in files]
    return [SourceFile(path=str(f)) for f in files]


def _get(row: Mapping[str, Any], name: str) -> Any:
    if name in row:
        return row[name]
    obj: Any = row
    for part in name.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def detect_caption(row: Mapping[str, Any], fields: Sequence[str] = CAPTION_FIELDS,
                   strip: bool = True) -> Tuple[Optional[str], Optional[str]]:
    """(field, stripped caption) of the first non-empty string among ``fields`` (spec §2.1); with
    ``strip=False`` the caption as written (a blank one still counts as empty)."""
    for f in fields:
        v = row.get(f)
        if isinstance(v, str) and v.strip():
            return f, v.strip() if strip else v
    return None, None


def row_captions(row: Mapping[str, Any], caption_field: Optional[str], where: str,
                 on_missing: str = "error", strip: bool = True) -> Tuple[Optional[str], List[Tuple[int, str]]]:
    """The captions of one row under the loader's rules (spec §2.1): ``(field used, [(index, caption)])``.

    ``caption_field`` (dotted names reach into nested objects) holds a string or a list of strings
    (nulls and blank strings skipped, captions stripped); unset, the row's ``CAPTIONS`` list or the
    first non-empty string among ``CAPTION_FIELDS``. Field ``None`` with no captions: no caption
    field found. A missing ``caption_field`` raises ``ValueError`` naming ``where`` unless
    ``on_missing="skip"``; a value of another type always does. The engine's shard readers take
    this function as their caption rule (:func:`capaudit.engine.iter_shard_captions`).
    ``strip=False`` keeps each non-blank caption as written (the survey's rule, spec §2.2: a caption
    of at most B units is its own window, leading whitespace included).
    """
    if caption_field:
        value = _get(row, caption_field)
        if value is _MISSING:
            if on_missing == "skip":
                return None, []
            raise ValueError(f"{where}: caption field '{caption_field}' is missing "
                             f"(fields: {sorted(k for k in row if not k.startswith('__'))}); "
                             f"set on_missing: skip (CLI: --on-missing skip) to skip rows without it")
        used = caption_field
    elif CAPTIONS in row:
        value, used = row[CAPTIONS], CAPTIONS
    else:
        used, cap = detect_caption(row, strip=strip)
        if used is None and any(f in row for f in CAPTION_FIELDS):
            used = next(f for f in CAPTION_FIELDS if f in row)  # present but empty/null: an empty caption
        return used, ([(0, cap)] if cap else [])
    if value is None:
        return used, []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: caption field '{caption_field or 'caption'}' must be a string or a list of "
                         f"strings, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if v is None:
            continue
        if not isinstance(v, str):
            raise ValueError(f"{where}: caption field '{caption_field or 'caption'}' item {i} is "
                             f"{type(v).__name__}, not a string")
        if v.strip():
            out.append((i, v.strip() if strip else v))
    return used, out


def _meta(row: Mapping[str, Any], meta_fields: Any, skip: set) -> Dict[str, Any]:
    if meta_fields in (None, "auto"):
        return {k: v for k, v in row.items()
                if k not in skip and not k.startswith("__")
                and (isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= AUTO_META_MAX_CHARS))}
    if isinstance(meta_fields, str):
        meta_fields = [meta_fields]
    out = {}
    for f in meta_fields:
        v = _get(row, f)
        if v is not _MISSING:
            out[f] = v
    return out


def _rows(spec: Dict[str, Any], sources: List[SourceFile]) -> Iterator[Tuple[Mapping[str, Any], str]]:
    fmt = spec.get("format")
    if fmt == "hf":
        yield from readers.read_hf(spec["hf_path"], name=spec.get("hf_name"), split=spec.get("split", "train"),
                                   data_files=spec.get("data_files"), revision=spec.get("revision"),
                                   streaming=bool(spec.get("streaming", True)),
                                   shuffle_buffer=spec.get("shuffle_buffer"), seed=spec.get("seed"))
        return
    paths = [Path(s.path) for s in sources]
    if spec.get("seed") is not None and len(paths) > 1:
        random.Random(int(spec["seed"])).shuffle(paths)
    if fmt is not None and fmt not in readers.FORMATS:
        raise ValueError(f"{_label(spec)}: unknown format '{fmt}' (expected one of {readers.FORMATS})")
    columns = None
    if fmt in (None, "parquet") and isinstance(spec.get("meta_fields"), list) and spec.get("caption_field"):
        columns = [c for c in (spec.get("caption_field"), spec.get("key_field"), spec.get("image_field"),
                               *spec["meta_fields"]) if c]
    for p in paths:
        f = fmt or readers.infer_format(p)
        if f == "jsonl":
            yield from readers.read_jsonl(p)
        elif f == "json":
            yield from readers.read_json(p, spec.get("records_field"))
        elif f == "parquet":
            yield from readers.read_parquet(p, columns)
        elif f in ("csv", "tsv"):
            yield from readers.read_csv(p, spec.get("delimiter") or ("\t" if f == "tsv" else ","),
                                        header=bool(spec.get("header", True)), columns=spec.get("columns"))
        elif f == "txt":
            yield from readers.read_txt(p)
        elif f == "txt_files":
            yield from readers.read_txt_file(p)
        elif f == "hf_disk":
            yield from readers.read_hf_disk(p, spec.get("split"))
        else:
            raise ValueError(f"{p}: format '{f}' is not a file format")


def iter_captions(spec: SpecLike, *, caption_field: Optional[str] = None, max_records: Optional[int] = None,
                  stats: Optional[LoadStats] = None, sources: Optional[List[SourceFile]] = None) -> Iterator[Record]:
    """Stream the records of a surface spec (or a plain file path) without materialising them.

    ``caption_field`` / ``max_records`` override the spec's values.  Bad rows raise ValueError
    naming the file, the 1-based line (JSONL/CSV), item (JSON) or row (Parquet/HF) and the field.
    """
    spec = _as_spec(spec)
    if caption_field is not None:
        spec["caption_field"] = caption_field
    limit = max_records if max_records is not None else spec.get("max_records")
    if limit is not None and int(limit) <= 0:
        return
    key_field = spec.get("key_field")
    norm = spec.get("key_normalization", "str")
    normalize_key("0", norm)  # validate the mode before reading anything
    image_field = spec.get("image_field")
    meta_fields = spec.get("meta_fields", "auto")
    on_missing = spec.get("on_missing", "error")
    if on_missing not in ("error", "skip"):
        raise ValueError(f"{_label(spec)}: on_missing must be 'error' or 'skip', got {on_missing!r}")
    stats = stats if stats is not None else LoadStats()
    srcs = sources if sources is not None else resolve_sources(spec)
    ordinal = 0
    fields_seen: Dict[str, None] = {}
    caption_field_ = spec.get("caption_field")
    present = False
    first_missing: Optional[Tuple[str, Mapping[str, Any]]] = None
    for row, where in _rows(spec, srcs):
        stats.rows += 1
        if stats.rows <= 1000:
            for k in row:
                if not str(k).startswith("__"):
                    fields_seen.setdefault(str(k), None)
        used, caps = row_captions(row, caption_field_, where, "skip")
        if caption_field_ and used is None:  # the named caption field is not in this row
            if on_missing == "error":
                if present:
                    raise _missing_here(where, caption_field_, row)
                first_missing = first_missing or (where, row)
                if stats.rows >= SCAN_FOR_FIELD:
                    raise FieldNotFoundError(caption_field_, list(fields_seen), path=_where_label(spec, srcs),
                                             hint=f"none of the first {stats.rows} rows has it; name the caption "
                                                  f"field with --caption-field (caption_field: in a surface spec)")
        elif caption_field_:
            if first_missing is not None and on_missing == "error":
                raise _missing_here(first_missing[0], caption_field_, first_missing[1])
            present = True
        if key_field:
            raw_key = _get(row, key_field)
            if raw_key is _MISSING:
                raise ValueError(f"{where}: key field '{key_field}' is missing")
        elif KEY in row:
            raw_key = row[KEY]
        else:
            raw_key = ordinal
        ordinal += 1
        if not caps:
            stats.rows_without_caption += 1
            if used is None:
                stats.rows_missing_field += 1
            else:
                stats.rows_empty_caption += 1
                stats.rows_blank_caption += isinstance(_get(row, used), str)
            continue
        key = normalize_key(raw_key, norm)
        if key is None:
            raise ValueError(f"{where}: key field '{key_field or 'key'}' is empty")
        image = None
        if image_field:
            img = _get(row, image_field)
            if img is _MISSING:
                raise ValueError(f"{where}: image field '{image_field}' is missing")
            image = None if img is None else str(img)
        meta = _meta(row, meta_fields, {key_field, used, image_field})
        for idx, cap in caps:
            yield Record(key=key, caption=cap, caption_index=idx, image=image, meta=meta, where=where)
            stats.records += 1
            if limit is not None and stats.records >= int(limit):
                return
    if stats.records == 0:
        raise no_records_error(spec, srcs, stats, list(fields_seen))


#: With ``on_missing: error``, a caption field absent from this many leading rows (and present in
#: none of them) is reported as a field no row has, without reading the rest of the input.
SCAN_FOR_FIELD = 1000


def _missing_here(where: str, field: str, row: Mapping[str, Any]) -> InputError:
    fields = ", ".join(sorted(str(k) for k in row if not str(k).startswith("__")))
    return InputError(f"{where}: caption field '{field}' is missing on this row but present on others "
                      f"(fields here: {fields}); set on_missing: skip (CLI: --on-missing skip) to skip such rows")


def _where_label(spec: Mapping[str, Any], sources: Sequence[SourceFile]) -> str:
    return sources[0].path if len(sources) == 1 else f"{_label(spec)} ({len(sources)} files)"


def no_records_error(spec: Mapping[str, Any], sources: Sequence[SourceFile], stats: LoadStats,
                     fields: List[str]) -> InputError:
    """The error for a surface that yields no caption at all (never a silent zero-record result):
    empty input, the caption field missing on every row, every caption empty, or no caption field
    found, naming the file(s) and field. ``fields``: the field names seen in the rows."""
    where = _where_label(spec, sources)
    field = spec.get("caption_field")
    if stats.rows == 0:
        return EmptyInputError("no rows: the input is empty", path=where)
    if field and stats.rows_missing_field == stats.rows:
        skipped = spec.get("on_missing") == "skip"
        return FieldNotFoundError(field, fields, path=where,
                                  hint=(f"all {stats.rows} rows were skipped (on_missing: skip)" if skipped else
                                        "name the caption field with --caption-field (caption_field: in a surface "
                                        "spec)"))
    if field:
        return EmptyInputError(f"every caption is empty or null ({stats.rows} rows)", path=where, field=field)
    if stats.rows_missing_field == stats.rows and not any(f in fields for f in CAPTION_FIELDS):
        return InputError(f"no caption field found in {stats.rows} rows: none of the auto-detected fields "
                          f"({', '.join(CAPTION_FIELDS)}) is present; fields present: {', '.join(fields) or 'none'}; "
                          f"name the caption field (--caption-field FIELD, or caption_field: in the surface spec)",
                          path=where)
    return EmptyInputError(f"every caption is empty or null ({stats.rows} rows; fields present: "
                           f"{', '.join(fields) or 'none'})", path=where)


def load_surface(spec: SpecLike, *, name: Optional[str] = None) -> Surface:
    """Load a surface spec into a :class:`Surface` (registry files are fetched and verified)."""
    spec = _as_spec(spec)
    name = name or spec.get("name")
    if not name:
        if "file" in spec:
            name = Path(str(spec["file"])).stem
        else:
            raise ValueError(f"surface spec {spec}: 'name' is required")
    sources = resolve_sources(spec, with_sha256=True)
    stats = LoadStats()
    rows = [(r.key, r.caption, r.caption_index, r.image, r.meta)
            for r in iter_captions(spec, stats=stats, sources=sources)]
    frame = pd.DataFrame(rows, columns=["key", "caption", "caption_index", "image", "meta"])
    frame["caption_index"] = frame["caption_index"].astype("int64")
    return Surface(name=str(name), frame=frame, spec=spec, sources=sources, stats=stats)
