"""The suite's own isolation: what a test started on its tmux socket ends with it."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

from tests.conftest import end_servers_of, wait_until


def test_a_server_whose_socket_file_went_is_still_ended(tmp_path: Path) -> None:
    """kill-server cannot reach a server whose socket file was removed; the teardown finds it
    by its command line."""
    socket = f"handoff-test-orphan-{uuid.uuid4().hex[:8]}"
    folder = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}"
    tmux = shutil.which("tmux")
    assert tmux is not None
    subprocess.run([tmux, "-L", socket, "-f", "/dev/null", "new-session", "-d", "sleep 600"],
                   check=True, timeout=15, env={**os.environ, "TMUX": ""})
    listed = subprocess.run([tmux, "-L", socket, "display-message", "-p", "#{pid}"],
                            capture_output=True, text=True, check=True, timeout=15)
    server = int(listed.stdout.strip())
    (folder / socket).unlink()  # now only its pid reaches it

    end_servers_of(socket)

    def gone() -> bool:
        try:
            state = Path(f"/proc/{server}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        return state == "Z"
    wait_until(gone, 10, "the orphaned server to end")
