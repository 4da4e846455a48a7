"""Loading a params file with errors that name it (missing, a folder, not UTF-8, not YAML)."""

from __future__ import annotations

from pathlib import Path
from typing import Union

from capaudit.errors import InputError
from capaudit.io.text import read_text_checked

PathLike = Union[str, Path]


def load_params(path: PathLike):
    """:func:`capaudit.config.load_config` after checking the file exists and is valid UTF-8."""
    from capaudit.config import load_config

    p = Path(path)
    if not p.is_file():
        raise InputError("params file not found" if not p.exists() else "params path is not a file", path=p)
    read_text_checked(p)
    return load_config(p)


__all__ = ["load_params"]
