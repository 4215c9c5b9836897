"""handoff/__main__.py: `python -m handoff` is the `handoff` command (the peers' briefs and the
tests run it so)."""

from __future__ import annotations

import subprocess
import sys

from handoff import build


def test_python_dash_m_handoff_runs_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "handoff", "--version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert build.version() in done.stdout


def test_its_exit_status_is_the_commands() -> None:
    """An unknown command is a usage error (2), not a traceback and not 0."""
    done = subprocess.run([sys.executable, "-m", "handoff", "no-such-command"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
