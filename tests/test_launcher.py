"""handoff.machinery.launcher.yield_cpu on real processes: what it weighs down, and what not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from handoff.machinery.launcher import yield_cpu


def _nice_and_group(pid: int) -> tuple[int, str]:
    """A process's niceness and its session's scheduling group's (autogroup) niceness."""
    group = Path(f"/proc/{pid}/autogroup").read_text(encoding="ascii").split()[-1]
    return os.getpriority(os.PRIO_PROCESS, pid), group


def test_another_process_is_weighed_down_only_when_it_leads_its_own_session() -> None:
    # a tmux pane's program just forked may not have left its parent's session yet: weighing
    # down its group then would weigh down the tmux server's (here: this test's own)
    leader = subprocess.Popen(["sleep", "300"], start_new_session=True)
    follower = subprocess.Popen(["sleep", "300"])
    try:
        ours = _nice_and_group(os.getpid())
        yield_cpu(6, follower.pid)
        assert _nice_and_group(follower.pid) == ours
        assert _nice_and_group(os.getpid()) == ours
        yield_cpu(6, leader.pid)
        assert _nice_and_group(leader.pid) == (6, "6")
        assert _nice_and_group(os.getpid()) == ours
        leader.kill()
        leader.wait()
        yield_cpu(6, leader.pid)  # gone: nothing happens, nothing raises
        assert _nice_and_group(os.getpid()) == ours
    finally:
        for child in (leader, follower):
            child.kill()
            child.wait()
