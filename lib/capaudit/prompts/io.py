"""Reading prompt files and caption pairs for the prompt-support stage (reference-spec §3).

Prompt files: ``.txt`` (one prompt per line), ``.jsonl`` (one object per line, a text field),
``.json`` (a list of objects or strings), ``.csv`` / ``.tsv`` (a header and a text column),
``.parquet`` (a text column), or a folder of ``*.txt`` files (one prompt per file, sorted by name).
Errors raise :class:`ValueError` naming the file, the row and the field.
"""

from __future__ import annotations

import csv
import json
import os
import time
from itertools import islice
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import EmptyInputError, InputError
from capaudit.io.jsonl_fields import body_mask, plain_string_fields, read_line_blocks
from capaudit.io.manifest import check_file
from capaudit.io.text import checked_lines, open_text, read_text_checked
from capaudit.text.lexkernel import PAD_BYTES, EncodedTexts, encode_texts

PathLike = Union[str, Path]

FORMATS = ("txt", "jsonl", "json", "csv", "tsv", "parquet", "dir")


def iter_json_lines(*args, **kwargs):
    """:func:`capaudit.surfaces.readers.iter_json_lines`, imported when first used (that package
    imports pandas, which the streamed pairs and cached pools never need)."""
    from capaudit.surfaces.readers import iter_json_lines as impl

    return impl(*args, **kwargs)


def resolve_data(dataset: str, path: str) -> Path:
    """Local path of registry file ``dataset/path``.

    Uses :func:`capaudit.data.registry.fetch` when that module exists; otherwise resolves
    ``$CAPAUDIT_DATA_DIR/<dataset>/<path>`` (default ``<repo>/../shared/data``; the registry's
    cache mirrors that layout).
    """
    try:
        from capaudit.data.registry import fetch  # type: ignore[import-not-found]
    except ModuleNotFoundError as exc:
        if exc.name not in ("capaudit.data.registry", "capaudit.data"):
            raise
        root = os.environ.get("CAPAUDIT_DATA_DIR")
        if not root:
            default = Path(__file__).resolve().parents[3].parent / "shared" / "data"
            if not default.is_dir():
                raise FileNotFoundError(
                    f"cannot resolve {dataset}/{path}: no data registry, CAPAUDIT_DATA_DIR is not set "
                    f"and {default} does not exist"
                ) from None
            root = str(default)
        local = Path(root) / dataset / path
        if not local.exists():
            raise FileNotFoundError(f"{local}: registry file {dataset}/{path} not found under CAPAUDIT_DATA_DIR")
        return local
    return Path(fetch(dataset, path))


def resolve_location(spec: Union[str, Mapping[str, Any]], where: str = "") -> Path:
    """A file location from params: a plain path, ``{path: ...}`` or ``{dataset: ..., path: ...}``."""
    if isinstance(spec, (str, Path)):
        return Path(spec)
    if isinstance(spec, Mapping):
        if "dataset" in spec:
            if "path" not in spec:
                raise ValueError(f"{where}: a registry location needs 'dataset' and 'path', got {dict(spec)}")
            return resolve_data(str(spec["dataset"]), str(spec["path"]))
        if "path" in spec:
            return Path(str(spec["path"]))
    raise ValueError(f"{where}: expected a path or a mapping with 'path' (and optionally 'dataset'), got {spec!r}")


def detect_format(path: PathLike, fmt: Optional[str] = None) -> str:
    """The prompt-file format: ``fmt`` if given, else from the suffix (folder → ``dir``)."""
    path = Path(path)
    if fmt:
        if fmt not in FORMATS:
            raise ValueError(f"{path}: unknown format {fmt!r} (expected one of {list(FORMATS)})")
        return fmt
    if path.is_dir():
        return "dir"
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("txt", "jsonl", "json", "csv", "tsv", "parquet"):
        return suffix
    if suffix == "ndjson":
        return "jsonl"
    raise ValueError(f"{path}: cannot tell the format from the suffix; give one of {list(FORMATS)}")


def _text_value(value: Any, path: Path, row: int, fld: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{path}: row {row}, field '{fld}': expected a string, got {type(value).__name__} {value!r:.60}")
    return value


def _fast_loads():
    """orjson's ``loads`` (C speed for plain JSON) where it is installed, else ``json.loads``."""
    try:
        from orjson import loads
    except ImportError:  # pragma: no cover
        loads = json.loads
    return loads


def _match(obj: Mapping[str, Any], where_prefix: Optional[Mapping[str, str]], path: Path, row: int) -> bool:
    if not where_prefix:
        return True
    for key, prefix in where_prefix.items():
        if key not in obj:
            raise ValueError(f"{path}: row {row}: filter field '{key}' is missing")
        if not str(obj[key]).startswith(prefix):
            return False
    return True


def _prompt_row(obj: Any, field: Optional[str], path: Path, row: int) -> Union[str, Dict[str, Any]]:
    """A JSON-lines prompt row: a bare string (only when no field is named), else an object that
    has the field (default ``prompt``); errors name the file and row."""
    if field is None and isinstance(obj, str):
        return obj
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: row {row}: expected a JSON object, got {type(obj).__name__}")
    fld = field or "prompt"
    if fld not in obj:
        raise ValueError(f"{path}: row {row}: field '{fld}' is missing (fields: {sorted(obj)[:10]})")
    return obj


def iter_prompt_records(
    path: PathLike,
    field: Optional[str] = None,
    fmt: Optional[str] = None,
    where_prefix: Optional[Mapping[str, str]] = None,
) -> Iterator[str]:
    """Yield every record's text in file order (empty/None values as ``""``).

    ``field`` names the text field (jsonl/json/csv/tsv/parquet; default ``prompt``; for a JSON
    list of strings or a txt file it must be None or is ignored). ``where_prefix`` keeps only
    records whose field starts with a prefix (e.g. ``{"item_id": "diffusiondb_"}``).
    Rows are numbered from 1 (csv/tsv: the header is row 1).
    """
    path = Path(path)
    kind = detect_format(path, fmt)
    if not path.exists():
        raise FileNotFoundError(f"{path}: prompt file not found")
    fld = field or "prompt"
    if kind == "txt":
        if where_prefix:
            raise ValueError(f"{path}: 'where_prefix' needs a format with fields, not txt")
        with open_text(path) as fh:
            for line in checked_lines(fh, path):
                yield line.rstrip("\n").rstrip("\r")
    elif kind == "dir":
        files = sorted(path.glob("*.txt"))
        if not files:
            raise ValueError(f"{path}: folder has no *.txt prompt files")
        for f in files:
            yield read_text_checked(f)
    elif kind == "jsonl":
        for row, obj in iter_json_lines(path, unit="row", objects_only=False):
            obj = _prompt_row(obj, field, path, row)
            if isinstance(obj, str):
                yield obj
            elif _match(obj, where_prefix, path, row):
                yield _text_value(obj[fld], path, row, fld)
    elif kind == "json":
        try:
            data = json.loads(read_text_checked(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of prompts, got {type(data).__name__}")
        for row, obj in enumerate(data, start=1):
            if isinstance(obj, str) and field is None:
                yield obj
                continue
            if not isinstance(obj, dict):
                raise ValueError(f"{path}: item {row}: expected an object with field '{fld}', got {type(obj).__name__}")
            if fld not in obj:
                raise ValueError(f"{path}: item {row}: field '{fld}' is missing (fields: {sorted(obj)[:10]})")
            if _match(obj, where_prefix, path, row):
                yield _text_value(obj[fld], path, row, fld)
    elif kind in ("csv", "tsv"):
        delimiter = "\t" if kind == "tsv" else ","
        with open_text(path) as fh:
            reader = csv.DictReader(checked_lines(fh, path), delimiter=delimiter,
                                    quoting=csv.QUOTE_NONE if kind == "tsv" else csv.QUOTE_MINIMAL)
            try:
                if reader.fieldnames is None or fld not in reader.fieldnames:
                    raise ValueError(f"{path}: row 1 (header): column '{fld}' is missing (columns: {reader.fieldnames})")
                for row, obj in enumerate(reader, start=2):
                    if _match(obj, where_prefix, path, row):
                        yield _text_value(obj[fld], path, row, fld)
            except csv.Error as exc:
                raise InputError(f"not valid {kind.upper()} ({exc})", path=path, line=reader.line_num) from None
    elif kind == "parquet":
        schema = _parquet_schema(path)
        columns = [fld] + [k for k in (where_prefix or {}) if k != fld]
        for c in columns:
            if c not in schema.names:
                raise ValueError(f"{path}: column '{c}' is missing (columns: {schema.names[:20]})")
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=columns)
        values = table.column(fld).to_pylist()
        keep = [True] * len(values)
        for key, prefix in (where_prefix or {}).items():
            keep = [k and str(v).startswith(prefix) for k, v in zip(keep, table.column(key).to_pylist())]
        for row, (value, k) in enumerate(zip(values, keep), start=1):
            if k:
                yield _text_value(value, path, row, fld)


def iter_hub_prompts(repository: str, field: str, data_files: Optional[str] = None, revision: Optional[str] = None,
                     split: str = "train") -> Iterator[str]:
    """Every row's ``field`` of a Hugging Face dataset, streamed (``datasets.load_dataset``); offline,
    one line naming the dataset and how to run without the Hub (:func:`capaudit.surfaces.readers.read_hf`)."""
    from capaudit.surfaces.readers import read_hf

    for row, where in read_hf(repository, split=split, data_files=data_files, revision=revision):
        if field not in row:
            raise InputError(f"field '{field}' is missing (fields: {sorted(row)[:10]})", path=where)
        value = row[field]
        if value is not None and not isinstance(value, str):
            raise InputError(f"field '{field}': expected text, got {type(value).__name__} {value!r:.60}", path=where)
        yield value or ""


def _parquet_schema(path: Path):
    """The Arrow schema of a Parquet file; a file that is not Parquet is an error naming it."""
    import pyarrow.parquet as pq

    try:
        return pq.read_schema(path)
    except Exception as exc:  # ArrowInvalid / OSError on bytes that are not Parquet
        raise InputError(f"not a readable Parquet file ({type(exc).__name__}: {exc})", path=path) from None


def _fast_jsonl_column(path: Path, fld: str) -> Optional[List[Any]]:
    """Read one JSONL column with pyarrow; None when the fast path does not apply."""
    try:
        import pyarrow.json as pj

        table = pj.read_json(path)
    except Exception:  # any parse/type problem: the slow path reports it precisely
        return None
    if fld not in table.column_names:
        return None
    import pyarrow as pa

    col = table.column(fld)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return None
    return col.to_pylist()


def load_prompts(
    path: PathLike,
    field: Optional[str] = None,
    fmt: Optional[str] = None,
    limit: Optional[int] = 1_000_000,
) -> List[str]:
    """First ``limit`` non-empty prompts of a pool file, used as given (§3.2; no budget, no filter)."""
    path = Path(path)
    kind = detect_format(path, fmt)
    out: List[str] = []
    values: Optional[Sequence[Any]] = None
    if kind == "jsonl" and path.exists():
        values = _fast_jsonl_column(path, field or "prompt")
    iterator = iter(values) if values is not None else iter_prompt_records(path, field, kind)
    for value in iterator:
        if value and value.strip():
            out.append(value)
            if limit is not None and len(out) >= limit:
                break
    return out


@dataclass
class Pairs:
    """Paired captions of one comparison, in file order (§3.2)."""

    path: Path
    local: List[str]
    reference: List[str]
    local_field: str
    reference_field: str
    skipped: int = 0

    def __len__(self) -> int:
        return len(self.local)


def _check_pairs_file(path: PathLike, local_field: str, reference_field: str) -> Tuple[Path, str]:
    """``(path, lower-case suffix)`` of a pairs file that exists and passes :func:`check_file`;
    a Parquet file must have both caption columns."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: pairs file not found")
    suffix = path.suffix.lower()
    check_file(path, hint="rebuild the slice (capaudit slice ... --overwrite, or the surfaces stage)")
    if suffix == ".parquet":
        names = _parquet_schema(path).names
        for f in (local_field, reference_field):
            if f not in names:
                raise ValueError(f"{path}: column '{f}' is missing (columns: {names[:20]})")
    return path, suffix


def load_pairs(
    path: PathLike,
    local_field: str = "local_caption",
    reference_field: str = "reference_caption",
    limit: Optional[int] = 250_000,
    skip_incomplete: bool = False,
) -> Pairs:
    """First ``limit`` caption pairs of a JSONL or Parquet file (§3.2 ``--max-caption-records``).

    A null caption counts as empty (it contributes no n-grams); a missing field or a non-string
    value is an error naming the file, row and field. ``skip_incomplete=True`` instead drops
    rows lacking either field (or with a null), counting them in ``Pairs.skipped``; use it only
    on raw files that are not fair slices (e.g. IIW-400, where 100 of 400 rows have ``IIW-P5B``).
    """
    skipped = 0
    path, suffix = _check_pairs_file(path, local_field, reference_field)
    local: List[str] = []
    reference: List[str] = []
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path, columns=list(dict.fromkeys([local_field, reference_field])))
        if limit is not None:
            table = table.slice(0, limit)
        lv = table.column(local_field).to_pylist()
        rv = table.column(reference_field).to_pylist()
        for row, (a, b) in enumerate(zip(lv, rv), start=1):
            if skip_incomplete and (a is None or b is None):
                skipped += 1
                continue
            local.append(_text_value(a, path, row, local_field))
            reference.append(_text_value(b, path, row, reference_field))
    elif suffix in (".jsonl", ".ndjson", ".json"):
        for row, obj in iter_json_lines(path, unit="row"):
            if limit is not None and len(local) >= limit:
                break
            if skip_incomplete and (obj.get(local_field) is None or obj.get(reference_field) is None):
                skipped += 1
                continue
            for f in (local_field, reference_field):
                if f not in obj:
                    raise ValueError(f"{path}: row {row}: field '{f}' is missing (fields: {sorted(obj)[:10]})")
            local.append(_text_value(obj[local_field], path, row, local_field))
            reference.append(_text_value(obj[reference_field], path, row, reference_field))
    else:
        raise InputError(f"pairs must be JSON lines (.jsonl, .ndjson) or Parquet (.parquet), got '{suffix or 'no suffix'}'",
                         path=path)
    if not local:
        raise EmptyInputError("no caption pairs" + (f" ({skipped} incomplete rows skipped)" if skipped else ""),
                              path=path)
    return Pairs(path, local, reference, local_field, reference_field, skipped)


@dataclass
class PairStats:
    """Counters of :func:`iter_pairs` (filled while it is consumed)."""

    pairs: int = 0
    skipped: int = 0


def iter_pairs(
    path: PathLike,
    local_field: str = "local_caption",
    reference_field: str = "reference_caption",
    limit: Optional[int] = 250_000,
    skip_incomplete: bool = False,
    stats: Optional[PairStats] = None,
) -> Iterator[Tuple[str, str]]:
    """Stream the pairs :func:`load_pairs` would return, in file order (same checks and errors),
    holding one row at a time (JSONL via orjson when installed; Parquet by record batches)."""
    st = stats if stats is not None else PairStats()
    path, suffix = _check_pairs_file(path, local_field, reference_field)
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        row = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=8192,
                                                       columns=list(dict.fromkeys([local_field, reference_field]))):
            lv = batch.column(local_field).to_pylist()
            rv = batch.column(reference_field).to_pylist()
            for a, b in zip(lv, rv):
                row += 1
                if limit is not None and st.pairs >= limit:
                    return
                if skip_incomplete and (a is None or b is None):
                    st.skipped += 1
                    continue
                st.pairs += 1
                yield _text_value(a, path, row, local_field), _text_value(b, path, row, reference_field)
    elif suffix in (".jsonl", ".ndjson", ".json"):
        fast_loads = _fast_loads()
        with open(path, "rb") as fh:
            row = 0
            for line in fh:
                row += 1
                if limit is not None and st.pairs >= limit:
                    return
                obj = _loads_line(fast_loads, line, path, row)
                if obj is _BLANK:
                    continue
                if not isinstance(obj, dict):
                    raise ValueError(f"{path}: row {row}: expected a JSON object, got {type(obj).__name__}")
                if skip_incomplete and (obj.get(local_field) is None or obj.get(reference_field) is None):
                    st.skipped += 1
                    continue
                for f in (local_field, reference_field):
                    if f not in obj:
                        raise ValueError(f"{path}: row {row}: field '{f}' is missing (fields: {sorted(obj)[:10]})")
                st.pairs += 1
                yield (_text_value(obj[local_field], path, row, local_field),
                       _text_value(obj[reference_field], path, row, reference_field))
    else:
        raise InputError(f"pairs must be JSON lines (.jsonl, .ndjson) or Parquet (.parquet), got '{suffix or 'no suffix'}'",
                         path=path)


def iter_pair_chunks(
    path: PathLike,
    local_field: str = "local_caption",
    reference_field: str = "reference_caption",
    limit: Optional[int] = 250_000,
    skip_incomplete: bool = False,
    stats: Optional[PairStats] = None,
    size: int = 5000,
) -> Iterator[Tuple[List[str], List[str]]]:
    """:func:`iter_pairs` in runs of about ``size`` pairs: ``(local texts, reference texts)``.

    The same pairs, checks and errors; JSON lines are parsed a run at a time and a run that is
    not plain (a blank, BOM'd or bad line, a missing, null or non-string field) is read again
    row by row, as :func:`iter_pairs` reads it.
    """
    st = stats if stats is not None else PairStats()
    path, suffix = _check_pairs_file(path, local_field, reference_field)
    if suffix not in (".jsonl", ".ndjson", ".json") or skip_incomplete:
        it = iter_pairs(path, local_field, reference_field, limit, skip_incomplete, st)
        while True:
            run = list(islice(it, size))
            if not run:
                return
            yield [a for a, _ in run], [b for _, b in run]
    fast_loads = _fast_loads()
    with open(path, "rb") as fh:
        row = 0
        while limit is None or st.pairs < limit:
            lines = list(islice(fh, size if limit is None else min(size, limit - st.pairs)))
            if not lines:
                return
            parsed = plain_pairs(lines, local_field, reference_field, fast_loads)
            if parsed is not None:
                local, reference = parsed
                st.pairs += len(local)
            else:
                local, reference = [], []
                for k, line in enumerate(lines, start=row + 1):
                    pair = _pair_row(fast_loads, line, path, k, local_field, reference_field, skip_incomplete, st)
                    if pair is not None:
                        local.append(pair[0])
                        reference.append(pair[1])
            row += len(lines)
            if local:
                yield local, reference


def plain_pairs(lines: Sequence[bytes], local_field: str, reference_field: str,
                loads: Any) -> Optional[Tuple[List[str], List[str]]]:
    """``(local texts, reference texts)`` of JSON lines that are all plain pairs (objects whose two
    fields are strings), else ``None`` (the caller then reads them row by row, with its checks)."""
    try:
        objs = [loads(line) for line in lines]
        local = [o[local_field] for o in objs]
        reference = [o[reference_field] for o in objs]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    if set(map(type, local)) == {str} and set(map(type, reference)) == {str} and set(map(type, objs)) == {dict}:
        return local, reference
    return None


def _pair_row(fast_loads, line: bytes, path: Path, row: int, local_field: str, reference_field: str,
              skip_incomplete: bool, st: PairStats) -> Optional[Tuple[str, str]]:
    """One JSON-lines row of :func:`iter_pairs` (None: blank or skipped; counts kept in ``st``)."""
    obj = _loads_line(fast_loads, line, path, row)
    if obj is _BLANK:
        return None
    if not isinstance(obj, dict):
        raise ValueError(f"{path}: row {row}: expected a JSON object, got {type(obj).__name__}")
    if skip_incomplete and (obj.get(local_field) is None or obj.get(reference_field) is None):
        st.skipped += 1
        return None
    for f in (local_field, reference_field):
        if f not in obj:
            raise ValueError(f"{path}: row {row}: field '{f}' is missing (fields: {sorted(obj)[:10]})")
    st.pairs += 1
    return (_text_value(obj[local_field], path, row, local_field),
            _text_value(obj[reference_field], path, row, reference_field))


_BLANK = object()


def _loads_line(fast_loads, line: bytes, path: Path, row: int) -> Any:
    """One JSON line (``_BLANK`` for a blank one); errors name the file and row."""
    try:
        return fast_loads(line)
    except ValueError:
        if row == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if not line.strip():
            return _BLANK
        try:
            return json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: row {row}: not valid JSON ({exc.msg} at column {exc.colno})") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: row {row}: not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _jsonl_prompt_runs(path: Path, field: Optional[str]) -> Iterator[List[str]]:
    """The prompts of a JSON-lines file as runs (lists, file order; empty values kept)."""
    fast_loads = _fast_loads()
    fld = field or "prompt"
    with open(path, "rb") as fh:
        row = 0
        while True:  # a run of lines at a time; a run that is not plain is read row by row
            lines = list(islice(fh, 8192))
            if not lines:
                return
            try:
                objs = list(map(fast_loads, lines))
                values = list(map(itemgetter(fld), objs))
                plain = set(map(type, objs)) == {dict} and set(map(type, values)) == {str}
            except (ValueError, KeyError, TypeError, IndexError):
                plain = False
            if plain:
                yield values
            else:  # row by row, lazily: a row after the caller's limit is never checked
                for k, line in enumerate(lines, start=row + 1):
                    obj = _loads_line(fast_loads, line, path, k)
                    if obj is _BLANK:
                        continue
                    obj = _prompt_row(obj, field, path, k)
                    yield [obj if isinstance(obj, str) else _text_value(obj[fld], path, k, fld)]
            row += len(lines)


def prompt_block_batch(block: bytes, path: Path, field: Optional[str], row_base: int,
                       fast_loads: Any = None) -> Tuple[EncodedTexts, int, Optional[ValueError]]:
    """The non-blank prompts of a block of whole JSON lines (rows ``row_base + 1`` on) as one
    encoded batch, the block's line count, and the error of its first bad row (None if none).

    The plain lines' values (:mod:`capaudit.io.jsonl_fields`) stay where they lie in the block's
    bytes, the bytes around them zeroed; every other line is parsed as JSON, row by row, and its
    value (no longer than the line: an escape is never shorter than the character it stands for)
    is written over the line's own bytes. A row that fails ends the batch before it, so the rows
    before it can be used up to a caller's limit and the error raised only when it is reached."""
    fast_loads = fast_loads or _fast_loads()
    fld = field or "prompt"
    sp = plain_string_fields(block, [fld])
    size = len(block)
    buf = np.frombuffer(block, np.uint8)
    plain = sp.plain
    first = np.where(plain, sp.starts[:, 0], sp.line_starts)
    length = np.where(plain, sp.ends[:, 0] - sp.starts[:, 0], 0)
    out = np.zeros(size + PAD_BYTES, np.uint8)
    np.multiply(buf, body_mask(size, first[plain], first[plain] + length[plain]), out=out[:size])
    keep = plain.copy()
    failed: Optional[ValueError] = None
    for i in np.flatnonzero(~plain).tolist():
        a, b = int(sp.line_starts[i]), int(sp.line_ends[i])
        k = row_base + i + 1
        try:
            obj = _loads_line(fast_loads, block[a:b], path, k)
            if obj is _BLANK:
                continue
            obj = _prompt_row(obj, field, path, k)
            value = obj if isinstance(obj, str) else _text_value(obj[fld], path, k, fld)
        except ValueError as exc:  # nothing from this row on: its bytes zeroed too
            failed, keep[i:] = exc, False
            out[a:] = 0
            break
        data = value.encode("utf-8", "surrogatepass")
        if len(data) > b - a:  # pragma: no cover - impossible for a JSON string (see above)
            raise RuntimeError(f"{path}: row {k}: a value longer than its line")
        out[a:a + len(data)] = np.frombuffer(data, np.uint8)
        length[i], keep[i] = len(data), True
    # a value counts when it has a character that is not whitespace: a text whose first byte is
    # ASCII and neither a space nor a control byte does; the others are asked (str.isspace)
    lead = out[np.minimum(first, size)]
    ask = np.flatnonzero(keep & ((length == 0) | (lead <= 0x20) | (lead >= 0x80))).tolist()
    for i in ask:
        text = out[first[i]:first[i] + length[i]].tobytes().decode("utf-8", "surrogatepass")
        keep[i] = bool(text) and not text.isspace()
    return EncodedTexts(out.tobytes(), np.append(first[keep], size)), sp.lines, failed


def _jsonl_prompt_batches(path: Path, field: Optional[str]) -> Iterator[EncodedTexts]:
    """The non-blank prompts of a JSON-lines file as encoded batches, block by block (file order;
    :func:`prompt_block_batch`); a bad row's error is raised after the batch before it, so a row
    after the caller's limit is never checked."""
    fast_loads = _fast_loads()
    with open(path, "rb") as fh:
        row = 0
        for block in read_line_blocks(fh):
            batch, lines, failed = prompt_block_batch(block, path, field, row, fast_loads)
            yield batch
            if failed is not None:
                raise failed
            row += lines


def iter_prompt_batches(path: PathLike, field: Optional[str] = None, fmt: Optional[str] = None,
                        limit: Optional[int] = 1_000_000, batch_texts: int = 50_000) -> Iterator[EncodedTexts]:
    """The prompts of :func:`iter_prompt_runs` (the same, in order) as encoded batches for the
    lexical-unit kernel: a JSON-lines pool is read from its bytes, without a Python string per
    prompt (:func:`_jsonl_prompt_batches`, blocks of about 4 MiB); other formats are read as runs
    and encoded ``batch_texts`` at a time."""
    path = Path(path)
    kind = detect_format(path, fmt)
    if not path.exists():
        raise FileNotFoundError(f"{path}: prompt file not found")
    if not (kind == "jsonl" and path.suffix.lower() != ".gz"):
        texts: List[str] = []
        for run in iter_prompt_runs(path, field, fmt, limit):
            texts.extend(run)
            if len(texts) >= batch_texts:
                yield encode_texts(texts)
                texts = []
        if texts:
            yield encode_texts(texts)
        return
    left = limit
    for batch in _jsonl_prompt_batches(path, field):
        if left is not None:
            if len(batch) >= left:
                if left:
                    yield batch.head(left)
                return
            left -= len(batch)
        if len(batch):
            yield batch


def iter_prompt_runs(path: PathLike, field: Optional[str] = None, fmt: Optional[str] = None,
                     limit: Optional[int] = 1_000_000, run_size: int = 8192) -> Iterator[List[str]]:
    """:func:`iter_prompts` as lists of consecutive prompts (the same prompts, in order): a pool is
    counted run by run, with no Python step per prompt between the file and the tokenizer."""
    path = Path(path)
    kind = detect_format(path, fmt)
    if not path.exists():
        raise FileNotFoundError(f"{path}: prompt file not found")
    if kind == "jsonl" and path.suffix.lower() != ".gz":
        source = _jsonl_prompt_runs(path, field)
    else:
        records = iter_prompt_records(path, field, fmt)
        source = iter(lambda: list(islice(records, run_size)), [])
    left = limit
    for run in source:
        # a value counts when it has a character that is not whitespace (``value.strip()`` non-empty)
        kept = run if all(run) and not any(map(str.isspace, run)) else [v for v in run if v and not v.isspace()]
        if left is not None:
            if len(kept) >= left:
                if left:
                    yield kept[:left]
                return
            left -= len(kept)
        if kept:
            yield kept


def iter_prompts(path: PathLike, field: Optional[str] = None, fmt: Optional[str] = None,
                 limit: Optional[int] = 1_000_000) -> Iterator[str]:
    """Stream the prompts :func:`load_prompts` returns (the first ``limit`` non-empty ones)."""
    for run in iter_prompt_runs(path, field, fmt, limit):
        yield from run


def file_digest(path: PathLike, chunk: int = 1 << 20) -> str:
    """blake2b-128 hex digest of a file's bytes (or of a folder's sorted ``*.txt`` files)."""
    import hashlib

    path = Path(path)
    h = hashlib.blake2b(digest_size=16)
    files = sorted(path.glob("*.txt")) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            h.update(f.name.encode("utf-8") + b"\0")
        with f.open("rb") as fh:
            while True:
                block = fh.read(chunk)
                if not block:
                    break
                h.update(block)
    return h.hexdigest()


#: a file changed less than this long (ns) before its digest is taken is not remembered
RACY_NS = 2_000_000_000
#: bumped when :func:`file_digest`'s definition changes, so older memos are never trusted
DIGEST_MEMO_VERSION = 1


def _stamp(st: os.stat_result) -> List[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def remembered_file_digest(path: PathLike, memo_dir: PathLike) -> str:
    """:func:`file_digest` of a file, remembered in ``memo_dir/digests``: the digest is stored with the
    file's identity and status (device, inode, size, modification and change times in ns) and
    reused only while all of them are unchanged. On Linux any write to a file moves its change
    time, which no user call can set back, so a changed file is always read again; elsewhere
    (where the change time may be a creation time) nothing is remembered. Remembering is best
    effort: a memo that cannot be written (a read-only cache) is skipped."""
    import hashlib
    import sys

    path = Path(path)
    if path.is_dir() or not sys.platform.startswith("linux"):
        return file_digest(path)
    st = path.stat()
    real = str(path.resolve())
    memo = Path(memo_dir) / "digests" / (hashlib.blake2b(real.encode("utf-8"), digest_size=12).hexdigest() + ".json")
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
        if (known.get("version") == DIGEST_MEMO_VERSION and known.get("path") == real
                and known.get("stat") == _stamp(st) and isinstance(known.get("blake2b_128"), str)):
            return known["blake2b_128"]
    except (OSError, ValueError, AttributeError):
        pass  # no memo, or a damaged one: read the file
    started = time.time_ns()
    digest = file_digest(path)
    # remembered only when unchanged while read and last changed well before: file times tick
    # coarsely, so a second write in the same tick could otherwise leave every time the same
    if _stamp(path.stat()) == _stamp(st) and started - st.st_ctime_ns > RACY_NS:
        from capaudit.io.atomic import write_text_atomic

        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(memo, json.dumps({"version": DIGEST_MEMO_VERSION, "path": real, "stat": _stamp(st),
                                                "blake2b_128": digest}) + "\n")
        except (OSError, InputError):
            pass  # a read-only or foreign cache: the digest is simply not remembered
    return digest
