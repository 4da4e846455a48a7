"""Row sources for the alt-text stage: re-iterable streams of ``(row, where)``, never held in memory.

A source spec (params or CLI) is one of:

* ``{file: PATH}``: Parquet file or folder, JSONL(.gz), JSON, CSV/TSV (``header``, ``columns``,
  ``delimiter``), WebDataset ``.tar`` shards (a file, folder or glob); ``format`` overrides the suffix;
* ``{dataset: D, path: P}``: a file of the checksummed data registry (fetched and verified);
* ``{format: hf, hf_path: ID, split, hf_name, data_files, revision}``: a Hugging Face dataset by id,
  streamed through :func:`capaudit.surfaces.readers.read_hf` (online users);
* ``{source: coco_mini}``: COCO-MINI captions as alt-text rows with their image metadata
  (``image`` file name, ``width``, ``height``, ``format: jpeg``; one row per caption);
* ``{rows: callable}``: a zero-argument callable returning an iterator of rows (programmatic use).

Sources are iterated once per pass (the rare-word rule makes two passes), so each ``iter()`` reopens
the input.  Errors name the file, the row/line and the field.
"""

from __future__ import annotations

import glob
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from capaudit.errors import InputError
from capaudit.surfaces import readers

Row = Dict[str, Any]
SpecLike = Union[str, Path, Mapping[str, Any]]
IMAGE_EXTENSIONS = {"jpg": "jpeg", "jpeg": "jpeg", "png": "png", "webp": "webp", "gif": "gif", "bmp": "bmp",
                    "tif": "tiff", "tiff": "tiff"}
_SPEC_KEYS = {"file", "dataset", "path", "format", "header", "columns", "delimiter", "records_field", "hf_path",
              "hf_name", "split", "data_files", "revision", "streaming", "source", "rows", "max_rows", "name",
              "text_field", "url_field", "image_field", "pipelines", "description", "label", "on_missing"}


def as_source_spec(spec: SpecLike) -> Dict[str, Any]:
    """Normalise a path / ``hf:<id>`` string or a mapping into a source spec dict."""
    if isinstance(spec, (str, Path)):
        s = str(spec)
        if s.startswith("hf:"):
            return {"format": "hf", "hf_path": s[3:]}
        return {"file": s}
    if not isinstance(spec, Mapping):
        raise InputError(f"a row source must be a path or a mapping, got {type(spec).__name__}")
    out = dict(spec)
    unknown = set(out) - _SPEC_KEYS
    if unknown:
        raise InputError(f"row source {out.get('name', '?')}: unknown field(s) {sorted(unknown)}")
    limit = out.get("max_rows")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"row source {out.get('name', '?')}: max_rows must be an integer >= 1, got {limit!r}",
                         field="max_rows")
    return out


@dataclass
class RowSource:
    """A re-iterable stream of ``(row, where)`` pairs described by a source spec."""

    spec: Dict[str, Any]
    label: str = ""
    files: List[str] = field(default_factory=list)

    @classmethod
    def from_spec(cls, spec: SpecLike) -> "RowSource":
        s = as_source_spec(spec)
        files: List[str] = []
        if s.get("rows") is not None:
            if not callable(s["rows"]):
                raise InputError("'rows' must be a zero-argument callable returning an iterator of rows")
            label = str(s.get("name") or "rows")
        elif s.get("source") == "coco_mini":
            label = "coco_mini"
        elif s.get("format") == "hf":
            if not s.get("hf_path"):
                raise InputError("format 'hf' needs 'hf_path' (a dataset id)")
            label = f"hf:{s['hf_path']}"
        elif s.get("dataset") and s.get("path"):
            from capaudit.data.registry import fetch

            files = [str(fetch(str(s["dataset"]), str(s["path"])))]
            label = f"{s['dataset']}/{s['path']}"
        elif s.get("file"):
            files = _expand(str(s["file"]))
            label = str(s["file"])
        else:
            raise InputError("a row source needs 'file', 'dataset' + 'path', 'format: hf' + 'hf_path', "
                             "'source: coco_mini' or 'rows'")
        return cls(spec=s, label=label, files=files)

    def __iter__(self) -> Iterator[Tuple[Row, str]]:
        s = self.spec
        limit = s.get("max_rows")
        n = 0
        for row, where in self._rows():
            yield row, where
            n += 1
            if limit is not None and n >= int(limit):
                return

    def _rows(self) -> Iterator[Tuple[Row, str]]:
        s = self.spec
        if s.get("rows") is not None:
            for i, row in enumerate(s["rows"](), start=1):
                if not isinstance(row, Mapping):
                    raise InputError(f"row {i} is a {type(row).__name__}, not a mapping", path=self.label, line=i)
                yield dict(row), f"{self.label}: row {i}"
            return
        if s.get("source") == "coco_mini":
            yield from _coco_mini_rows()
            return
        if s.get("format") == "hf":
            for row, where in readers.read_hf(s["hf_path"], name=s.get("hf_name"), split=s.get("split", "train"),
                                              data_files=s.get("data_files"), revision=s.get("revision"),
                                              streaming=bool(s.get("streaming", True))):
                yield dict(row), where
            return
        for f in self.files:
            yield from _file_rows(Path(f), s)


def _expand(pattern: str) -> List[str]:
    p = Path(pattern).expanduser()
    if glob.has_magic(str(p)):
        files = sorted(glob.glob(str(p), recursive=True))
        if not files:
            raise InputError("no file matches this pattern", path=pattern)
        return files
    if not p.exists():
        raise InputError("input file not found", path=p)
    if p.is_dir():
        tars = sorted(str(x) for x in p.glob("*.tar"))
        if tars:
            return tars
    return [str(p)]


def source_format(path: Path, spec: Mapping[str, Any]) -> str:
    """The format a source file is read as: the spec's ``format``, else WebDataset for tar files,
    else inferred from the name; an :class:`InputError` naming the file when none fits."""
    fmt = spec.get("format")
    if fmt:
        return str(fmt)
    if path.suffix.lower() == ".tar" or path.name.lower().endswith((".tar.gz", ".tgz")):
        return "webdataset"
    try:
        return readers.infer_format(path)
    except ValueError as exc:
        raise InputError(str(exc), path=path) from None


def _file_rows(path: Path, spec: Mapping[str, Any]) -> Iterator[Tuple[Row, str]]:
    fmt = source_format(path, spec)
    try:
        if fmt == "parquet":
            for row, where in readers.read_parquet(path):
                yield row, where
        elif fmt == "jsonl":
            for row, where in readers.read_jsonl(path):
                yield dict(row), where
        elif fmt == "json":
            for row, where in readers.read_json(path, spec.get("records_field")):
                yield dict(row), where
        elif fmt in ("csv", "tsv"):
            delim = spec.get("delimiter") or ("\t" if fmt == "tsv" else ",")
            for row, where in readers.read_csv(path, delim, header=bool(spec.get("header", True)),
                                               columns=spec.get("columns")):
                yield dict(row), where
        elif fmt == "webdataset":
            yield from read_webdataset(path)
        else:
            raise InputError(f"format {fmt!r} is not supported here (parquet, jsonl, json, csv, tsv, webdataset)",
                             path=path)
    except InputError:
        raise
    except ValueError as exc:  # the shared readers raise ValueError naming file and line
        raise InputError(str(exc)) from None


def read_webdataset(path: Path) -> Iterator[Tuple[Row, str]]:
    """Samples of a WebDataset tar shard, streamed: ``txt``/``caption`` text, ``json`` fields merged,
    the image kept only as its extension (``image_ext``, ``format``) and byte size."""
    sample: Row = {}
    key: Optional[str] = None
    n = 0

    def flush() -> Optional[Tuple[Row, str]]:
        nonlocal n
        if key is None or not sample:
            return None
        n += 1
        return {"__key__": key, **sample}, f"{path}: sample {n} (key {key})"

    try:
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                base = os.path.basename(member.name)
                if "." not in base:
                    continue
                stem = os.path.join(os.path.dirname(member.name), base.split(".", 1)[0])
                ext = base.split(".", 1)[1].lower()
                if stem != key:
                    out = flush()
                    if out:
                        yield out
                    key, sample = stem, {}
                fh = tar.extractfile(member)
                data = fh.read() if fh is not None else b""
                if ext in ("txt", "caption", "text"):
                    sample[ext] = data.decode("utf-8", errors="replace").strip()
                elif ext == "json":
                    try:
                        obj = json.loads(data.decode("utf-8"))
                    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                        raise InputError(f"sample {stem}: json is not valid ({exc})", path=path) from None
                    if isinstance(obj, dict):
                        for k, v in obj.items():
                            sample.setdefault(k, v)
                elif ext in IMAGE_EXTENSIONS:
                    sample["image_ext"] = ext
                    sample.setdefault("format", IMAGE_EXTENSIONS[ext])
                    sample["image_bytes"] = len(data)
        out = flush()
        if out:
            yield out
    except tarfile.TarError as exc:
        raise InputError(f"not a readable tar shard ({exc})", path=path) from None


def _coco_mini_rows() -> Iterator[Tuple[Row, str]]:
    from capaudit.data.coco import coco_mini

    idx = coco_mini()
    for img in idx:
        for j, c in enumerate(img.captions):
            yield ({"image": img.file_name, "width": img.width, "height": img.height, "format": "jpeg",
                    "caption": str(c.get("caption", "")).strip(), "image_id": img.id, "caption_id": c.get("id")},
                   f"coco_mini: image {img.file_name} caption {j + 1}")


def get_field(row: Mapping[str, Any], name: str) -> Any:
    """A row field by literal name, then by dotted path; ``KeyError`` if absent."""
    if name in row:
        return row[name]
    obj: Any = row
    for part in name.split("."):
        if not isinstance(obj, Mapping) or part not in obj:
            raise KeyError(name)
        obj = obj[part]
    return obj


def optional_str_field(row: Mapping[str, Any], name: Optional[str]) -> Optional[str]:
    """The string value of field ``name`` (:func:`get_field`); None when ``name`` is not given, the
    field is absent or its value is not a string (an optional URL column)."""
    if not name:
        return None
    try:
        value = get_field(row, name)
    except KeyError:
        return None
    return value if isinstance(value, str) else None


def json_default(obj: Any) -> Any:
    """JSON fallback for row values (bytes → length note, numpy scalars → Python, else ``str``)."""
    if isinstance(obj, (bytes, bytearray)):
        return f"<{len(obj)} bytes>"
    item = getattr(obj, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(obj)


def dumps_row(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, default=json_default)


__all__ = ["RowSource", "as_source_spec", "read_webdataset", "get_field", "json_default", "dumps_row",
           "source_format", "IMAGE_EXTENSIONS"]

