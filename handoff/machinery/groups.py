"""Ending a process group of our own: TERM, a grace to go, then KILL.

A group is ended only when the caller has proved it ours (its own unreaped child, or a recorded
identity: handoff.processes).
"""

from __future__ import annotations

import os
import signal
import time

from handoff.processes import group_alive

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
