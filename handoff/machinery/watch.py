"""Wake up when files change in a few folders (inotify on Linux; plain polling elsewhere, or
where the kernel refuses a watch, which `Watcher.polling` says), or when a followed process
exits (a pidfd, Linux 5.3+): one process per key, so one wait follows every peer of a phase
(the reviewers work side by side).

Callers always rescan after a wake-up, so a file written before the watch began, or lost in
an event-queue overflow, is still seen: the events only decide *when* to look.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import select
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

_IN_MODIFY = 0x002
_IN_CLOSE_WRITE = 0x008
_IN_MOVED_TO = 0x080
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_MASK = _IN_MODIFY | _IN_CLOSE_WRITE | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000
POLL_INTERVAL = 0.1


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None


def _why(code: int, limit: str) -> str:
    text = os.strerror(code)
    if code == errno.ENOSPC:  # inotify_add_watch: the per-user limit, never a full disk
        text += f" (the per-user limit fs.inotify.{limit} is reached)"
    elif code == errno.EMFILE:  # inotify_init1: either limit
        text += f" (the per-user limit fs.inotify.{limit}, or this process's open files)"
    return text


class Watcher:
    """A context manager: `wait(timeout)` returns early when something changes in the folders."""

    def __init__(self, folders: Iterable[Path], also: Iterable[int] = ()) -> None:
        """also: more descriptors whose readiness wakes `wait` (e.g. a listening socket);
        negative ones are ignored."""
        self.folders = [Path(f) for f in folders]
        self.also = [fd for fd in also if fd >= 0]
        self._fd = -1
        #: key → (the followed pid, its pidfd or -1)
        self._followed: dict[str, tuple[int, int]] = {}
        #: the keys whose followed process has exited (seen by `wait`); cleared by `follow`
        self.gone: set[str] = set()
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
        #: why the folders are polled rather than watched by inotify ("" when they are
        #: watched): for the caller to say, since polling costs a look every POLL_INTERVAL
        self.polling = self._watch()

    def _watch(self) -> str:
        libc = _libc()
        if libc is None:
            return f"no inotify on {sys.platform}"
        fd = int(libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC))
        if fd < 0:
            return "inotify_init1: " + _why(ctypes.get_errno(), "max_user_instances")
        for folder in self.folders:
            # A folder left unwatched would never wake `wait`: a caller sleeping until its
            # next look (30 s for a hooked peer) would see a report that late. All or none.
            if libc.inotify_add_watch(fd, os.fsencode(folder), _MASK) < 0:
                problem = _why(ctypes.get_errno(), "max_user_watches")
                os.close(fd)
                return f"inotify_add_watch: {problem}"
        self._fd = fd
        return ""

    def follow(self, pid: int | None, key: str = "") -> bool:
        """Wake `wait` when process pid exits (None: follow nothing under key). False where
        the process cannot be followed (no pidfd here, or it is already gone): the caller must
        look itself. Following the same live pid again changes nothing."""
        held = self._followed.get(key)
        if held is not None and pid == held[0] and (held[1] >= 0 or key in self.gone):
            return held[1] >= 0
        self._drop_pidfd(key)
        self._followed.pop(key, None)
        self.gone.discard(key)
        if pid is None:
            return False
        self._followed[key] = (pid, -1)
        if not hasattr(os, "pidfd_open"):
            return False
        try:
            self._followed[key] = (pid, os.pidfd_open(pid))
        except OSError:  # gone already, or a kernel without pidfds
            return False
        return True

    @property
    def exited(self) -> bool:
        """The process followed under the default key has exited."""
        return "" in self.gone

    def wait(self, timeout: float) -> bool:
        """Block up to timeout seconds; True when a change or the followed process's exit woke
        us (always False when polling)."""
        pidfds = {fd: key for key, (_, fd) in self._followed.items() if fd >= 0}
        if self._fd < 0 and not pidfds and not self.also:
            time.sleep(min(timeout, POLL_INTERVAL))
            return False
        if self._fd < 0:  # no inotify: changes in the folders are seen by polling
            timeout = min(timeout, POLL_INTERVAL)
        watched = [fd for fd in (self._fd, *pidfds, *self.also) if fd >= 0]
        ready, _, _ = select.select(watched, [], [], max(timeout, 0.0))
        if not ready:
            return False
        for fd in ready:
            key = pidfds.get(fd)
            if key is not None:
                # readable for good once the process is gone: reported once, then not watched
                self.gone.add(key)
                self._drop_pidfd(key)
        if self._fd in ready:
            try:
                while os.read(self._fd, 65536):
                    pass
            except BlockingIOError:
                pass
        return True

    def _drop_pidfd(self, key: str) -> None:
        pid, fd = self._followed.get(key, (0, -1))
        if fd >= 0:
            os.close(fd)
            self._followed[key] = (pid, -1)

    def close(self) -> None:
        for key in list(self._followed):
            self._drop_pidfd(key)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Watcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
