"""Manifests that describe the files beside them, and readers that check them.

A manifest written by capaudit carries ``"files": {<file name>: {"sha256": ..., "bytes": ...}}``
for the data files of its folder (written after those files, so it never describes a file that is
not there). A reader calls :func:`check_file` before using a file: when a manifest that lists the
file sits beside it, the file's size and sha256 must match, otherwise the file is refused with an
error naming it (a truncated file left by a failed run can never be used silently).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

from capaudit.errors import InputError

PathLike = Union[str, Path]


def sha256_of(path: PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def file_record(path: PathLike) -> Dict[str, Any]:
    """``{"sha256", "bytes"}`` of one file."""
    p = Path(path)
    return {"sha256": sha256_of(p), "bytes": p.stat().st_size}


def files_block(paths: Sequence[PathLike]) -> Dict[str, Dict[str, Any]]:
    """The ``files`` block of a manifest for ``paths`` (keyed by file name)."""
    return {Path(p).name: file_record(p) for p in paths}


def read_manifest(path: PathLike) -> Dict[str, Any]:
    """A manifest as a dict; unreadable JSON names the file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InputError("manifest is not valid UTF-8", path=p) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"manifest is not valid JSON ({exc.msg}); it may have been cut short, "
                         f"re-run the command that wrote it", path=p, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise InputError("manifest must be a JSON object", path=p)
    return data


def check_against(path: PathLike, record: Union[str, Mapping[str, Any]], manifest: PathLike, hint: str = "") -> None:
    """Raise :class:`InputError` unless ``path`` matches ``record`` (a sha256 string or ``{sha256, bytes}``)."""
    p = Path(path)
    sha = record if isinstance(record, str) else record.get("sha256")
    size = None if isinstance(record, str) else record.get("bytes")
    again = f"; {hint}" if hint else ""
    if not p.is_file():
        raise InputError(f"listed in {manifest} but missing{again}", path=p)
    if size is not None and p.stat().st_size != int(size):
        raise InputError(f"does not match its manifest {manifest} ({p.stat().st_size} bytes, manifest says {size}): "
                         f"a failed or interrupted run left it behind{again}", path=p)
    if sha and sha256_of(p) != sha:
        raise InputError(f"does not match its manifest {manifest} (sha256 differs): the file changed after the "
                         f"manifest was written{again}", path=p)


def check_file(path: PathLike, manifest: Optional[PathLike] = None, hint: str = "") -> bool:
    """Check ``path`` against ``manifest`` (default: ``manifest.json`` beside it) if it lists the file.

    Returns True when the file was checked, False when no manifest lists it. Raises
    :class:`InputError` on a mismatch.
    """
    p = Path(path)
    m = Path(manifest) if manifest is not None else p.parent / "manifest.json"
    if not m.is_file():
        return False
    files = read_manifest(m).get("files")
    if not isinstance(files, Mapping) or p.name not in files:
        return False
    check_against(p, files[p.name], m, hint)
    return True


__all__ = ["check_against", "check_file", "file_record", "files_block", "read_manifest", "sha256_of"]
