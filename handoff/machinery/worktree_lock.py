"""One lock per repository around git's worktree add, list and prune (`repo_lock`).

Tickets started together made git read another process's half-written worktree: every
`git worktree` call handoff makes, and every change to what a ticket's checkouts are, runs
under this lock. It is an flock in the repository's git common dir, so it dies with its holder
however the holder dies, and it is re-entrant within one thread (making or removing a checkout,
under the lock, asks git which worktrees it knows, which takes it again).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from handoff.errors import Busy, ExternalFailure
from handoff.machinery.proc import git_timeout

LOCK_FILE = "handoff-worktrees.lock"

_held = threading.local()  # per thread: lock file → how deep it holds it (the lock is re-entrant)


def _depths() -> dict[Path, int]:
    depths: dict[Path, int] | None = getattr(_held, "depths", None)
    if depths is None:
        depths = _held.depths = {}
    return depths


def lock_timeout() -> float:
    """Long enough for a holder's slowest git call (a checkout plus its hooks) and one more."""
    return 2 * git_timeout()


@contextlib.contextmanager
def repo_lock(common_dir: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the repository's worktree lock (an flock in its git common dir, so it dies with
    its holder, however it dies); wait for it at most timeout seconds, then raise Busy."""
    path = common_dir / LOCK_FILE
    depth = _depths()
    if depth.get(path):
        depth[path] += 1
        try:
            yield
        finally:
            depth[path] -= 1
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ExternalFailure(f"cannot open the worktree lock {path}: {exc.strerror}",
                              "handoff needs to write in the repository's git dir") from None
    try:
        _take(fd, path, lock_timeout() if timeout is None else timeout)
        depth[path] = 1
        try:
            yield
        finally:
            depth.pop(path, None)
    finally:
        os.close(fd)  # drops the flock


def _take(fd: int, path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                owner = _read_owner(path)
                raise Busy(
                    f"the worktrees of {path.parent} stayed locked for {timeout:g}s by another "
                    f"handoff process ({owner})",
                    "a git command of another ticket is slow or hangs (a hook?); retry once it "
                    "is done ('handoff resume'), or end that process",
                ) from None
            time.sleep(0.02)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # only to name the holder in that message
        return


def _read_owner(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"
