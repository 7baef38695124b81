"""One ``streamlearn serve`` per data directory: an exclusive lock held for the process's life.

Two serves on one directory would each start a Redis on the same append-only files, and the
two would split apart. ``serve`` therefore takes ``fcntl.flock`` on ``<data dir>/serve.lock``
(and writes its pid there, for the message a second serve prints). The kernel releases a
flock when its holder dies, even by SIGKILL, so a stale lock file never blocks a start; the
descriptor is not inherited by children (Python opens files non-inheritable), so the
embedded redis-server does not hold it either.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import Self

LOCK_NAME = "serve.lock"


class DataDirBusy(RuntimeError):
    """Another process holds the data directory."""

    def __init__(self, directory: Path, pid: int | None) -> None:
        holder = f"process {pid}" if pid is not None else "another process"
        super().__init__(
            f"The data directory {directory} is in use by another streamlearn serve "
            f"({holder}): stop that one first, or pass --data-dir DIR for another directory."
        )
        self.directory = directory
        self.pid = pid


class DataDirLock:
    """``with DataDirLock(path):`` — hold ``path`` exclusively, or raise :class:`DataDirBusy`.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d, DataDirLock(d) as lock:
    ...     lock.holder() == os.getpid()
    True
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory).resolve()
        self.path = self.directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirBusy(self.directory, self.holder()) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def holder(self) -> int | None:
        """The pid written by the last holder (None if unreadable)."""
        try:
            return int(self.path.read_text().strip())
        except (OSError, ValueError):
            return None

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


__all__ = ["LOCK_NAME", "DataDirBusy", "DataDirLock"]
