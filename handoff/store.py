"""Where handoff keeps its state, and how it writes files so a crash never leaves half of one."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from handoff.errors import UsageError

TICKET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def validate_ticket_id(ticket: str) -> str:
    """Return the id unchanged, or refuse it before anything is created from it."""
    if not TICKET_ID.fullmatch(ticket) or ".." in ticket:
        raise UsageError(
            f"invalid ticket id {ticket!r}",
            "use 1–64 characters: letters, digits, '.', '_' or '-', starting with a letter "
            "or digit (no '..', no '/'), e.g. PROJ-123",
        )
    return ticket


def state_home() -> Path:
    """$HANDOFF_HOME, else the XDG state dir: never inside a repo, never under /tmp by default."""
    explicit = os.environ.get("HANDOFF_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(xdg):  # the XDG spec: relative values are invalid and ignored
        xdg = str(Path.home() / ".local" / "state")
    return (Path(xdg) / "handoff").resolve()


def repo_key(common_dir: Path, main: Path) -> str:
    """A readable, collision-free directory name for a repository: its main checkout's name
    and a hash of its shared git dir, so all its worktrees map to the same key."""
    digest = hashlib.sha1(str(common_dir.resolve()).encode()).hexdigest()[:10]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", main.name) or "repo"
    return f"{name}-{digest}"


def atomic_write(path: Path, text: str) -> None:
    """Write text so readers see the old file or the whole new one, never a torn one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
