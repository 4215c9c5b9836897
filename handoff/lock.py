"""One orchestrator per ticket.

An advisory `flock` on a file in the ticket directory: the kernel drops it when the owner dies,
however it dies, so a crashed owner never blocks a resume (no pid-reuse guesswork needed). The
owner's pid is written into the file only to tell people who holds it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from handoff.errors import Busy


class TicketLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = holder(self.path)
            raise Busy(
                f"another orchestrator (pid {owner or '?'}) is already running this ticket",
                "watch it with 'handoff attach', or stop it with 'handoff stop' first",
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> TicketLock:
        self.acquire()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def holder(path: Path) -> int | None:
    """The pid of the live owner of the lock, or None when nobody holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = path.read_text(encoding="utf-8").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
