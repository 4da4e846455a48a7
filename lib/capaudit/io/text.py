"""Reading text files so that bad bytes name the file and the line.

Python's decoder reports ``'utf-8' codec can't decode byte 0xff in position 7`` and nothing
else. Here a file is decoded with ``errors="surrogateescape"`` (undecodable bytes become lone
surrogates, line splitting is unchanged) and every non-ASCII line is checked, so an invalid byte
raises :class:`~capaudit.errors.InputError` naming the file, the 1-based line and the byte.
A UTF-8 byte-order mark at the start of a file is dropped (``utf-8-sig``); line endings are left
as they are (``newline=""``), so CRLF files read like LF files wherever callers strip lines.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import IO, Iterable, Iterator, Union

from capaudit.errors import InputError

PathLike = Union[str, Path]


def _bad_byte(line: str, path: PathLike, lineno: int) -> InputError:
    col = next(i for i, ch in enumerate(line) if 0xDC80 <= ord(ch) <= 0xDCFF)
    byte = ord(line[col]) - 0xDC00
    return InputError(f"not valid UTF-8 (byte 0x{byte:02x} at column {col + 1}); re-encode the file as UTF-8",
                      path=path, line=lineno)


def check_line(line: str, path: PathLike, lineno: int) -> str:
    """``line`` unchanged, or :class:`InputError` if it holds bytes that were not valid UTF-8."""
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad_byte(line, path, lineno) from None
    return line


def open_text(path: PathLike) -> IO[str]:
    """Open a (``.gz``) text file for :func:`checked_lines`: UTF-8, BOM dropped, ``newline=""``."""
    p = Path(path)
    if p.suffix.lower() == ".gz":
        return io.TextIOWrapper(gzip.open(p, "rb"), encoding="utf-8-sig", errors="surrogateescape", newline="")
    return open(p, "r", encoding="utf-8-sig", errors="surrogateescape", newline="")


def checked_lines(fh: Iterable[str], path: PathLike, start: int = 1) -> Iterator[str]:
    """The lines of ``fh`` (opened by :func:`open_text`), each checked for undecodable bytes.

    A truncated or corrupt ``.gz`` stream is an error naming the file and the last line read.
    """
    it = iter(fh)
    lineno = start - 1
    while True:
        try:
            line = next(it)
        except StopIteration:
            return
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"truncated or corrupt gzip data after line {lineno} ({exc})", path=path) from None
        lineno += 1
        if not line.isascii():
            check_line(line, path, lineno)
        yield line


def iter_text_lines(path: PathLike) -> Iterator[str]:
    """Checked lines of a (``.gz``) UTF-8 text file (line endings kept)."""
    with open_text(path) as fh:
        yield from checked_lines(fh, path)


def read_text_checked(path: PathLike) -> str:
    """The whole file as text (BOM dropped); invalid UTF-8 names the file, line and byte."""
    p = Path(path)
    try:
        data = gzip.open(p, "rb").read() if p.suffix.lower() == ".gz" else p.read_bytes()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"truncated or corrupt gzip data ({exc})", path=p) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        lineno = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {col}); "
                         f"re-encode the file as UTF-8", path=p, line=lineno) from None


__all__ = ["check_line", "checked_lines", "iter_text_lines", "open_text", "read_text_checked"]
