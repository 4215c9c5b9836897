"""handoff.platforms: where handoff runs, what is weaker where it is not tested, and native
Windows refused before anything it lacks is imported."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from handoff import platforms
from tests.conftest import PYTHON
from tests.harness import handoff
from tests.paths import ROOT


def test_this_machine_is_linux_and_doctor_says_so(repo: Path) -> None:
    assert platforms.here().name == "Linux"
    done = handoff("doctor", cwd=repo)
    first = done.stdout.splitlines()[0]
    assert first.startswith("OK    platform: Linux ") and "tested" in first, done.stdout


def test_native_windows_gets_one_clear_error_before_any_posix_import(tmp_path: Path) -> None:
    """The real entry point, with the platform Python reports on Windows and the modules
    Windows lacks made unimportable: the refusal comes first, in the house's form."""
    probe = ("import sys\n"
             "sys.platform = 'win32'\n"
             "for name in ('fcntl', 'termios', 'resource'):\n"
             "    sys.modules[name] = None\n"
             "sys.argv = ['handoff', 'start', 'T-1', '--plan', 'plan.md']\n"
             "from handoff.cli.entry import main\n"
             "main()\n")
    done = subprocess.run([PYTHON, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "handoff: error: handoff does not run on native Windows: it needs tmux, POSIX process "
        "groups and file locks",
        "  hint: run handoff inside WSL2 (wsl --install), where it runs as on Linux"]
