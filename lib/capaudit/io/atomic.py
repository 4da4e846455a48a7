"""Atomic artifact writes: write to a temporary name beside the target, fsync, rename on success.

A failure (exception, Ctrl-C) leaves the previous artifact untouched and no temporary behind.
Write data files first and their manifest last, so a manifest never describes a missing file.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Union

from capaudit.errors import InputError

PathLike = Union[str, Path]


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise InputError("output path is a directory; give a file name", path=path)
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        raise InputError("parent of the output path is not a directory", path=path)


@contextmanager
def atomic_path(path: PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; it replaces ``path`` only if the block succeeds."""
    target = Path(path)
    _check_target(target)
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
