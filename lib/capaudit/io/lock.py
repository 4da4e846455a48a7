"""An exclusive, non-blocking lock held through a lock file beside what it protects.

``ExclusiveLock(path)`` takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on ``path`` (created if needed,
the holder's pid written into it). A second process that asks for the same lock gets
:class:`~capaudit.errors.LockHeldError` at once, naming the lock file and the holder's pid. The
lock file is removed on release; a lock taken on a file that was meanwhile removed is retaken
(inode check), so removal never lets two holders in. Locks die with their process (the kernel
releases ``flock`` locks), so a crash never leaves a store locked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional, Union

from capaudit.errors import LockHeldError

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

PathLike = Union[str, Path]


def lock_path_for(target: PathLike) -> Path:
    """The lock file of ``target`` (a file, or a folder given with or without a trailing slash)."""
    raw = str(target).rstrip("/" + os.sep) or str(target)
    return Path(raw + ".lock")


class ExclusiveLock:
    """A held-or-refused lock (see module docstring); ``what`` names the protected thing in errors."""

    def __init__(self, path: PathLike, what: str = ""):
        self.path = Path(path)
        self.what = what or str(self.path)
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "ExclusiveLock":
        if self._fd is not None:
            return self
        if fcntl is None:  # pragma: no cover
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = ""
                try:
                    holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
                except OSError:
                    pass
                os.close(fd)
                who = f"process {holder}" if holder.isdigit() else "another process"
                raise LockHeldError(f"{self.what}: in use by {who} (lock file {self.path}); wait for it to "
                                    f"finish or stop it, then run again") from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if not same:  # the file was removed by its previous holder: lock the new one
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            self._fd = fd
            return self
        raise LockHeldError(f"{self.what}: could not take the lock file {self.path}")  # pragma: no cover

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(fd)  # closing releases the flock

    def __enter__(self) -> "ExclusiveLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def lock_held(path: PathLike) -> bool:
    """True while some process holds an ``flock`` on the lock file ``path`` (an :class:`ExclusiveLock`
    or a runner's lock file); False when the file is absent or nobody holds it. Creates nothing."""
    if fcntl is None:  # pragma: no cover
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases our probe
    return False


__all__ = ["ExclusiveLock", "lock_path_for", "lock_held"]
