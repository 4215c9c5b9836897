"""What the peers spent: tokens (and cost, only when the CLI itself records one), read from the
session files the coding CLIs keep for themselves.

Claude Code writes `~/.claude/projects/<worktree, every other character a dash>/<session>.jsonl`
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
import math
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from handoff.inputs import MIB

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
#: no count read from a file is believed above this (junk must not make totals absurd)
MAX_COUNT = 10**13

COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass(frozen=True)
class Usage:
    """Tokens of one session, round or ticket. input_tokens: input read at full price (cache
    reads and writes apart); tokens: all of them together, what a `budget: {tokens}` counts."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: dollars as the CLI itself computed them; None when it records no cost
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + \
            self.cache_write_tokens

    def plus(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None and other.cost_usd is None else \
            (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return _usage((getattr(self, k) + getattr(other, k) for k in COUNTS), cost)

    def since(self, before: Usage | None) -> Usage:
        """What was spent after before (an earlier reading of the same session)."""
        if before is None:
            return self
        cost = None if self.cost_usd is None else \
            max(self.cost_usd - (before.cost_usd or 0.0), 0.0)
        return _usage((max(getattr(self, k) - getattr(before, k), 0) for k in COUNTS), cost)

    def fields(self) -> dict[str, Any]:
        """For an event: the counts, their sum, and cost_usd only when the CLI recorded one."""
        out: dict[str, Any] = {k: getattr(self, k) for k in COUNTS}
        out["tokens"] = self.tokens
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 6)
        return out

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Usage:
        """From an event's fields (or a session's), whatever junk they hold."""
        return _usage((_count(data.get(k)) for k in COUNTS), _cost(data.get("cost_usd")))


def _usage(counts: Iterable[int], cost: float | None) -> Usage:
    """A Usage from its counts in the order of COUNTS."""
    values = dict(zip(COUNTS, counts, strict=True))
    return Usage(input_tokens=values["input_tokens"], output_tokens=values["output_tokens"],
                 cache_read_tokens=values["cache_read_tokens"],
                 cache_write_tokens=values["cache_write_tokens"], cost_usd=cost)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return min(value, MAX_COUNT)


def _cost(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
        return None
    return float(value)


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
            cost = None if record.get("hasUnknownModelCost") else _cost(record.get("totalCostUSD"))
            continue
        message = record.get("message")
        if kind != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        key = message.get("id") or record.get("uuid") or number
        messages[str(key)] = Usage(
            input_tokens=_count(usage.get("input_tokens")),
            output_tokens=_count(usage.get("output_tokens")),
            cache_read_tokens=_count(usage.get("cache_read_input_tokens")),
            cache_write_tokens=_count(usage.get("cache_creation_input_tokens")))
    if not messages and not seen_cost:
        return None
    total = Usage()
    for one in messages.values():
        total = total.plus(one)
    return _usage((getattr(total, k) for k in COUNTS), cost)


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
    cached = _count(last.get("cached_input_tokens"))
    written = _count(last.get("cache_write_input_tokens"))
    return Usage(input_tokens=max(_count(last.get("input_tokens")) - cached - written, 0),
                 output_tokens=_count(last.get("output_tokens")),
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
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    folder = re.sub(r"[^A-Za-z0-9]", "-", str(worktree))
    return _recent(home / ".claude" / "projects" / folder, r"[^/]+\.jsonl", since)


def codex_sessions(worktree: Path, since: float, env: Mapping[str, str]) -> list[Path]:
    """Every Codex rollout written since then whose session ran in worktree. Its dated folders
    follow the local clock; a day either side covers a time zone's edge."""
    from handoff.providers.codex import codex_home

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


# ---- a round's usage, from the sessions and the earlier usage events ----------------------

def first_launch(events: Iterable[Mapping[str, Any]], role: str) -> float | None:
    """When the role's peer was first launched in this ticket (epoch seconds)."""
    for event in events:
        if event.get("kind") == "launch" and event.get("role") == role:
            try:
                return datetime.fromisoformat(str(event.get("time"))).timestamp()
            except (ValueError, OverflowError, OSError):  # a torn or hand-edited event
                return None
    return None


def keeps_usage(provider: str) -> bool:
    """The provider's CLI records what it spends where handoff can read it."""
    return provider in READERS


def measure(provider: str, role: str, worktree: Path, events: Sequence[Mapping[str, Any]],
            env: Mapping[str, str]) -> dict[str, Any] | None:
    """The fields of a `usage` event for the role's round just reported: what each of its
    sessions spent since an earlier usage event last read it. Each session's running total is
    kept in `sessions` so the next round (or a resumed orchestrator reading the same round
    again) counts only what came after. None: nothing was read, or nothing was spent."""
    reader = READERS.get(provider)
    since = first_launch(events, role)
    if reader is None or since is None:
        return None
    known: dict[str, Mapping[str, Any]] = {}
    for event in events:
        if event.get("kind") == "usage" and event.get("role") == role:
            for session in event.get("sessions") or []:
                if isinstance(session, dict) and isinstance(session.get("file"), str):
                    known[session["file"]] = session
    spent: Usage | None = None
    sessions: list[dict[str, Any]] = []
    for path in reader.sessions(worktree, since, env):
        before = known.get(str(path))
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if before is not None and before.get("bytes") == size:
            continue  # nothing written since it was read
        now = reader.read(path)
        if now is None:
            continue
        delta = now.since(Usage.of(before) if before is not None else None)
        if not delta.tokens and (delta.cost_usd or 0.0) == 0.0:
            continue
        spent = delta if spent is None else spent.plus(delta)
        sessions.append({"file": str(path), "bytes": size, **now.fields()})
    if spent is None:
        return None
    return {**spent.fields(), "provider": provider, "source": sessions[-1]["file"],
            "sessions": sessions}


# ---- totals for status, the final report and the budget -----------------------------------

def usage_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("kind") == "usage"]


def totals(events: Iterable[Mapping[str, Any]]) -> Usage | None:
    """The ticket's total over its usage events; None when none was recorded. Its cost is
    what the CLIs recorded so far (None: none did)."""
    found = usage_events(events)
    if not found:
        return None
    total = Usage()
    for event in found:
        total = total.plus(Usage.of(event))
    return total


def status_fields(total: Usage) -> dict[str, Any]:
    """The `usage` object of `handoff status --json` (docs/cli.md)."""
    return {**{k: getattr(total, k) for k in COUNTS}, "tokens": total.tokens,
            "cost_usd": None if total.cost_usd is None else round(total.cost_usd, 6)}


def per_round(events: Iterable[Mapping[str, Any]]) -> list[tuple[int, str, Usage]]:
    """(round, role, usage) in order of round, implementer before reviewer."""
    rows: dict[tuple[int, str], Usage] = {}
    for event in usage_events(events):
        n = event.get("round")
        key = (n if isinstance(n, int) and not isinstance(n, bool) else 0,
               str(event.get("role", "")))
        rows[key] = rows[key].plus(Usage.of(event)) if key in rows else Usage.of(event)
    order = {"implementer": 0, "reviewer": 1}
    return [(n, role, rows[(n, role)])
            for n, role in sorted(rows, key=lambda k: (k[0], order.get(k[1], 2), k[1]))]


def over_budget(events: Sequence[Mapping[str, Any]], tokens: int | None,
                cost_usd: float | None) -> dict[str, Any] | None:
    """The fields of a `budget` event when the ticket's total is past its budget and no person
    has been asked about this budget yet (an answer carries the ticket on; a raised budget is
    watched afresh); else None."""
    if tokens is None and cost_usd is None:
        return None
    limit = {k: v for k, v in (("tokens", tokens), ("cost_usd", cost_usd)) if v is not None}
    if any(e.get("kind") == "budget" and e.get("budget") == limit for e in events):
        return None
    spent = totals(events)
    if spent is None:
        return None
    if tokens is not None and spent.tokens > tokens:
        return {"budget": limit, "over": "tokens", "total": spent.tokens, "limit": tokens}
    if cost_usd is not None and spent.cost_usd is not None and spent.cost_usd > cost_usd:
        return {"budget": limit, "over": "cost_usd", "total": round(spent.cost_usd, 6),
                "limit": cost_usd}
    return None


def tokens_text(n: int) -> str:
    return f"{n:,}"


def cost_text(cost: float | None) -> str:
    if cost is None:
        return ""
    return f"${cost:.4f}" if cost < 0.01 else f"${cost:.2f}"


def usage_line(fields: Mapping[str, Any]) -> str:
    """`handoff status`'s line for a ticket's totals (Totals.fields)."""
    text = short(Usage.of(fields))
    if fields.get("cost_usd") is not None:
        text += " recorded by the CLIs so far"
    return text


def short(usage: Usage) -> str:
    """One line: total tokens, how they split, the cost when known."""
    text = (f"{tokens_text(usage.tokens)} tokens (in {tokens_text(usage.input_tokens)}, out "
            f"{tokens_text(usage.output_tokens)}, cache read "
            f"{tokens_text(usage.cache_read_tokens)}, cache write "
            f"{tokens_text(usage.cache_write_tokens)})")
    return text + (f", {cost_text(usage.cost_usd)}" if usage.cost_usd is not None else "")
