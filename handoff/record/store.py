"""Where handoff keeps its state, and how it writes files so a crash never leaves half of one."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from handoff.errors import ExternalFailure, UsageError
from handoff.record.home import state_home_path

TICKET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: what git never allows anywhere in a ref name (git help check-ref-format)
REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def ref_problem(branch: str) -> str:
    """Why git would refuse branch as a branch name ('' when it would not): the rules of
    `git check-ref-format --branch`, checked without running git."""
    if not branch:
        return "a branch name may not be empty"
    if branch.startswith("-"):
        return "a branch name may not start with '-'"
    if branch in ("@", "HEAD"):
        return f"a branch name may not be {branch!r}"
    found = REF_FORBIDDEN.search(branch)
    if found:
        return f"a branch name may not contain {found.group()!r}"
    if branch.startswith("/") or branch.endswith("/"):
        return "a branch name may not start or end with '/'"
    if branch.endswith("."):
        return "a branch name may not end with '.'"
    for part in branch.split("/"):
        if part.startswith("."):
            return f"no part of a branch name may start with '.' ({part!r})"
        if part.endswith(".lock"):
            return f"no part of a branch name may end with '.lock' ({part!r})"
    return ""


def validate_ticket_id(ticket: str) -> str:
    """Return the id unchanged, or refuse it before anything is created from it: it names a
    folder, a tmux session and the branch handoff/<id>, so git must accept that branch too."""
    hint = ("use 1–64 characters: letters, digits, '.', '_' or '-', starting with a letter or "
            "digit, not ending in '.' or '.lock' (no '..', no '/'), e.g. PROJ-123")
    if not TICKET_ID.fullmatch(ticket) or ".." in ticket:
        raise UsageError(f"invalid ticket id {ticket!r}", hint)
    problem = ref_problem(f"handoff/{ticket}")
    if problem:
        raise UsageError(f"invalid ticket id {ticket!r}: git refuses the branch "
                         f"'handoff/{ticket}': {problem}", hint)
    return ticket


def state_home() -> Path:
    """$HANDOFF_HOME, else the XDG state dir (handoff.record.home)."""
    return Path(state_home_path())


def repo_key(common_dir: Path, main: Path) -> str:
    """A readable, collision-free directory name for a repository: its main checkout's name
    and a hash of its shared git dir, so all its worktrees map to the same key."""
    digest = hashlib.sha1(str(common_dir.resolve()).encode()).hexdigest()[:10]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", main.name) or "repo"
    return f"{name}-{digest}"


#: the state tree is the user's alone: it holds plans, findings, answers and pane transcripts
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600


def keep_private() -> None:
    """From here on this process and its children (the tmux server, the peers, git) create
    files for the user alone, whatever the umask they were started with.

    Process-wide on purpose: besides handoff's own writes, the state tree holds files that
    other programs write into it (a peer's draft report, its CLI's hook signals, tmux's
    config), and a umask is the one setting they all inherit. A stricter umask is kept.
    """
    old = os.umask(0o077)
    os.umask(old | 0o077)


def private_dir(path: Path) -> Path:
    """mkdir -p path: what it creates is 700, and path itself is made 700 (handoff's own)."""
    missing = []
    folder = path
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            if not folder.is_dir():
                raise
        except OSError as exc:
            raise write_failed(folder, exc) from None
    try:
        if path.stat().st_mode & 0o777 != PRIVATE_DIR:
            path.chmod(PRIVATE_DIR)
    except OSError as exc:
        raise write_failed(path, exc) from None
    return path


def write_failed(path: Path, exc: OSError) -> ExternalFailure:
    """One clear message for a state file that could not be written: the disk is full, the
    folder read-only or not ours. What was there before is left as it was."""
    reason = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = (f"free space on the file system that holds {path.parent} (handoff's state, "
                "$HANDOFF_HOME), then 'handoff resume' the ticket: nothing was half written")
    elif exc.errno == errno.EROFS:
        hint = f"{path.parent} is on a read-only file system: point $HANDOFF_HOME elsewhere"
    else:
        hint = f"check that {path.parent} exists and is yours to write"
    return ExternalFailure(f"cannot write {path}: {reason}", hint)


def atomic_write(path: Path, text: str, durable: bool = True) -> None:
    """Write text so readers see the old file or the whole new one, never a torn one; the file
    is 600 and folders it creates 700. An OSError (a full disk) becomes a clear error and
    leaves the old file as it was. durable: on disk before it replaces the old file (fsync),
    so a power cut leaves one or the other; without it a power cut may leave an empty file
    (a second copy of a durable one, state.json.bak, needs no more)."""
    atomic_write_bytes(path, text.encode("utf-8"), PRIVATE_FILE, durable)


def atomic_write_bytes(path: Path, data: bytes, mode: int = PRIVATE_FILE,
                       durable: bool = True) -> None:
    """`atomic_write` of bytes, the file with mode. A link at path is replaced, never
    followed: the new file is renamed over it."""
    if not path.parent.is_dir():
        private_dir(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise write_failed(path, exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise write_failed(path, exc) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def digest(text: str) -> str:
    """sha256 of text as UTF-8: how handoff knows a file is still what it wrote or judged."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    """digest of a file's text; '' when it is missing or unreadable."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
