"""Row readers per file format: each yields ``(row, where)`` with ``where`` naming file and line/row.

Formats: ``jsonl`` (optionally ``.gz``), ``json`` (list of records, mapping key → record, or
mapping key → caption list as in the COCO Karpathy files), ``parquet`` (pyarrow batches),
``csv``/``tsv``, ``txt`` (one caption per non-empty line), ``txt_files`` (one caption per file,
key = file stem), ``hf`` (``datasets.load_dataset(..., streaming=True)``) and ``hf_disk``
(``datasets.load_from_disk``).  Reserved row fields: ``__key__`` (the key a format implies) and
``__captions__`` (the captions a format implies).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

Row = Mapping[str, Any]
KEY = "__key__"
CAPTIONS = "__captions__"

FORMATS = ("jsonl", "json", "parquet", "csv", "tsv", "txt", "txt_files", "hf", "hf_disk")
_SUFFIX_FORMAT = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet",
                  ".csv": "csv", ".tsv": "tsv", ".txt": "txt"}
PARQUET_BATCH_ROWS = 8192


def infer_format(path: Path) -> str:
    """Format from the file suffix (``.jsonl[.gz]``, ``.json``, ``.parquet``, ``.csv``, ``.tsv``, ``.txt``)."""
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    if path.is_dir():
        return "parquet"
    fmt = _SUFFIX_FORMAT.get(suffixes[-1] if suffixes else "")
    if fmt is None:
        raise ValueError(f"{path}: cannot infer the file format from its suffix; set 'format' to one of {FORMATS}")
    return fmt


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix.lower() == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, "r", encoding="utf-8-sig", newline="")


def iter_json_lines(path: Path, unit: str = "line", objects_only: bool = True) -> Iterator[Tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of a JSONL file (``.gz`` too); errors name
    the file and the ``unit`` number. ``objects_only`` requires every value to be a JSON object."""
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: {unit} {lineno}: not valid JSON ({exc.msg} at column {exc.colno})") from None
            if objects_only and not isinstance(value, dict):
                raise ValueError(f"{path}: {unit} {lineno}: expected a JSON object, got {type(value).__name__}")
            yield lineno, value


def read_jsonl(path: Path) -> Iterator[Tuple[Row, str]]:
    for lineno, row in iter_json_lines(path):
        yield row, f"{path}: line {lineno}"


def _navigate(obj: Any, dotted: str, path: Path) -> Any:
    for part in dotted.split("."):
        if not isinstance(obj, dict) or part not in obj:
            raise ValueError(f"{path}: records_field '{dotted}' not found (missing '{part}')")
        obj = obj[part]
    return obj


def read_json(path: Path, records_field: Optional[str] = None) -> Iterator[Tuple[Row, str]]:
    with _open_text(path) as fh:
        try:
            data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    if records_field:
        data = _navigate(data, records_field, path)
    if isinstance(data, list):
        for i, item in enumerate(data, start=1):
            if isinstance(item, str):
                yield {CAPTIONS: [item]}, f"{path}: item {i}"
            elif isinstance(item, dict):
                yield item, f"{path}: item {i}"
            else:
                raise ValueError(f"{path}: item {i}: expected an object or a string, got {type(item).__name__}")
        return
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top-level JSON must be a list or an object, got {type(data).__name__}")
    for k, v in data.items():
        where = f"{path}: key {k!r}"
        if isinstance(v, dict):
            yield {KEY: k, **v}, where
        elif isinstance(v, (str, list)) or v is None:
            yield {KEY: k, CAPTIONS: v}, where
        else:
            raise ValueError(f"{where}: expected a record, a caption or a list of captions, got {type(v).__name__}")


def read_csv(path: Path, delimiter: str, header: bool = True,
             columns: Optional[Sequence[str]] = None) -> Iterator[Tuple[Row, str]]:
    csv.field_size_limit(max(csv.field_size_limit(), min(sys.maxsize, 2**31 - 1)))
    with _open_text(path) as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        names: Optional[List[str]] = list(columns) if columns else None
        if header:
            try:
                first = next(reader)
            except StopIteration:
                return
            names = names or first
        for cells in reader:
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue
            cols = names or [f"col{i}" for i in range(len(cells))]
            if len(cells) != len(cols):
                raise ValueError(f"{path}: line {reader.line_num}: {len(cells)} fields, header has {len(cols)}")
            yield dict(zip(cols, cells)), f"{path}: line {reader.line_num}"


def read_parquet(path: Path, columns: Optional[Sequence[str]] = None) -> Iterator[Tuple[Row, str]]:
    import pyarrow.parquet as pq

    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"{path}: no *.parquet files in this folder")
    for f in files:
        pf = pq.ParquetFile(f)
        cols = None
        if columns:
            have = set(pf.schema_arrow.names)
            missing = [c for c in columns if c not in have]
            if missing:
                raise ValueError(f"{f}: column(s) {missing} not in the file (columns: {sorted(have)})")
            cols = list(dict.fromkeys(columns))
        n = 0
        for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=cols):
            for row in batch.to_pylist():
                n += 1
                yield row, f"{f}: row {n}"


def read_txt(path: Path) -> Iterator[Tuple[Row, str]]:
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                yield {CAPTIONS: [line]}, f"{path}: line {lineno}"


def read_txt_file(path: Path) -> Iterator[Tuple[Row, str]]:
    yield {KEY: path.stem, CAPTIONS: [path.read_text(encoding="utf-8-sig")]}, str(path)


def read_hf(hf_path: str, *, name: Optional[str] = None, split: str = "train", data_files: Any = None,
            revision: Optional[str] = None, streaming: bool = True, shuffle_buffer: Optional[int] = None,
            seed: Optional[int] = None) -> Iterator[Tuple[Row, str]]:
    """Rows of a Hugging Face dataset, streamed by default (spec §2.1: shuffle buffer 10000 when seeded)."""
    import datasets

    kwargs: Dict[str, Any] = {"split": split, "streaming": streaming}
    if name:
        kwargs["name"] = name
    if data_files is not None:
        kwargs["data_files"] = data_files
    if revision:
        kwargs["revision"] = revision
    ds = datasets.load_dataset(hf_path, **kwargs)
    if shuffle_buffer and seed is not None:
        ds = ds.shuffle(seed=seed, buffer_size=shuffle_buffer) if streaming else ds.shuffle(seed=seed)
    label = f"hf:{hf_path}" + (f"/{name}" if name else "") + f"[{split}]"
    for i, row in enumerate(ds, start=1):
        yield row, f"{label}: row {i}"


def read_hf_disk(path: Path, split: Optional[str] = None) -> Iterator[Tuple[Row, str]]:
    import datasets

    ds = datasets.load_from_disk(str(path))
    if isinstance(ds, datasets.DatasetDict):
        if split is None:
            if len(ds) != 1:
                raise ValueError(f"{path}: dataset has splits {sorted(ds)}; set 'split'")
            split = next(iter(ds))
        if split not in ds:
            raise ValueError(f"{path}: split '{split}' not in {sorted(ds)}")
        ds = ds[split]
    for i, row in enumerate(ds, start=1):
        yield row, f"{path}: row {i}"
