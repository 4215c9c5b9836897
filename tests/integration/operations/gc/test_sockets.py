"""handoff.operations.gc.sockets: the socket files of handoff's tmux servers that nothing
listens on any more go, under tmux's own start lock; a live one stays."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.conftest import wait_until
from tests.harness import (
    handoff,
    tmux_alive,
)
from tests.integration.operations.gc.test_gc import (
    gc,
    listed,
)


def test_a_stale_socket_goes_a_live_one_stays(repo: Path, handoff_home: Path,
                                              socket: str) -> None:
    path = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / socket
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "x", "sleep", "600"],
                   check=True, timeout=15)
    assert [i for i in gc(cwd=repo) if i["kind"] == "socket"] == [], "a live server stays"
    server = int(subprocess.run(["tmux", "-L", socket, "display-message", "-p", "#{pid}"],
                                capture_output=True, text=True, check=True,
                                timeout=15).stdout)
    os.kill(server, signal.SIGKILL)
    wait_until(lambda: not tmux_alive(socket), what="the tmux server to die")
    assert path.exists()

    assert listed(gc("--dry-run", cwd=repo)) == {("socket", str(path))}
    assert path.exists()
    done = handoff("gc", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"removed      socket {path}: no tmux server answers on it" in done.stdout
    assert done.stdout.strip().endswith("gc: removed 1, kept 0")
    assert not path.exists() and not path.with_name(f"{socket}.lock").exists()
