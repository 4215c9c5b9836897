"""One orchestrator per ticket.

An advisory lock on a file in the ticket directory that the kernel drops when its owner dies,
however it dies, so a crashed owner never blocks a resume (no pid-reuse guesswork needed). The
owner's pid is written into the file only to tell people who holds it.

On Linux it is an open-file-description lock (`F_OFD_SETLK`), because only that kind can be
*tested* without taking it (`F_OFD_GETLK`): probing "who holds it" by briefly taking a shared
`flock` made a concurrent `acquire()` fail now and then (measured: 23–159 of 2,000 refused).
Unlike classic POSIX locks it belongs to the open file, not the process, so closing another
descriptor of the same file never drops it. Where OFD locks do not exist (macOS) it is a `flock`,
probed with a shared lock as before, and `acquire()` retries briefly so a probe cannot refuse it.
flock and fcntl locks do not see each other: every holder of this file uses the same kind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from handoff.errors import Busy
from handoff.processes import alive

#: struct flock on 64-bit Linux: l_type, l_whence, l_start, l_len, l_pid (+ padding)
FLOCK = struct.Struct("@hhqqi4x")
OFD = hasattr(fcntl, "F_OFD_SETLK") and sys.maxsize > 2**32
#: how long a probe may see the lock held before its owner has written its pid
PID_WAIT = 1.0
#: without OFD locks: how long acquire() keeps trying while a probe holds a shared lock
PROBE_GRACE = 0.2
CONFLICT = (errno.EAGAIN, errno.EACCES)


def _ofd(fd: int, command: int, kind: int) -> int:
    """One OFD lock call on the whole file; returns the l_type the kernel reports."""
    packed = fcntl.fcntl(fd, command, FLOCK.pack(kind, os.SEEK_SET, 0, 0, 0))
    return int(FLOCK.unpack(packed)[0])


def try_lock(fd: int) -> bool:
    """Take the exclusive lock without waiting; False when someone else holds it."""
    try:
        if OFD:
            _ofd(fd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in CONFLICT:
            return False
        raise
    return True


def is_locked(fd: int) -> bool:
    """Whether anyone holds the lock; with OFD locks this takes nothing."""
    if OFD:
        return _ofd(fd, fcntl.F_OFD_GETLK, fcntl.F_WRLCK) != fcntl.F_UNLCK
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


class TicketLock:
    def __init__(self, path: Path, wait: float = 0.0) -> None:
        """wait: how long acquire() waits for a holder to let go (an orchestrator finishing
        its last steps after its ticket passed) before it says Busy."""
        self.path = path
        self.wait = wait
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + max(self.wait, 0.0 if OFD else PROBE_GRACE)
        while not try_lock(fd):
            if time.monotonic() >= deadline:
                os.close(fd)
                owner = holder(self.path)
                raise Busy(
                    f"another orchestrator (pid {owner or '?'}) is already running this ticket",
                    "watch it with 'handoff attach', or stop it with 'handoff stop' first",
                ) from None
            time.sleep(0.01)
        os.fchmod(fd, 0o600)  # a lock file made by an older handoff may be world-readable
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
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
    """The pid of the live owner of the lock, None when nobody holds it, -1 when it is held but
    its owner's pid cannot be read (the file was emptied or overwritten by hand)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        deadline = time.monotonic() + PID_WAIT
        while is_locked(fd):
            pid = _pid_in(fd)
            # a new owner truncates the file and writes its pid just after locking it
            if pid is not None and alive(pid):
                return pid
            if time.monotonic() >= deadline:
                return -1
            time.sleep(0.01)
        return None
    finally:
        os.close(fd)


def _pid_in(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


@contextlib.contextmanager
def briefly(path: Path, bound: float, what: str, hint: str) -> Iterator[None]:
    """A flock on path for a short read-change-write of a book the home's handoffs share (the
    port book, the queue), waited for at most bound seconds: past it, Busy saying `what` (a
    holder stopped with ^Z would otherwise hold every other one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + bound
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Busy(f"{what} ({path}) stayed locked for {bound:g}s", hint) from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)  # drops the flock
