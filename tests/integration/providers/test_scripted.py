"""handoff.providers.scripted: the built-in scripted agent as a provider (a real program in the
pane, no model, no network)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from handoff.providers import RoleSpec, get
from handoff.signs import EXIT
from tests.unit.providers.test_scripted import start


def test_its_command_line_starts_the_agent_which_leaves_on_its_exit_keys(
        tmp_path: Path) -> None:
    scripted = get(RoleSpec(provider="scripted"))
    launch = start(tmp_path)
    argv = scripted.argv(launch)
    assert argv[-2:] == ["reviewer", launch.message]
    typed = scripted.exit_keys[0]
    assert typed == EXIT and scripted.exit_keys[1] == "Enter"
    done = subprocess.run(argv, input=f"{typed}\n", capture_output=True, text=True, timeout=60,
                          env={**scripted.env(launch), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "scripted agent — reviewer" in done.stdout
    assert "scripted: leaving" in done.stdout
