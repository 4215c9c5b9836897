"""handoff.operations.gc.sessions: a tmux session on handoff's sockets goes when its ticket is
closed or its ticket directory is gone; one no record names goes only when its panes say it is
this HANDOFF_HOME's, and what a kept session's panes work in is kept too. Real tmux."""

from __future__ import annotations

import subprocess
from pathlib import Path

from handoff.machinery.tmux import socket_name
from handoff.operations.gc.sessions import handoff_sockets
from tests.conftest import wait_until
from tests.unit.operations.gc.test_found import saved


def session(socket: str, name: str, cwd: Path, *options: str) -> None:
    """A session of one sleeping pane in cwd (options: new-session's, e.g. -e VAR=value)."""
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", name, "-c", str(cwd),
                    *options, "sleep", "600"], check=True, timeout=15)

    def there() -> bool:  # the pane's process has entered cwd (a fork of the server before)
        shown = subprocess.run(["tmux", "-L", socket, "display-message", "-p", "-t",
                                f"={name}:", "#{pane_current_command} #{pane_current_path}"],
                               capture_output=True, text=True, timeout=15).stdout.strip()
        return shown == f"sleep {cwd.resolve()}"

    wait_until(there, what=f"session {name}'s pane to run in {cwd}")


def test_the_sockets_looked_at_are_the_one_in_use_and_those_records_name(
        handoff_home: Path) -> None:
    records = [saved(handoff_home, "T-5", socket="handoff-b"),
               saved(handoff_home, "T-6", socket="handoff-a"),
               saved(handoff_home, "T-7", socket="handoff-b")]
    assert handoff_sockets(records) == sorted({socket_name(), "handoff-a", "handoff-b"})
    assert handoff_sockets([]) == [socket_name()]
