"""handoff.peer.scripted_agent run as the module a pane runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.paths import ROOT

PY = sys.executable


def test_module_exits_2_on_bad_arguments_and_0_at_the_end_of_input(tmp_path: Path) -> None:
    bad = subprocess.run([PY, "-m", "handoff.peer.scripted_agent", "a.b", "hi"], capture_output=True,
                         text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert bad.returncode == 2
    assert "usage:" in bad.stderr

    good = subprocess.run([PY, "-m", "handoff.peer.scripted_agent", "reviewer", "hello there"],
                          input="not a brief either\n", capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert good.returncode == 0
    assert "scripted: ignoring 'hello there'" in good.stdout
    assert "scripted: ignoring 'not a brief either'" in good.stdout


def test_started_with_no_message_it_waits_for_one_on_its_input(tmp_path: Path) -> None:
    """A warm start (handoff.loop.crew): ready at once, the first message from its input."""
    done = subprocess.run([PY, "-m", "handoff.peer.scripted_agent", "reviewer"],
                          input="hello there\n", capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("scripted:")]
    assert lines[0] == "scripted: waiting for the next message"
    assert "scripted: ignoring 'hello there'" in lines[1:]


def test_the_scripted_agent_starts_without_any_provider_or_typer() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, handoff.peer.scripted_agent; "
         "print('\\n'.join(sorted(sys.modules)))"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout.split()
    assert "handoff.signs" in loaded
    assert not [m for m in loaded if m.startswith(("handoff.providers", "typer", "libtmux",
                                                   "git", "handoff.loop"))], loaded
