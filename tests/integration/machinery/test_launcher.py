"""handoff.machinery.launcher.yield_cpu on real processes: what it weighs down, and what not."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from handoff.machinery.launcher import yield_cpu


def _nice_and_group(pid: int) -> tuple[int, str]:
    """A process's niceness and its session's scheduling group's (autogroup) niceness; the
    group is "" for a process still in the boot-time group (no setsid since boot: a CI runner's
    pytest can be one), which /proc shows as an empty file and whose weight cannot be set."""
    shown = Path(f"/proc/{pid}/autogroup").read_text(encoding="ascii").split()
    return os.getpriority(os.PRIO_PROCESS, pid), shown[-1] if shown else ""


def test_another_process_is_weighed_down_only_when_it_leads_its_own_session() -> None:
    # a tmux pane's program just forked may not have left its parent's session yet: weighing
    # down its group then would weigh down the tmux server's. Here the "server" is a session
    # leader of the test's own making (its group is then its own, whatever the runner's is),
    # and its child, still in its session, stands for the pane's program.
    leader = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], start_new_session=True,
                              stdout=subprocess.PIPE, text=True)
    assert leader.stdout is not None
    follower = int(leader.stdout.readline())
    try:
        ours = _nice_and_group(os.getpid())
        assert os.getsid(follower) == leader.pid != follower
        assert _nice_and_group(leader.pid) == (0, "0") == _nice_and_group(follower)
        yield_cpu(6, follower)
        assert _nice_and_group(follower) == (0, "0")
        assert _nice_and_group(leader.pid) == (0, "0")
        yield_cpu(6, leader.pid)
        assert _nice_and_group(leader.pid) == (6, "6") == _nice_and_group(follower)
        assert _nice_and_group(os.getpid()) == ours
        leader.kill()
        leader.wait()
        yield_cpu(6, leader.pid)  # gone: nothing happens, nothing raises
        assert _nice_and_group(os.getpid()) == ours
    finally:
        leader.kill()
        leader.wait()
        with contextlib.suppress(ProcessLookupError):  # orphaned when its shell was killed
            os.kill(follower, signal.SIGKILL)
        assert leader.stdout is not None
        leader.stdout.close()
