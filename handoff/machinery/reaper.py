"""Ending what a peer left running when its pane is gone.

Killing a pane ends its process group, but not everything a coding CLI started: Gemini CLI's
node processes ignore the pane's SIGHUP, and a command Codex was running sits in a session of
its own. Every peer is launched with HANDOFF_PEER=<ticket dir>#<role> in its environment, which
its children inherit; the reaper finds the processes that carry it (and only those: never the
orchestrator, the gate, or anything of the user's) and ends them, TERM first, then KILL.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from handoff.processes import carrying

MARKER = "HANDOFF_PEER"


def marker(ticket_dir: Path, role: str) -> str:
    return f"{ticket_dir}#{role}"


def marked(value: str) -> list[int]:
    """Live processes whose HANDOFF_PEER is value, or starts with it when value ends in '#'
    (every role of a ticket)."""
    if value.endswith("#"):
        return carrying(MARKER, lambda mark: mark.startswith(value))
    return carrying(MARKER, lambda mark: mark == value)


def reap(value: str, grace: float = 3.0) -> list[int]:
    """End every process marked with value (see marked); returns the pids that were found."""
    pids = marked(value)
    if not pids:
        return []
    for pid in pids:
        _send(pid, signal.SIGTERM)
    if not _gone(value, grace):
        for pid in marked(value):
            _send(pid, signal.SIGKILL)
        _gone(value, 2.0)  # a KILL takes effect at once, but not before this returns
    return pids


def _gone(value: str, wait: float) -> bool:
    deadline = time.monotonic() + wait
    while marked(value):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _send(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)
