"""Reading, copying, listing and removing paths beneath a folder a peer can write, without ever
following a link out of it, waiting on a FIFO, or reading without a bound.

A peer runs as the person. Inside its fence it writes its worktree, its drafts and signal
folders and its CLI's state folder; handoff, outside the fence and with the person's full
rights, reads what it left there. A symbolic link planted there (the CLI's session log made a
link to ~/.ssh/id_ed25519) would make handoff copy a secret back to where the peer reads it; a
FIFO would hold handoff in open() for ever; a sparse file of a terabyte would be read whole.

So every operation here takes a `root`, the folder the caller trusts (its own, or one whose
place the peer cannot change: a folder bound into the sandbox cannot be renamed from inside
it), and a path beneath it. The root itself is opened as the caller named it (a person's
~/.claude may well be a link into their dotfiles); every component below it is opened from the
descriptor of the one above with O_NOFOLLOW, so a link anywhere below the root is refused,
never followed. The walk holds a descriptor of each folder it passed, so a folder renamed or
swapped for a link once it was opened changes nothing. (Linux's openat2 with
RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS does the same in one call, but only through ctypes and a
syscall number per architecture, on kernels from 5.6: the walk would still be needed on macOS
and older kernels, and one way, tested everywhere, is safer than two. It costs one open per
folder below the root: microseconds.)

Files are opened O_NONBLOCK (a FIFO opens at once instead of waiting for a writer; a socket
refuses to open) and used only when fstat says they are regular files with one name (a hard
link is another name of a file elsewhere). What is read or copied is bounded in bytes.

Standard library only, and light to import: a lean lane (`handoff submit`) may use it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePath

from handoff.errors import HandoffError

TYPE_CHECKING = False  # typing's own import would be most of this module's cost to a lean lane
if TYPE_CHECKING:
    from typing import BinaryIO

#: folders below a root the walks and a removal go down
MAX_DEPTH = 256
#: entries of one folder a listing looks at (a peer may make a million)
MAX_ENTRIES = 10_000
#: bytes copied per read
CHUNK = 1024 * 1024

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
# O_NOCTTY: a terminal device must never become handoff's controlling terminal by being opened
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_HINT = ("a peer writes this folder, and handoff takes only plain files and folders from it: "
         "if a peer planted this, remove it by hand (`handoff log` shows the ticket's events); "
         "if you made it, put a plain file there instead")


class Refused(HandoffError):
    """handoff would not read, copy, list or remove a path beneath a peer-writable root: it is
    (or passes through) a link, is no regular file, is too large, is outside the root."""

    def __init__(self, path: PurePath, message: str, hint: str = _HINT) -> None:
        super().__init__(message, hint)
        self.path = Path(path)


class Gone(Refused):
    """The path, or a folder on the way to it, does not exist."""

    def __init__(self, path: PurePath) -> None:
        super().__init__(path, f"{path} does not exist", "")


class Entry:
    """One regular file of a listed folder, as lstat saw it. (A plain class: no dataclasses
    import for a lean lane.)"""

    __slots__ = ("name", "path", "stat")

    def __init__(self, name: str, path: Path, info: os.stat_result) -> None:
        self.name = name
        self.path = path
        self.stat = info

    def __repr__(self) -> str:
        return f"Entry({self.path}, {self.stat.st_size} bytes)"


def open_file(root: PurePath, path: PurePath) -> int:
    """A read-only descriptor (blocking, close-on-exec) of path, a regular file with one name
    beneath root, reached without following a link. Raises Refused, or Gone."""
    parts = _parts(root, path)
    folder = _walk(root, parts[:-1])
    try:
        try:
            fd = os.open(parts[-1], _FILE, dir_fd=folder)
        except OSError as exc:
            raise _refusal(folder, parts[-1], path, exc, "a regular file") from None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(path, f"{path} is {_kind(info.st_mode)}, not a regular file")
        if info.st_nlink > 1:
            raise Refused(path, f"{path} has {info.st_nlink} names: a hard link is another "
                          "name of a file that may lie outside the peer's reach")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(root: PurePath, path: PurePath, limit: int) -> bytes:
    """The whole of path (see `open_file`), refused when it holds more than limit bytes: at
    most limit + 1 are read, so a file that grows under us ends at once."""
    fd = open_file(root, path)
    with os.fdopen(fd, "rb") as handle:
        _check_size(path, os.fstat(fd).st_size, limit)
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise Refused(path, f"cannot read {path}: {exc.strerror or exc}") from None
    _check_size(path, len(data), limit)
    return data


def copy_out(root: PurePath, path: PurePath, dest: Path, limit: int, *,
             durable: bool = False) -> int:
    """Copy path (see `open_file`), at most limit bytes, to dest, a place handoff owns; the
    number of bytes copied. dest is written aside and renamed over (a link at dest is
    replaced, not followed), 600, its missing folders made 700; readers see the old file or
    the whole new one. durable: on disk before the rename (fsync). Raises Refused (the
    source), or ExternalFailure (dest could not be written; nothing is left half written)."""
    from handoff.record import store  # tempfile, hashlib: not for the lean lanes' imports

    fd = open_file(root, path)
    with os.fdopen(fd, "rb") as source:
        _check_size(path, os.fstat(fd).st_size, limit)
        if not dest.parent.is_dir():
            store.private_dir(dest.parent)
        try:  # mkstemp makes it 600: for the user alone from its first byte
            handle, name = _staged(dest)
        except OSError as exc:
            raise store.write_failed(dest, exc) from None
        staged = Path(name)
        try:
            with os.fdopen(handle, "wb") as target:
                copied = 0
                while chunk := _read(source, path):
                    copied += len(chunk)
                    _check_size(path, copied, limit)  # it grew while being copied
                    target.write(chunk)
                target.flush()
                if durable:
                    os.fsync(target.fileno())
            os.replace(staged, dest)
        except OSError as exc:
            staged.unlink(missing_ok=True)
            raise store.write_failed(dest, exc) from None
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
    return copied


def files(root: PurePath, folder: PurePath, limit: int = MAX_ENTRIES) -> list[Entry]:
    """The regular files of folder (root itself, or a folder beneath it, reached without
    following a link), with their lstat, in the folder's own order; of its first limit entries
    only. Links, FIFOs, sockets and folders in it are left out, and left alone."""
    fd = _walk(root, _parts(root, folder, may_be_root=True))
    found: list[Entry] = []
    try:
        with os.scandir(fd) as entries:  # scandir works on a duplicate: fd stays ours
            for count, entry in enumerate(entries):
                if count >= limit:
                    break
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue  # it went away meanwhile
                if stat.S_ISREG(info.st_mode):
                    found.append(Entry(entry.name, Path(folder) / entry.name, info))
    except OSError as exc:
        raise Refused(folder, f"cannot list {folder}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return found


def remove_tree(root: PurePath, path: PurePath) -> bool:
    """Remove path beneath root and, when it is a folder, everything in it, following no link:
    a link (at path or inside it) is removed as a link, what it points to is untouched. False
    when there was nothing to remove. Raises Refused when a folder on the way to path is a
    link or no folder, or the tree cannot be removed (nested deeper than MAX_DEPTH, a file
    that cannot be unlinked)."""
    parts = _parts(root, path)
    try:
        folder = _walk(root, parts[:-1])
    except Gone:
        return False
    try:
        return _remove(folder, parts[-1], Path(path), 0)
    except OSError as exc:
        raise Refused(path, f"cannot remove {path}: {exc.strerror or exc}",
                      f"remove {path} by hand") from None
    finally:
        os.close(folder)


# ---- the walk ------------------------------------------------------------------------------

def _parts(root: PurePath, path: PurePath, may_be_root: bool = False) -> list[str]:
    """path's components below root, checked by name alone: beneath root, no `..`."""
    try:
        below = PurePath(path).relative_to(root) if PurePath(path).is_absolute() \
            else PurePath(path)
    except ValueError:
        raise Refused(path, f"{path} is not beneath {root}",
                      "handoff reads a peer's files only from beneath the folder it knows "
                      "the peer writes") from None
    parts = list(below.parts)
    if ".." in parts:
        raise Refused(path, f"{path} leaves {root} through '..'",
                      "name the file by its path beneath the folder, without '..'")
    if not parts and not may_be_root:
        raise Refused(path, f"{path} is the folder {root} itself, not a path beneath it",
                      "name a file or folder inside it")
    if len(parts) > MAX_DEPTH:
        raise Refused(path, f"{path} is more than {MAX_DEPTH} folders below {root}")
    return parts


def _walk(root: PurePath, parts: list[str]) -> int:
    """A descriptor of the folder root/parts…: root opened as named, each part below it from
    the descriptor of the one above, O_NOFOLLOW."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Gone(root) from None
    except OSError as exc:
        raise Refused(root, f"cannot open the folder {root}: {exc.strerror or exc}") from None
    where = Path(root)
    for part in parts:
        where = where / part
        try:
            try:
                below = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                raise _refusal(fd, part, where, exc, "a folder") from None
        finally:
            os.close(fd)
        fd = below
    return fd


def _refusal(folder: int, name: str, where: PurePath, exc: OSError, wanted: str) -> Refused:
    """Why name (in the open folder) could not be opened as wanted, said by what lstat finds
    there."""
    try:
        mode: int | None = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return Gone(where)
    except OSError:
        mode = None
    if mode is None:
        return Gone(where) if exc.errno == errno.ENOENT else \
            Refused(where, f"cannot open {where}: {exc.strerror or exc}")
    if stat.S_ISLNK(mode):
        return Refused(where, f"{where} is a symbolic link: handoff does not follow a link "
                       "where a peer can write")
    if exc.errno in (errno.ENOTDIR, errno.ENXIO, errno.ELOOP):
        return Refused(where, f"{where} is {_kind(mode)}, not {wanted}")
    return Refused(where, f"cannot open {where}: {exc.strerror or exc}")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISREG, "a regular file")):
        if test(mode):
            return name
    return "not a regular file"


# ---- reading and copying -------------------------------------------------------------------

def _check_size(path: PurePath, size: int, limit: int) -> None:
    if size > limit:
        raise Refused(path, f"{path} holds more than {limit} bytes, the most handoff reads of it",
                      "a peer may have made it so; if it is a real log, it is too long to keep")


def _read(source: BinaryIO, path: PurePath) -> bytes:
    try:
        chunk = source.read(CHUNK)
    except OSError as exc:
        raise Refused(path, f"cannot read {path}: {exc.strerror or exc}") from None
    return chunk


def _staged(dest: Path) -> tuple[int, str]:
    import tempfile

    return tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")


# ---- removing ------------------------------------------------------------------------------

def _remove(folder: int, name: str, where: Path, depth: int) -> bool:
    """Remove name from the open folder: unlinked when it is no folder (a link, as a link),
    else emptied through a descriptor opened O_NOFOLLOW, then removed. False: it was gone."""
    try:
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(mode):
        try:
            os.unlink(name, dir_fd=folder)  # unlink never follows a link: it removes the link
        except FileNotFoundError:
            return False
        return True
    if depth >= MAX_DEPTH:
        raise Refused(where, f"{where} is nested more than {MAX_DEPTH} folders deep",
                      f"remove {where} by hand")
    try:
        inner = os.open(name, _DIR, dir_fd=folder)
    except FileNotFoundError:
        return False
    except OSError as exc:  # swapped for a link or a file since the lstat: not followed
        raise Refused(where, f"{where} changed while handoff removed it: "
                      f"{exc.strerror or exc}", f"remove {where} by hand") from None
    try:
        with os.scandir(inner) as entries:
            names = [entry.name for entry in entries]
        for child in names:
            _remove(inner, child, where / child, depth + 1)
    finally:
        os.close(inner)
    try:
        os.rmdir(name, dir_fd=folder)
    except FileNotFoundError:
        return False
    return True
