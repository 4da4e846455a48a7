"""One error type for everything a user can get wrong, and how the CLI shows it.

Every command raises :class:`InputError` (or a subclass) for bad input, naming the file and,
where one applies, the line/row and field; ``capaudit`` prints it as one line
(``capaudit <command>: error: <message>``) and exits non-zero, with the traceback only under
``--debug``. Code never prints a half-result after such an error: artifact writers go through
:mod:`capaudit.io.atomic`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Union

PathLike = Union[str, Path]


class CapauditError(Exception):
    """Base class of the errors the CLI reports as one line (exit status ``exit_code``)."""

    exit_code: int = 1


class InputError(CapauditError, ValueError):
    """Bad input: ``path``, ``line`` (1-based line or row) and ``field`` are named in the message."""

    def __init__(self, message: str, *, path: Optional[PathLike] = None, line: Optional[int] = None,
                 field: Optional[str] = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        where = ""
        if self.path is not None:
            where = self.path + (f":{line}" if line is not None else "")
        if field is not None:
            where = f"{where} field {field!r}" if where else f"field {field!r}"
        super().__init__(f"{where}: {message}" if where else message)


class FieldNotFoundError(InputError):
    """A named field that no row has; the message lists the fields that exist."""

    def __init__(self, field: str, available: Sequence[str], *, path: Optional[PathLike] = None,
                 hint: str = ""):
        fields = ", ".join(sorted(map(str, available))) or "none"
        msg = f"no row has this field (fields present: {fields})"
        if hint:
            msg += f"; {hint}"
        super().__init__(msg, path=path, field=field)


class EmptyInputError(InputError):
    """An input with no usable record (empty file, or every caption empty)."""


class LockHeldError(CapauditError):
    """Another process holds the lock of a store or output."""

    exit_code = 3


class NotebookError(CapauditError):
    """A notebook failed while executing; the message names the notebook and the failing cell."""


class OfflineError(InputError):
    """A remote resource (Hugging Face dataset, download) cannot be reached; says how to run offline."""


def one_line(message: object) -> str:
    """``message`` as a single line: line breaks and their indentation become ``"; "``."""
    text = str(message).strip()
    parts = [p.strip() for p in text.splitlines() if p.strip()]
    return "; ".join(parts)


__all__ = ["CapauditError", "InputError", "FieldNotFoundError", "EmptyInputError", "LockHeldError",
           "NotebookError", "OfflineError", "one_line"]
