"""The append-only audit trail of a ticket: one JSON object per line, never rewritten."""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class EventLog:
    path: Path

    def append(self, kind: str, *, round: int = 0, role: str = "", **fields: Any) -> dict[str, Any]:
        """Append one event as one write() under a lock, so concurrent writers never interleave."""
        event: dict[str, Any] = {"time": now(), "kind": kind, "round": round, "role": role}
        event.update(fields)
        line = (json.dumps(event, sort_keys=False, default=str) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by close; makes the torn-line check exact
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line  # a crash left a torn line: never glue onto it
            os.write(fd, line)
        finally:
            os.close(fd)
        return event

    def read(self) -> tuple[list[dict[str, Any]], list[int]]:
        """All events, and the line numbers that were torn or corrupt (skipped, not fatal)."""
        events: list[dict[str, Any]] = []
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
