"""gc's stale sockets: socket files of handoff's tmux servers nothing listens on, removed under
tmux's own start lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket as socketlib
import stat
from collections.abc import Iterator
from pathlib import Path

from handoff.operations.gc.found import Leftover, Options, Record
from handoff.operations.gc.sessions import handoff_sockets


def tmux_dir() -> Path:
    """Where tmux keeps its sockets for this user (as tmux.stop_if_empty finds it)."""
    return Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"


def _answers(path: Path) -> bool:
    """Something listens on the socket file (or cannot be ruled out)."""
    with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as probe:
        probe.settimeout(2.0)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:
            return True
    return True


@contextlib.contextmanager
def _tmux_start_lock(path: Path) -> Iterator[bool]:
    """tmux's own lock for starting a server on the socket (a client holds <socket>.lock while
    it starts one): held, no server can appear on the socket while gc looks at it and removes
    it. Yields False when a client holds it now. A lock file made here is removed while held,
    as tmux's server does with its own."""
    lock = path.with_name(f"{path.name}.lock")
    made = not lock.exists()
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            if made:
                lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


def socket_leftovers(records: list[Record], options: Options) -> list[Leftover]:
    found = []
    for name in handoff_sockets(records):
        path = tmux_dir() / name
        try:
            if not stat.S_ISSOCK(path.lstat().st_mode):
                continue
        except OSError:
            continue
        if _answers(path):
            continue
        item = Leftover("socket", str(path), "no tmux server answers on it", removable=True)
        if not options.dry_run:
            with _tmux_start_lock(path) as locked:
                if locked and not _answers(path):
                    path.unlink(missing_ok=True)
                    item.removed = True
                else:
                    item.removable, item.why = False, "a tmux server is starting on it: kept"
        found.append(item)
    return found
