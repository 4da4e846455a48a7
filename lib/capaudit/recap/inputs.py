"""Streaming image inputs of the captioning runner (reference-spec §6 "Inputs").

:func:`open_images` turns one ``--images`` value into an iterator of
:class:`~capaudit.recap.preprocess.Job` (image id, path, embedded bytes or file, context fields).
Nothing is held in memory beyond one folder listing, one WebDataset sample or one Parquet batch.

* **Folder**: every file with an image suffix (:data:`IMAGE_SUFFIXES`), recursively, in sorted
  order, hidden entries skipped; ``image_id`` = the file stem for files at the top level and the
  relative path without its suffix (``sub/dir/stem``) below it. A folder holding
  ``_manifest.jsonl`` is read through that manifest instead (as in the reference).
* **Manifest JSONL**: one object per line with the image path in ``image_path`` (or ``path``,
  ``file_name``, ``file``, ``image``; relative paths are relative to the manifest's folder) and
  the id in ``image_id`` (or ``id``, ``key``; default the file stem). Other fields are context
  (e.g. the anime-booru tags). A missing image file is a failed image, not an error.
* **WebDataset tar shards** (a ``.tar`` file, or a glob): members with an image suffix;
  ``image_id`` = the member's stem (§6), ``image_path`` = ``<shard>#<member>``; a ``.json``
  member of the same sample (same key = path up to the first dot of the base name) is context.
  A truncated or corrupt shard yields one failed entry ``<shard stem>#shard`` with the reason
  (a shard cut exactly between two members cannot be told from a shorter shard: tar has no
  length header).
* **Parquet** (a file, a folder of ``*.parquet``, or a glob) read in batches of 64 rows (pyarrow
  holds one row group at a time): the
  image column holds bytes, a ``{bytes, path}`` struct (Hugging Face ``Image``) or a path
  (relative to the Parquet file's folder); the id column is ``image_id``/``id``/``key``/
  ``__key__`` by default, else the path's stem, else ``<file stem>:<row>``.

Bad input (unreadable manifest line, missing column) raises :class:`~capaudit.errors.InputError`
naming the file, line/row and field; a bad *image* is never an input error. :meth:`ImageInput.check`
finds such errors before a run touches its store: every manifest line is read, every Parquet
file's columns resolved, and an input with no image at all is an error.
"""

from __future__ import annotations

import glob
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import EmptyInputError, FieldNotFoundError, InputError
from capaudit.io.text import check_line

from .preprocess import Job

PathLike = Union[str, Path]

IMAGE_SUFFIXES = frozenset({
    ".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".gif", ".bmp", ".tif", ".tiff", ".ppm", ".pgm",
    ".pbm", ".pnm", ".tga", ".ico", ".jp2", ".j2k", ".heic", ".heif", ".avif", ".jxl",
})
MANIFEST_NAME = "_manifest.jsonl"
PATH_FIELDS = ("image_path", "path", "file_name", "file", "image")
ID_FIELDS = ("image_id", "id", "key")
PARQUET_ID_COLUMNS = ("image_id", "id", "key", "__key__", "image_key")
PARQUET_IMAGE_COLUMNS = ("image", "jpg", "jpeg", "png", "webp", "image_bytes", "bytes", "img", "image_path",
                         "path", "file_name", "filepath")
PARQUET_BATCH = 64
KINDS = ("folder", "manifest", "tar", "parquet")


@dataclass
class InputStats:
    """What listing the inputs found besides images."""

    skipped_non_image: int = 0
    shards: int = 0
    files: int = 0


@dataclass
class ImageInput:
    """One ``--images`` value: its kind and files (iterate it to stream :class:`Job` s)."""

    spec: str
    kind: str
    paths: List[Path]
    id_column: Optional[str] = None
    image_column: Optional[str] = None
    context_fields: Tuple[str, ...] = ()
    stats: InputStats = field(default_factory=InputStats)

    def describe(self) -> Dict[str, Any]:
        return {"spec": self.spec, "kind": self.kind, "files": len(self.paths),
                "id_column": self.id_column, "image_column": self.image_column}

    def check(self) -> None:
        """Read what can be read up front (module docstring): an :class:`InputError` naming file,
        line and field, before anything is written. Tar shards are read only while captioning
        (a damaged shard becomes a failed entry then)."""
        if self.kind == "manifest":
            for p in self.paths:  # every line: an error anywhere stops the run before it starts
                if not sum(1 for _ in iter_manifest(p, self.context_fields)):
                    raise EmptyInputError("manifest lists no image", path=p)
        elif self.kind == "parquet":
            import pyarrow.parquet as pq

            rows = 0
            for p in self.paths:
                try:
                    pf = pq.ParquetFile(p)
                except Exception as exc:
                    raise InputError(f"not a readable Parquet file ({exc})", path=p) from None
                names = pf.schema_arrow.names
                if _pick(names, self.image_column, PARQUET_IMAGE_COLUMNS, p, "image") is None:
                    raise FieldNotFoundError(PARQUET_IMAGE_COLUMNS[0], names, path=p,
                                             hint="name the image column with --image-column")
                _pick(names, self.id_column, PARQUET_ID_COLUMNS, p, "id")
                rows += pf.metadata.num_rows
            if not rows:
                raise EmptyInputError("Parquet input has no row", path=self.spec)
        elif self.kind == "folder":
            if not any(True for root in self.paths for _ in iter_folder(root, InputStats())):
                raise EmptyInputError(f"no image file (suffixes {', '.join(sorted(IMAGE_SUFFIXES)[:6])}, ...)",
                                      path=self.spec)
        elif not self.paths:  # pragma: no cover - open_images never builds one
            raise EmptyInputError("no input file", path=self.spec)

    def __iter__(self) -> Iterator[Job]:
        for job in self._jobs():
            job.source = self.spec
            yield job

    def _jobs(self) -> Iterator[Job]:
        if self.kind == "folder":
            for root in self.paths:
                yield from iter_folder(root, self.stats)
        elif self.kind == "manifest":
            for p in self.paths:
                yield from iter_manifest(p, self.context_fields)
        elif self.kind == "tar":
            for p in self.paths:
                self.stats.shards += 1
                yield from iter_tar(p, self.context_fields, self.stats)
        else:
            for p in self.paths:
                self.stats.files += 1
                yield from iter_parquet(p, self.context_fields, self.id_column, self.image_column)


def _kind_of_file(p: Path) -> Optional[str]:
    name = p.name.lower()
    if name.endswith((".jsonl", ".ndjson")):
        return "manifest"
    if name.endswith(".tar"):
        return "tar"
    if name.endswith(".parquet"):
        return "parquet"
    return None


def open_images(spec: PathLike, *, id_column: Optional[str] = None, image_column: Optional[str] = None,
                context_fields: Sequence[str] = ()) -> ImageInput:
    """Resolve one ``--images`` value (folder, manifest, tar shard(s), Parquet; globs allowed)."""
    raw = str(spec)
    if glob.has_magic(raw):
        paths = sorted(Path(p) for p in glob.glob(raw, recursive=True))
        if not paths:
            raise InputError("no file matches this pattern", path=raw, field="images")
        kinds = {("folder" if p.is_dir() else _kind_of_file(p)) for p in paths}
        if len(kinds) != 1 or None in kinds:
            raise InputError(f"a pattern must match files of one kind (.tar, .parquet, .jsonl or folders); "
                             f"found {sorted(str(k) for k in kinds)}", path=raw, field="images")
        kind = kinds.pop()
    else:
        p = Path(raw).expanduser()
        if not p.exists():
            raise InputError("no such file or folder", path=p, field="images")
        if p.is_dir():
            if (p / MANIFEST_NAME).is_file():
                kind, paths = "manifest", [p / MANIFEST_NAME]
            elif any(p.glob("*.parquet")) and not _has_images(p):
                kind, paths = "parquet", sorted(p.rglob("*.parquet"))
            elif any(p.glob("*.tar")) and not _has_images(p):
                kind, paths = "tar", sorted(p.glob("*.tar"))
            else:
                kind, paths = "folder", [p]
        else:
            kind = _kind_of_file(p)
            if kind is None:
                raise InputError("cannot tell the input kind; give a folder of images, a manifest .jsonl, "
                                 "WebDataset .tar shard(s) or a .parquet file", path=p, field="images")
            paths = [p]
    if (id_column or image_column) and kind != "parquet":
        raise InputError("--id-column/--image-column apply to Parquet inputs only", path=raw, field="images")
    return ImageInput(raw, kind, paths, id_column, image_column, tuple(context_fields))


def _has_images(d: Path) -> bool:
    with os.scandir(d) as it:
        return any(e.is_file() and os.path.splitext(e.name)[1].lower() in IMAGE_SUFFIXES for e in it)


# -- folder ---------------------------------------------------------------------------------------
def iter_folder(root: Path, stats: Optional[InputStats] = None) -> Iterator[Job]:
    """Images under ``root`` in sorted order (module docstring); streamed one folder at a time."""
    root = Path(root)
    stats = stats if stats is not None else InputStats()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = PurePosixPath(Path(dirpath).relative_to(root).as_posix())
        for name in sorted(filenames):
            if name.startswith("."):
                continue
            stem, ext = os.path.splitext(name)
            if ext.lower() not in IMAGE_SUFFIXES:
                stats.skipped_non_image += 1
                continue
            path = os.path.join(dirpath, name)
            image_id = stem if str(rel) == "." else str(rel / stem)
            yield Job(image_id=image_id, image_path=os.path.abspath(path), file=path)


# -- manifest -------------------------------------------------------------------------------------
def iter_manifest(path: Path, context_fields: Sequence[str] = ()) -> Iterator[Job]:
    """Images listed by a manifest JSONL (module docstring)."""
    base = path.parent
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                if not line.isascii():
                    check_line(line.decode("utf-8", "surrogateescape"), path, lineno)  # names the bad byte
                raise InputError(f"invalid JSON ({exc})", path=path, line=lineno) from None
            if not isinstance(row, dict):
                raise InputError("a manifest line must be a JSON object", path=path, line=lineno)
            ref = next((row[f] for f in PATH_FIELDS if isinstance(row.get(f), str) and row[f]), None)
            if ref is None:
                raise InputError(f"no image path (one of {', '.join(PATH_FIELDS)})", path=path, line=lineno,
                                 field=PATH_FIELDS[0])
            p = Path(ref).expanduser()
            if not p.is_absolute():
                p = base / p
            rid = next((row[f] for f in ID_FIELDS if row.get(f) not in (None, "")), None)
            if rid is not None and not isinstance(rid, (str, int)):
                raise InputError("image id must be a string or an integer", path=path, line=lineno, field="image_id")
            image_id = str(rid) if rid is not None else p.stem
            ctx = {f: row[f] for f in context_fields if f in row}
            yield Job(image_id=image_id, image_path=os.path.abspath(p), file=str(p), context=ctx)


# -- WebDataset tar shards ------------------------------------------------------------------------
def _sample_key(member: str) -> str:
    d, _, base = member.rpartition("/")
    k = base.split(".", 1)[0]
    return f"{d}/{k}" if d else k


def iter_tar(path: Path, context_fields: Sequence[str] = (), stats: Optional[InputStats] = None) -> Iterator[Job]:
    """Image members of a WebDataset shard, read sequentially (module docstring)."""
    stats = stats if stats is not None else InputStats()
    pending: List[Job] = []
    ctx: Dict[str, Any] = {}
    key: Optional[str] = None

    def flush() -> Iterator[Job]:
        for j in pending:
            j.context = {f: ctx[f] for f in context_fields if f in ctx}
            yield j
        pending.clear()

    try:
        with tarfile.open(path, mode="r|*") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                k = _sample_key(m.name)
                if k != key:
                    yield from flush()
                    ctx = {}
                    key = k
                ext = os.path.splitext(m.name)[1].lower()
                if ext in IMAGE_SUFFIXES:
                    fh = tf.extractfile(m)
                    data = fh.read() if fh is not None else b""
                    pending.append(Job(image_id=PurePosixPath(m.name).stem, image_path=f"{path}#{m.name}", data=data))
                elif ext == ".json" and context_fields:
                    fh = tf.extractfile(m)
                    try:
                        obj = json.loads(fh.read() if fh is not None else b"{}")
                    except ValueError as exc:
                        raise InputError(f"member {m.name}: invalid JSON ({exc})", path=path) from None
                    if isinstance(obj, dict):
                        ctx.update(obj)
                else:
                    stats.skipped_non_image += 1
    except (tarfile.TarError, EOFError, OSError) as exc:
        yield from flush()
        yield Job(image_id=f"{path.stem}#shard", image_path=str(path),
                  error=f"{path}: corrupt or truncated tar shard ({type(exc).__name__}: {exc})")
        return
    yield from flush()


# -- Parquet --------------------------------------------------------------------------------------
def _pick(columns: Sequence[str], wanted: Optional[str], candidates: Sequence[str], path: Path,
          what: str) -> Optional[str]:
    if wanted:
        if wanted not in columns:
            raise FieldNotFoundError(wanted, columns, path=path, hint=f"the {what} column")
        return wanted
    return next((c for c in candidates if c in columns), None)


def iter_parquet(path: Path, context_fields: Sequence[str] = (), id_column: Optional[str] = None,
                 image_column: Optional[str] = None) -> Iterator[Job]:
    """Images in a Parquet file, one batch of 64 rows at a time (module docstring)."""
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"not a readable Parquet file ({exc})", path=path) from None
    names = pf.schema_arrow.names
    img_col = _pick(names, image_column, PARQUET_IMAGE_COLUMNS, path, "image")
    if img_col is None:
        raise FieldNotFoundError(PARQUET_IMAGE_COLUMNS[0], names, path=path,
                                 hint="name the image column with --image-column")
    id_col = _pick(names, id_column, PARQUET_ID_COLUMNS, path, "id")
    ctx_cols = [c for c in context_fields if c in names and c not in (img_col, id_col)]
    cols = list(dict.fromkeys([c for c in (id_col, img_col) if c] + ctx_cols))
    base = path.parent
    row = 0
    for batch in pf.iter_batches(batch_size=PARQUET_BATCH, columns=cols):
        for rec in batch.to_pylist():
            row += 1
            where = f"{path}: row {row}"
            v = rec.get(img_col)
            data: Optional[bytes] = None
            ref: Optional[str] = None
            if isinstance(v, (bytes, bytearray, memoryview)):
                data = bytes(v)
            elif isinstance(v, dict):
                if v.get("bytes") is not None:
                    data = bytes(v["bytes"])
                ref = v.get("path") if isinstance(v.get("path"), str) and v.get("path") else None
            elif isinstance(v, str) and v:
                ref = v
            elif v is not None:
                raise InputError(f"image cell is {type(v).__name__}; expected bytes, a path or a {{bytes, path}} "
                                 "struct", path=path, line=row, field=img_col)
            file = None
            if data is None and ref is not None:
                p = Path(ref).expanduser()
                file = str(p if p.is_absolute() else base / p)
            rid = rec.get(id_col) if id_col else None
            if rid is not None and not isinstance(rid, (str, int)):
                raise InputError(f"id is {type(rid).__name__}; expected a string or an integer", path=path,
                                 line=row, field=id_col)
            if rid not in (None, ""):
                image_id = str(rid)
            elif ref is not None:
                image_id = PurePosixPath(ref).stem
            else:
                image_id = f"{path.stem}:{row - 1}"
            ctx = {c: rec[c] for c in ctx_cols if rec.get(c) is not None}
            image_path = os.path.abspath(file) if file else (f"{path}#row={row - 1}" if data is not None else None)
            if data is None and file is None:
                yield Job(image_id=image_id, image_path=image_path, error=f"{where}: empty image cell ({img_col})",
                          context=ctx)
                continue
            yield Job(image_id=image_id, image_path=image_path, file=file, data=data, context=ctx)


# -- metadata join --------------------------------------------------------------------------------
def load_metadata(path: PathLike, fields: Sequence[str], key: str = "image_id") -> Dict[str, Dict[str, Any]]:
    """``image_id → {field: value}`` from a JSONL or Parquet metadata file (only ``fields`` kept)."""
    p = Path(path)
    out: Dict[str, Dict[str, Any]] = {}
    if not p.is_file():
        raise InputError("metadata file not found", path=p, field="metadata")
    if p.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(p)
        names = pf.schema_arrow.names
        if key not in names:
            raise FieldNotFoundError(key, names, path=p, hint="the metadata key column (--metadata-key)")
        cols = [key] + [f for f in fields if f in names]
        rows: Iterator[Tuple[int, Mapping[str, Any]]] = (
            (i, r) for i, r in enumerate((r for b in pf.iter_batches(columns=cols) for r in b.to_pylist()), 1))
    else:
        def _jsonl() -> Iterator[Tuple[int, Mapping[str, Any]]]:
            with open(p, "rb") as fh:
                for lineno, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        r = json.loads(line)
                    except ValueError as exc:
                        raise InputError(f"invalid JSON ({exc})", path=p, line=lineno) from None
                    if not isinstance(r, dict):
                        raise InputError("a metadata line must be a JSON object", path=p, line=lineno)
                    yield lineno, r
        rows = _jsonl()
    for n, r in rows:
        k = r.get(key)
        if k in (None, ""):
            raise InputError("missing key", path=p, line=n, field=key)
        out[str(k)] = {f: r[f] for f in fields if r.get(f) is not None}
    return out


__all__ = ["IMAGE_SUFFIXES", "MANIFEST_NAME", "KINDS", "InputStats", "ImageInput", "open_images", "iter_folder",
           "iter_manifest", "iter_tar", "iter_parquet", "load_metadata"]
