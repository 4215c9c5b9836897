"""Starts in flight: what a new orchestrator lets go first.

A `handoff start` holds a shared lock on `$HANDOFF_HOME/starts.lock` from its first instant to
its exit: the relay client (handoff.machinery.relay) takes it before it even connects to the
warm process, and the command takes it again around its own work (making the ticket, opening
its window), which is all a start that may stop to ask a person for approval holds it for. An
orchestrator, once it holds its ticket's lock (so `status` shows it running), waits until no
start holds that lock before its first step, at most BOUND. Twenty starts at once otherwise
had the first tickets' orchestrators make worktrees and launch peers on the two cores while
the last starts still ran (docs/performance.md). The work is delayed by no more than the starts
take, the kernel drops a dead start's lock, and the bound keeps a stream of starts from holding
a ticket back for long. Best effort both ways: a lock file that cannot be opened holds nobody
back.

Standard library only, and no pathlib: the relay client of every `start` imports this.
"""

from __future__ import annotations

import fcntl
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType

NAME = "starts.lock"
#: the longest an orchestrator waits for starts before its first step
BOUND = 2.0
#: how often a waiting orchestrator looks again
LOOK = 0.02
#: how long a start tries to say it is in flight (only an orchestrator's look, microseconds
#: long, holds the lock the other way)
MARK_BOUND = 0.5


def _open(home: str | os.PathLike[str]) -> int | None:
    try:
        return os.open(os.path.join(home, NAME), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return None


def mark(home: str | os.PathLike[str]) -> int | None:
    """Say a start is in flight until the descriptor returned is closed (or this process
    ends); None when it could not be said."""
    fd = _open(home)
    if fd is None:
        return None
    deadline = time.monotonic() + MARK_BOUND
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:  # not said: an orchestrator may go first
                os.close(fd)
                return None
            time.sleep(0.001)


class InFlight:
    """This start is in flight while in the `with`: orchestrators' first steps wait for it."""

    def __init__(self, home: str | os.PathLike[str]) -> None:
        self.home = home
        self.fd: int | None = None

    def __enter__(self) -> None:
        self.fd = mark(self.home)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the lock goes with it
            self.fd = None


def wait_for_starts(home: str | os.PathLike[str], bound: float = BOUND) -> float:
    """Wait until no start is in flight, at most bound seconds; how long it waited."""
    fd = _open(home)
    if fd is None:
        return 0.0
    began = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return time.monotonic() - began
            except BlockingIOError:
                if time.monotonic() - began >= bound:
                    return time.monotonic() - began
                time.sleep(LOOK)
    finally:
        os.close(fd)
