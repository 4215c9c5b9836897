"""Wake up when files change in a few folders, or when a followed process exits (a pidfd,
Linux 5.3+): one process per key, so one wait follows every peer of a phase (the reviewers
work side by side).

Folders are watched with inotify on Linux, called directly: watchdog's own inotify thread
adds a thread hop and a pipe (measured here, a file written → `wait` returned, 300 times each,
two runs: p50 0.28 and 0.68 ms direct against 1.2 and 2.3 ms through watchdog, p95 0.7 and
2.4 against 3.1 and 8.7 ms). Elsewhere (macOS: FSEvents or kqueue) watchdog watches them and
wakes the wait through a pipe; without it, or where the kernel refuses a watch, the folders
are polled, which `Watcher.polling` says.

Callers always rescan after a wake-up, so a file written before the watch began, or lost in
an event-queue overflow, is still seen: the events only decide *when* to look.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
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


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """libc with inotify, from the symbols already loaded (dlopen(NULL)): no
    `ctypes.util.find_library`, which runs `ldconfig -p` in a subprocess on every call
    (twice per orchestrator start, measured)."""
    if not sys.platform.startswith("linux"):
        return None
    for name in (None, "libc.so.6"):  # None: a statically linked interpreter has no libc.so
        try:
            lib = ctypes.CDLL(name, use_errno=True)
            lib.inotify_init1  # noqa: B018 - AttributeError where this libc has none
        except (OSError, AttributeError):
            continue
        return lib
    return None


def _why(code: int, limit: str) -> str:
    text = os.strerror(code)
    if code == errno.ENOSPC:  # inotify_add_watch: the per-user limit, never a full disk
        text += f" (the per-user limit fs.inotify.{limit} is reached)"
    elif code == errno.EMFILE:  # inotify_init1: either limit
        text += f" (the per-user limit fs.inotify.{limit}, or this process's open files)"
    return text


#: watchdog's events that say a file changed (not one merely opened or read: the caller's
#: own rescan would wake it again)
_CHANGES = frozenset({"created", "modified", "moved", "deleted", "closed"})


class _Observed:
    """watchdog watching the folders, writing a byte into a pipe for each change: the pipe's
    end is what `wait` selects on, as it does inotify's descriptor."""

    def __init__(self, folders: list[Path]) -> None:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        self.read, self._write = os.pipe()
        for fd in (self.read, self._write):
            os.set_blocking(fd, False)
        pipe = self._write

        class Wake(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.event_type in _CHANGES:
                    with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
                        os.write(pipe, b"\0")

        self._observer = Observer()
        try:
            for folder in folders:
                self._observer.schedule(Wake(), str(folder), recursive=False)
            self._observer.start()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._observer.is_alive():
            self._observer.stop()
            self._observer.join(timeout=5)
        for fd in (self.read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


class Watcher:
    """A context manager: `wait(timeout)` returns early when something changes in the folders."""

    def __init__(self, folders: Iterable[Path], also: Iterable[int] = (),
                 by: str = "") -> None:
        """also: more descriptors whose readiness wakes `wait` (e.g. a listening socket);
        negative ones are ignored. by: "inotify" or "watchdog" (tests); "" picks inotify on
        Linux and watchdog elsewhere."""
        self.folders = [Path(f) for f in folders]
        self.also = [fd for fd in also if fd >= 0]
        self._fd = -1
        self._observed: _Observed | None = None
        #: key → (the followed pid, its pidfd or -1)
        self._followed: dict[str, tuple[int, int]] = {}
        #: the keys whose followed process has exited (seen by `wait`); cleared by `follow`
        self.gone: set[str] = set()
        for folder in self.folders:
            folder.mkdir(parents=True, exist_ok=True)
        #: why the folders are polled rather than watched ("" when they are watched): for
        #: the caller to say, since polling costs a look every POLL_INTERVAL
        #: what watches them: "inotify" or "watchdog"
        self.by = by or ("inotify" if _libc() is not None else "watchdog")
        self.polling = self._watch(self.by)

    def _watch(self, by: str) -> str:
        if by == "watchdog":
            return self._watch_by_watchdog()
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

    def _watch_by_watchdog(self) -> str:
        try:
            self._observed = _Observed(self.folders)
        except ImportError:
            return (f"no inotify on {sys.platform}, and watchdog is not installed "
                    "(pip install watchdog)")
        except OSError as exc:  # e.g. a kqueue or inotify limit
            return f"watchdog: {exc}"
        self._fd = self._observed.read
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
        if self._observed is not None:
            self._observed.close()  # closes the pipe, self._fd among it
            self._observed = None
        elif self._fd >= 0:
            os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> Watcher:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
