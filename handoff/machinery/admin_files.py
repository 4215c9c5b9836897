"""git's small files that say where a worktree's git lives, read as a peer may have written
them.

A peer writes its worktree (and so its `.git` file) and, when it commits, its worktree's admin
folder (`<common>/worktrees/<name>`: `gitdir`, `HEAD`, `config.worktree`). handoff reads those
files only as data, here: never through a link, never blocking on a FIFO, never more than a
pointer's worth of bytes, and a path they name is compared with the one handoff expects, never
followed.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

#: bytes read of a `.git` or `gitdir` file a peer may have written
POINTER_LIMIT = 4096


def digest_of(path: Path) -> str:
    """sha256 of a regular file's bytes, read without following a link; '' for none or an
    empty one (the same to git), 'unreadable' for anything else there (a link, a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return ""
    except OSError:
        return "unreadable"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "unreadable"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 65536):
            digest.update(chunk)
        return "" if digest.hexdigest() == hashlib.sha256().hexdigest() else digest.hexdigest()
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)


def read_pointer(path: Path) -> str | None:
    """The text of a small regular file (a worktree's `.git`, an admin folder's `gitdir`),
    read without following a link, without blocking on a FIFO, at most POINTER_LIMIT bytes;
    None when it is not such a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, POINTER_LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > POINTER_LIMIT:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def real_dir(path: Path) -> bool:
    """path is a folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def same_path(said: str, path: Path) -> bool:
    """A path a git pointer file names is path: as written, or once resolved (git writes the
    real path of a repository reached through a link)."""
    if not said:
        return False
    written = Path(os.path.normpath(said))
    return written == path or written == Path(os.path.realpath(path)) or \
        Path(os.path.realpath(written)) == Path(os.path.realpath(path))
