"""Ending processes of our own: a process group (TERM, a grace to go, then KILL), or the
handoff process that holds a lock.

A group is ended only when the caller has proved it ours (its own unreaped child, or a recorded
identity: handoff.processes); a lock's holder only when its command line is handoff's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from handoff.errors import UsageError
from handoff.processes import command, group_alive
from handoff.record.lock import holder

#: how long a group has to go after TERM before it gets KILL
GRACE = 5.0


def end_group(pgid: int, grace: float = GRACE) -> str:
    """TERM the group, KILL what is left after grace; the last signal sent ('' when the group
    was already gone)."""
    sent = ""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if not group_alive(pgid):
            return sent
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return sent
        except PermissionError:  # not ours after all: never pursue it
            return sent
        sent = signal.Signals(signum).name
        deadline = time.monotonic() + grace
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
    return sent


def end_lock_holder(lock: Path, what: str, timeout: float) -> int | None:
    """SIGTERM the live handoff process holding lock, wait up to timeout for the lock to be
    free, then KILL it; its pid (None: nobody held it). what names the lock in the refusal."""
    pid = holder(lock)
    if pid is None or pid <= 0:
        return None
    if not any("handoff" in part for part in command(pid)):  # never whatever reused a pid
        raise UsageError(f"{what} names pid {pid}, which is not a handoff process; refusing "
                         "to signal it")
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while holder(lock) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if holder(lock) is not None:
        _signal(pid, signal.SIGKILL)
    return pid


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended by itself meanwhile
        os.kill(pid, signum)
