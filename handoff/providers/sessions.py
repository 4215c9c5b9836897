"""The session files the coding CLIs keep for themselves, read for what each session spent:
tokens, and cost only when the CLI itself records one.

Claude Code writes `~/.claude/projects/<worktree, every other character a dash>/<session>.jsonl`
(`$CLAUDE_CONFIG_DIR/projects/…` for a second account)
(`message.usage` on each assistant entry, a `cost-state` entry with `totalCostUSD`). Codex
writes `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl` (`token_count` events whose
`info.total_token_usage` is the session's running total; its first line, `session_meta`, names
the folder it runs in). Each role works in its own worktree, so every session file of that
folder written since the role's first launch is the ticket's.

A peer could write anything into these files, and the CLI may not have written them at all:
what cannot be read (missing, too large, not a regular file, not JSON) gives no usage, never
an error. Reads are bounded in bytes.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from handoff.inputs import MIB
from handoff.providers.claude import session_folder
from handoff.providers.codex import codex_home
from handoff.record.usage import Usage, cost_of, count_of

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

def _open_regular(path: Path) -> int | None:
    """A descriptor on path when it is a regular file; never blocks (a FIFO planted there)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _records(path: Path, markers: tuple[bytes, ...]) -> list[dict[str, Any]] | None:
    """The JSON objects of the lines of path that hold one of markers; None when the file
    cannot be read whole within FILE_LIMIT. Lines that are not JSON objects (a torn last line
    while the CLI writes, junk) are passed over; so are lines longer than LINE_LIMIT."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        return _read_records(fd, markers)
    except OSError:  # an I/O error, a file cut short under us: no usage, no error
        return None


def _read_records(fd: int, markers: tuple[bytes, ...]) -> list[dict[str, Any]] | None:
    found: list[dict[str, Any]] = []
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


def _head(path: Path) -> dict[str, Any] | None:
    """The first line of path as a JSON object, read within HEAD_LIMIT."""
    fd = _open_regular(path)
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


def read_claude(path: Path) -> Usage | None:
    """A Claude Code session's usage: each assistant message counted once (the CLI writes one
    entry per content block, all with the message's usage), and the cost from its last
    `cost-state` entry unless it says a model's price is unknown."""
    records = _records(path, (b'"usage"', b'"cost-state"'))
    if records is None:
        return None
    messages: dict[str, Usage] = {}
    cost: float | None = None
    seen_cost = False
    for number, record in enumerate(records):
        kind = record.get("type")
        if kind == "cost-state":
            seen_cost = True
            cost = None if record.get("hasUnknownModelCost") else cost_of(record.get("totalCostUSD"))
            continue
        message = record.get("message")
        if kind != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        key = message.get("id") or record.get("uuid") or number
        messages[str(key)] = Usage(
            input_tokens=count_of(usage.get("input_tokens")),
            output_tokens=count_of(usage.get("output_tokens")),
            cache_read_tokens=count_of(usage.get("cache_read_input_tokens")),
            cache_write_tokens=count_of(usage.get("cache_creation_input_tokens")))
    if not messages and not seen_cost:
        return None
    total = Usage()
    for one in messages.values():
        total = total.plus(one)
    return replace(total, cost_usd=cost)


def read_codex(path: Path) -> Usage | None:
    """A Codex session's usage: its last `token_count` event's running total. Codex counts
    cached input inside input_tokens; here input_tokens is the uncached rest. It records no
    cost."""
    records = _records(path, (b'"token_count"',))
    if records is None:
        return None
    last: dict[str, Any] | None = None
    for record in records:
        payload = record.get("payload")
        if not isinstance(payload, dict) or payload.get("type") != "token_count":
            continue
        info = payload.get("info")
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if isinstance(total, dict):
            last = total
    if last is None:
        return None
    cached = count_of(last.get("cached_input_tokens"))
    written = count_of(last.get("cache_write_input_tokens"))
    return Usage(input_tokens=max(count_of(last.get("input_tokens")) - cached - written, 0),
                 output_tokens=count_of(last.get("output_tokens")),
                 cache_read_tokens=cached, cache_write_tokens=written)


# ---- finding a role's session files -------------------------------------------------------

def _recent(folder: Path, pattern: str, since: float) -> list[Path]:
    """Files in folder matching pattern, written at or after since, oldest first (bounded)."""
    found: list[tuple[float, Path]] = []
    try:
        entries = os.scandir(folder)
    except OSError:
        return []
    with entries:
        for count, entry in enumerate(entries):
            if count >= MAX_FILES:
                break
            if not re.fullmatch(pattern, entry.name):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_mtime >= since - SLACK:
                found.append((info.st_mtime, Path(entry.path)))
    return [path for _, path in sorted(found)]


def claude_sessions(worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
    """Every Claude Code session started in worktree and written since then."""
    return _recent(session_folder(env, worktree), r"[^/]+\.jsonl", since)


def codex_sessions(worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
    """Every Codex rollout written since then whose session ran in worktree. Its dated folders
    follow the local clock; a day either side covers a time zone's edge."""
    root = codex_home(dict(env)) / "sessions"
    try:
        first = date.fromtimestamp(since) - timedelta(days=1)
        last = date.fromtimestamp(time.time()) + timedelta(days=1)
    except (OverflowError, ValueError, OSError):  # a launch time no clock can show
        return []
    days = min((last - first).days + 1, MAX_DAYS)
    wanted = {str(worktree), _resolved(str(worktree))}
    found: list[Path] = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        folder = root / f"{day.year:04d}" / f"{day.month:02d}" / f"{day.day:02d}"
        for path in _recent(folder, r"rollout-[^/]+\.jsonl", since):
            head = _head(path)
            payload = head.get("payload") if head else None
            cwd = payload.get("cwd") if isinstance(payload, dict) else None
            if isinstance(cwd, str) and (cwd in wanted or _resolved(cwd) in wanted):
                found.append(path)
    return found


def _resolved(path: str) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError, ValueError):
        return path


@dataclass(frozen=True)
class Reader:
    """How one CLI's sessions are found and read."""

    sessions: Callable[[Path, float, Mapping[str, str]], list[Path]]
    read: Callable[[Path], Usage | None]


#: the CLIs whose usage handoff reads; the others (and the scripted agent) record none
READERS: dict[str, Reader] = {
    "claude": Reader(claude_sessions, read_claude),
    "codex": Reader(codex_sessions, read_codex),
}


def keeps_usage(provider: str) -> bool:
    """The provider's CLI records what it spends where handoff can read it."""
    return provider in READERS
