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
import io
import json
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError, OfflineError
from capaudit.io.text import checked_lines, open_text, read_text_checked

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
    """UTF-8 text (BOM dropped, ``newline=""``); iterate it through :func:`checked_lines`."""
    return open_text(path)


def not_text_hint(path: Path) -> Optional[str]:
    """A hint when ``path`` is a binary container (Parquet, gzip without .gz) rather than text."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return None
    if head == b"PAR1":
        return "this is a Parquet file, not JSON lines (give it a .parquet suffix or format: parquet)"
    if head[:2] == b"\x1f\x8b" and path.suffix.lower() != ".gz":
        return "this is a gzip file; name it *.gz"
    return None


def iter_json_lines(path: Path, unit: str = "line", objects_only: bool = True) -> Iterator[Tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of a JSONL file (``.gz`` too); errors name
    the file and the ``unit`` number. ``objects_only`` requires every value to be a JSON object.
    Undecodable bytes name the file and line (:mod:`capaudit.io.text`)."""
    path = Path(path)
    hint = not_text_hint(path)
    if hint:
        raise InputError(hint, path=path)
    with _open_text(path) as fh:
        for lineno, line in enumerate(checked_lines(fh, path), start=1):
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
    text = read_text_checked(path)
    try:
        data = json.loads(text)
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
        reader = csv.reader(checked_lines(fh, path), delimiter=delimiter)
        names: Optional[List[str]] = list(columns) if columns else None
        try:
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
        except csv.Error as exc:
            raise InputError(f"not valid {'TSV' if delimiter == chr(9) else 'CSV'} ({exc})", path=path,
                             line=reader.line_num) from None


def read_parquet(path: Path, columns: Optional[Sequence[str]] = None) -> Iterator[Tuple[Row, str]]:
    import pyarrow.parquet as pq

    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"{path}: no *.parquet files in this folder")
    for f in files:
        try:
            pf = pq.ParquetFile(f)
        except Exception as exc:  # pyarrow raises ArrowInvalid/OSError for non-Parquet bytes
            raise InputError(f"not a readable Parquet file ({type(exc).__name__}: {exc})", path=f) from None
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
        for lineno, line in enumerate(checked_lines(fh, path), start=1):
            if line.strip():
                yield {CAPTIONS: [line]}, f"{path}: line {lineno}"


def read_txt_file(path: Path) -> Iterator[Tuple[Row, str]]:
    yield {KEY: path.stem, CAPTIONS: [read_text_checked(path)]}, str(path)


HF_PROBE_TIMEOUT_S = 3.0
OFFLINE_ENV = ("CAPAUDIT_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def _offline_flag() -> Optional[str]:
    import os

    for name in OFFLINE_ENV:
        if os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no"):
            return name
    return None


def _hub_reachable(timeout: float = HF_PROBE_TIMEOUT_S) -> Optional[str]:
    """None when the Hugging Face Hub answers a TCP connect within ``timeout`` s, else why not."""
    import os
    import socket
    import threading
    from urllib.parse import urlsplit

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parts = urlsplit(endpoint)
    host = parts.hostname or "huggingface.co"
    port = parts.port or (80 if parts.scheme == "http" else 443)
    box: Dict[str, Any] = {}

    def probe() -> None:  # getaddrinfo has no timeout: run it in a thread we can abandon
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            box["ok"] = True
        except OSError as exc:
            box["err"] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    if box.get("ok"):
        return None
    return box.get("err") or f"no answer from {host}:{port} within {timeout:g} s"


def hub_unreachable() -> Optional[str]:
    """Why the Hugging Face Hub cannot be used from here (an offline flag is set, or it does not
    answer), else ``None``."""
    flag = _offline_flag()
    return f"{flag} is set" if flag else _hub_reachable()


def _offline_how(label: str, hf_path: str) -> str:
    return (f"to run offline, save it once where the Hub is reachable "
            f"(datasets.load_dataset('{hf_path}').save_to_disk(DIR)) and use format 'hf_disk' with file DIR, "
            f"or use a local JSONL/Parquet copy")


def read_hf(hf_path: str, *, name: Optional[str] = None, split: str = "train", data_files: Any = None,
            revision: Optional[str] = None, streaming: bool = True, shuffle_buffer: Optional[int] = None,
            seed: Optional[int] = None) -> Iterator[Tuple[Row, str]]:
    """Rows of a Hugging Face dataset, streamed by default (spec §2.1: shuffle buffer 10000 when seeded).

    Offline (``CAPAUDIT_OFFLINE``, ``HF_HUB_OFFLINE`` or ``HF_DATASETS_OFFLINE`` set), or when
    the Hub does not answer a TCP connect within :data:`HF_PROBE_TIMEOUT_S`, this fails at once
    with :class:`OfflineError` naming the dataset and how to run offline (instead of the
    ``datasets`` library's retries). A builder name (``json``, ``parquet``, ...) with local
    ``data_files`` needs no network and is not probed.
    """
    label = f"hf:{hf_path}" + (f"/{name}" if name else "") + f"[{split}]"
    local_builder = hf_path in ("json", "csv", "parquet", "text", "arrow", "imagefolder", "audiofolder")
    if not local_builder:
        flag = _offline_flag()
        if flag:
            raise OfflineError(f"Hugging Face dataset '{hf_path}' cannot be streamed while offline ({flag} is set); "
                               + _offline_how(label, hf_path), path=label)
        why = _hub_reachable()
        if why:
            raise OfflineError(f"Hugging Face dataset '{hf_path}' cannot be reached (the Hub did not answer: {why}); "
                               + _offline_how(label, hf_path), path=label)
    import datasets

    kwargs: Dict[str, Any] = {"split": split, "streaming": streaming}
    if name:
        kwargs["name"] = name
    if data_files is not None:
        kwargs["data_files"] = data_files
    if revision:
        kwargs["revision"] = revision
    try:
        ds = datasets.load_dataset(hf_path, **kwargs)
    except (ConnectionError, OSError) as exc:
        raise OfflineError(f"Hugging Face dataset '{hf_path}' could not be loaded ({type(exc).__name__}: {exc}); "
                           + _offline_how(label, hf_path), path=label) from None
    except ValueError as exc:  # unknown split / config / data_files
        raise InputError(f"Hugging Face dataset '{hf_path}': {exc}", path=label) from None
    if shuffle_buffer and seed is not None:
        ds = ds.shuffle(seed=seed, buffer_size=shuffle_buffer) if streaming else ds.shuffle(seed=seed)
    for i, row in enumerate(ds, start=1):
        yield row, f"{label}: row {i}"


def read_hf_disk(path: Path, split: Optional[str] = None) -> Iterator[Tuple[Row, str]]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError as exc:
        raise InputError(f"not a dataset saved with save_to_disk ({exc})", path=path) from None
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
