"""Atomic artifact writes: write to a temporary name beside the target, fsync, rename on success.

A failure (exception, Ctrl-C) leaves the previous artifact untouched and no temporary behind.
Write data files first and their manifest last, so a manifest never describes a missing file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, List, Union

from capaudit.errors import InputError

PathLike = Union[str, Path]


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise InputError("output path is a directory; give a file name", path=path)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"cannot write here: {parent} is a file, not a folder", path=path)
            if not os.access(parent, os.W_OK | os.X_OK):
                raise InputError(f"cannot write here: folder {parent} is not writable", path=path)
            break


def check_output_path(path: PathLike) -> Path:
    """Fail early (before any work) when ``path`` cannot become an output file.

    Raises :class:`InputError` when it is a directory, when an existing ancestor is a file, or
    when the nearest existing folder is not writable. Creates nothing.
    """
    target = Path(path)
    _check_target(target)
    return target


def check_output_dir(path: PathLike) -> Path:
    """Like :func:`check_output_path` for an output *folder* (which may exist)."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise InputError("output folder is an existing file; give a folder", path=target)
    for parent in [target, *target.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"cannot write here: {parent} is a file, not a folder", path=target)
            if not os.access(parent, os.W_OK | os.X_OK):
                raise InputError(f"cannot write here: folder {parent} is not writable", path=target)
            break
    return target


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` only if the block succeeds."""
    target = Path(path)
    _check_target(target)
    created = [p for p in target.parents if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, target)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        for d in created:  # folders made for this file only, innermost first
            try:
                d.rmdir()
            except OSError:
                break
        raise


@contextmanager
def atomic_write(path: PathLike, mode: str = "w", encoding: str = "utf-8", newline: Any = None) -> Iterator[IO]:
    """``open(path, mode)`` that only replaces ``path`` when the block completes."""
    if mode not in ("w", "wb"):
        raise ValueError("atomic_write supports modes 'w' and 'wb'")
    with atomic_path(path) as tmp:
        if mode == "wb":
            with open(tmp, "wb") as fh:
                yield fh
        else:
            with open(tmp, "w", encoding=encoding, newline=newline) as fh:
                yield fh


def write_text_atomic(path: PathLike, text: str, encoding: str = "utf-8") -> Path:
    with atomic_write(path, "w", encoding=encoding, newline="") as fh:
        fh.write(text)
    return Path(path)


def write_bytes_atomic(path: PathLike, data: bytes) -> Path:
    with atomic_write(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_json_atomic(path: PathLike, obj: Any, *, indent: int = 2, sort_keys: bool = False,
                      trailing_newline: bool = True) -> Path:
    """JSON (``ensure_ascii=False``) written atomically."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=sort_keys)
    return write_text_atomic(path, text + ("\n" if trailing_newline else ""))


class StagedFiles:
    """Write several files of one folder so that they appear together or not at all.

    ``path(name)`` gives where to write ``name`` inside a hidden staging folder of ``out_dir``;
    ``commit()`` moves every staged file into ``out_dir`` (one ``os.replace`` each, in the order
    they were first requested) and removes the staging folder. Used as a context manager, an
    exception discards the staging folder and leaves ``out_dir`` untouched. Write the folder's
    manifest after ``commit()`` (manifests last).
    """

    def __init__(self, out_dir: PathLike):
        self.out_dir = check_output_dir(out_dir)
        self._names: List[str] = []
        self.staging: Path | None = None
        self._created: List[Path] = []  # folders made for the staging area (removed if nothing lands)

    def path(self, name: str) -> Path:
        if self.staging is None:
            missing = [p for p in [self.out_dir, *self.out_dir.parents] if not p.exists()]
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self._created = missing
            self.staging = self.out_dir / f".staging-{uuid.uuid4().hex}"
            self.staging.mkdir()
        if name not in self._names:
            self._names.append(name)
        return self.staging / name

    def commit(self) -> List[Path]:
        out = []
        if self.staging is None:
            return out
        for name in self._names:
            src = self.staging / name
            if src.exists():
                with open(src, "rb+") as fh:
                    os.fsync(fh.fileno())
                os.replace(src, self.out_dir / name)
                out.append(self.out_dir / name)
        self._created = []  # committed: the folders stay
        self.discard()
        return out

    def discard(self) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None
            for d in self._created:  # innermost first; only folders this object made and left empty
                try:
                    d.rmdir()
                except OSError:
                    break
        self._created = []

    def __enter__(self) -> "StagedFiles":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.discard()  # after commit() nothing is left; after an error the staging goes
