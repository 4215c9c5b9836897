"""Reading the session files the coding CLIs keep for themselves, bounded: each provider says
where its CLI keeps them and what they hold (`Provider.sessions`, `Provider.usage`); this is
the reading they share. Tokens, and cost only when the CLI itself records one.

Claude Code writes `~/.claude/projects/<worktree, every other character a dash>/<session>.jsonl`
(`$CLAUDE_CONFIG_DIR/projects/…` for a second account)
(`message.usage` on each assistant entry, a `cost-state` entry with `totalCostUSD`). Codex
writes `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl` (`token_count` events whose
`info.total_token_usage` is the session's running total; its first line, `session_meta`, names
the folder it runs in). Each role works in its own worktree, so every session file of that
folder written since the role's first launch is the ticket's.

A peer could write anything into these files, and the CLI may not have written them at all:
what cannot be read (missing, too large, not a regular file, not JSON) gives no usage, never
an error. Reads are bounded in bytes. The CLI's state folder is the peer's to write, so every
path is taken beneath it (`root`) through handoff.record.peerfiles: a link anywhere below it,
a folder or the file itself, is not followed; a FIFO never holds the reader.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from handoff.inputs import MIB
from handoff.record import peerfiles

#: a session file holds whole API requests; a long session is tens of MB
FILE_LIMIT = 256 * MIB
#: one line of it (a request blob, a large file written by a tool)
LINE_LIMIT = 16 * MIB
#: Codex's first line (`session_meta`) carries its base instructions
HEAD_LIMIT = 1 * MIB
#: session files looked at per folder, and days of Codex's dated folders
MAX_FILES = 2000
MAX_DAYS = 40
#: file times may lag the clock that stamped the launch event a little
SLACK = 5.0


# ---- reading one session file -------------------------------------------------------------

def root_above(path: Path, levels: int) -> Path:
    """The folder levels above the one path is in: the CLI's state folder of a session file
    found at that depth in it (each CLI's layout says how deep), or / for a shorter path."""
    parents = path.parents
    return parents[min(levels, len(parents) - 1)]


def _open_regular(root: Path, path: Path) -> int | None:
    """A descriptor on path when it is a regular file beneath root, reached without following
    a link; never blocks (a FIFO planted there)."""
    try:
        return peerfiles.open_file(root, path)
    except peerfiles.Refused:
        return None


def records(path: Path, markers: tuple[bytes, ...], *,
            root: Path) -> list[dict[str, object]] | None:
    """The JSON objects of the lines of path (beneath root, the CLI's state folder) that hold
    one of markers; None when the file cannot be read whole within FILE_LIMIT. Lines that are
    not JSON objects (a torn last line while the CLI writes, junk) are passed over; so are
    lines longer than LINE_LIMIT."""
    fd = _open_regular(root, path)
    if fd is None:
        return None
    try:
        return _read_records(fd, markers)
    except OSError:  # an I/O error, a file cut short under us: no usage, no error
        return None


def _read_records(fd: int, markers: tuple[bytes, ...]) -> list[dict[str, object]] | None:
    found: list[dict[str, object]] = []
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > FILE_LIMIT:
            return None
        budget = FILE_LIMIT
        while True:
            line = handle.readline(min(LINE_LIMIT, budget) + 1)
            if not line:
                return found
            budget -= len(line)
            if budget < 0:
                return None  # it grew past the limit while being read
            if not line.endswith(b"\n") and len(line) > LINE_LIMIT:
                budget = _skip_line(handle, budget)
                if budget < 0:
                    return None
                continue
            if not any(marker in line for marker in markers):
                continue
            try:
                item = json.loads(line)
            except ValueError:
                continue
            if isinstance(item, dict):
                found.append(item)


def _skip_line(handle: Any, budget: int) -> int:
    """Read to the end of an overlong line; what is left of the budget (< 0: over it)."""
    while budget >= 0:
        chunk = handle.readline(MIB)
        budget -= len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            break
    return budget


def head(path: Path, *, root: Path) -> dict[str, object] | None:
    """The first line of path (beneath root) as a JSON object, read within HEAD_LIMIT."""
    fd = _open_regular(root, path)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            line = handle.readline(HEAD_LIMIT + 1)
    except OSError:
        return None
    if len(line) > HEAD_LIMIT:
        return None
    try:
        item = json.loads(line)
    except ValueError:
        return None
    return item if isinstance(item, dict) else None


# ---- finding a role's session files -------------------------------------------------------

def recent(folder: Path, pattern: str, since: float, *, root: Path) -> list[Path]:
    """Files in folder (root, the CLI's state folder, or beneath it) matching pattern, written
    at or after since, oldest first (bounded): regular files only, reached without following a
    link."""
    try:
        entries = peerfiles.files(root, folder, MAX_FILES)
    except peerfiles.Refused:
        return []
    found = [(entry.stat.st_mtime, entry.path) for entry in entries
             if re.fullmatch(pattern, entry.name) and entry.stat.st_mtime >= since - SLACK]
    return [path for _, path in sorted(found)]


def resolved(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError, ValueError):
        return path
