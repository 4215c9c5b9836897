"""The append-only audit trail of a ticket: one JSON object per line, never rewritten."""

from __future__ import annotations

import errno
import fcntl
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from handoff import trace
from handoff.record.store import PRIVATE_FILE, private_dir, write_failed

#: every kind of event handoff writes, each named once (docs/protocol.md says what each holds)
EventKind = Literal[
    "answer", "answer-passed-on", "branch", "brief", "budget", "config", "created", "death",
    "delivery-failed", "dialog", "error", "escalate", "evidence", "failover", "final-report",
    "finish", "forgery", "gate",
    "intake", "launch", "left", "merge-check", "more-rounds", "notified", "notify-failed",
    "nudge", "onto", "orchestrator", "peer",
    "phase", "plan-approved", "proof", "plan-changed", "plan-drafted", "plan-edited", "protected",
    "protected-allowed", "pushed",
    "recycle", "unrequested",
    "replaced", "reviews", "scanner", "screen-unrecognised", "session", "starting", "state-restored",
    "stopped", "submission", "submitted", "tampered", "tmux", "usage", "verdict", "verdict-kept",
    "voided", "waiting",
    "watch", "weakened",
    "worktree", "worktrees",
]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class EventLog:
    path: Path

    def append(self, kind: EventKind, *, round: int = 0, role: str = "",
               **fields: object) -> dict[str, object]:
        """Append one event as one write() under a lock, so concurrent writers never interleave.

        A write that fails (a full disk) or is cut short is undone before the error is raised:
        the log keeps whole lines only. The file is the user's alone (600).
        """
        event: dict[str, object] = {"time": now(), "kind": kind, "round": round, "role": role}
        event.update(fields)
        trace.event(event)
        line = (json.dumps(event, sort_keys=False, default=str) + "\n").encode()
        if not self.path.parent.is_dir():
            private_dir(self.path.parent)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        except OSError as exc:
            raise write_failed(self.path, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by close; makes the torn-line check exact
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a crash left a torn line: never glue onto it
            _write_whole(fd, line, size)
        except OSError as exc:
            raise write_failed(self.path, exc) from None
        finally:
            os.close(fd)
        return event

    def read(self) -> tuple[list[dict[str, object]], list[int]]:
        """All events, and the line numbers that were torn or corrupt (skipped, not fatal)."""
        events: list[dict[str, object]] = []
        bad: list[int] = []
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return events, bad
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                bad.append(number)
                continue
            if isinstance(item, dict):
                events.append(item)
            else:
                bad.append(number)
        return events, bad


def _write_whole(fd: int, data: bytes, size: int) -> None:
    """Write data at the end of the file, or leave the file at size and raise."""
    try:
        written = os.write(fd, data)
    except OSError:
        os.ftruncate(fd, size)
        raise
    if written != len(data):
        os.ftruncate(fd, size)
        raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (only {written} of {len(data)} "
                      "bytes could be written)")
