"""No secret on a command line, in a log, or in a peer that does not need it.

A ticket runs with provider keys in the person's environment while its reviewer works; then
every process handoff started is read as another local user reads it
(`/proc/<pid>/cmdline` is world-readable), and every pane's start command as any peer on the
socket reads it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.faults.catalog import fault
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    as_peer,
    handoff,
    plan_text,
    release,
    state,
    ticket_path,
    wait_briefed,
    wait_event,
    write_plan,
)

KEYS = {"ANTHROPIC_API_KEY": "sk-ant-api03-never-on-argv-0123456789",
        "OPENAI_API_KEY": "sk-proj-never-on-argv-9876543210"}


def cmdline_as_nobody(pid: int) -> str:
    """What any other local user reads of pid's command line (as `nobody` when this runs as
    root, as CI does; the same file otherwise)."""
    argv = ["cat", f"/proc/{pid}/cmdline"]
    user = "nobody" if os.getuid() == 0 else None
    done = subprocess.run(argv, capture_output=True, timeout=15, user=user)
    assert done.returncode == 0 or not Path(f"/proc/{pid}").exists(), done.stderr
    return done.stdout.replace(b"\0", b" ").decode(errors="replace")


def started_by(home: Path) -> list[int]:
    """Every live process whose environment names this test's HANDOFF_HOME."""
    mark = f"HANDOFF_HOME={home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


@fault("18.1, 18.5, 18.6", "a peer reads another peer's provider key from tmux's "
       "`#{pane_start_command}` or any process's world-readable /proc/<pid>/cmdline",
       "refused: every process starts through a launcher that reads its environment from a 0600 "
       "file and deletes it; no value is ever on a command line",
       "the keys, held only in the processes' environments")
def test_no_key_is_on_any_command_line_or_in_the_debug_log(
        repo: Path, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("HANDOFF_DEBUG", "1")
    # every command in a process of its own, so /proc shows the orchestrator's environment
    # (a warm process's child keeps the one it was forked with there: tests/unit/machinery/test_relay.py
    # checks what the warm process and its children hold)
    monkeypatch.setenv("HANDOFF_WARM", "0")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD],
                                               "reviewer": {"pause_until": "go"}}},
                                          test=ADD_ONLY, review=[ADD_ONLY]))
    started = handoff("start", "SEC-1", "--plan", str(plan), "--yes", cwd=repo)
    assert started.returncode == 0, started.stderr
    wait_briefed(handoff_home, "SEC-1", "reviewer")
    assert "HANDOFF_SEAL" not in as_peer(handoff_home, "SEC-1", "reviewer"), \
        "no peer holds a secret to file with"
    key = (ticket_path(handoff_home, "SEC-1") / "grants" / "key")
    secrets = [*KEYS.values(), *([key.read_bytes().hex()] if key.exists() else [])]
    st = state(handoff_home, "SEC-1")
    server = int(subprocess.run(["tmux", "-L", st["socket"], "display-message", "-p", "#{pid}"],
                                capture_output=True, text=True, timeout=15, check=True).stdout)
    pids = {server, *started_by(handoff_home)}
    assert len(pids) >= 4, pids  # the server, the orchestrator, two peers
    for pid in pids:
        shown = cmdline_as_nobody(pid)
        assert not [s for s in secrets if s in shown], (pid, shown)
    panes = subprocess.run(["tmux", "-L", st["socket"], "list-panes", "-a", "-F",
                            "#{pane_start_command}"], capture_output=True, text=True, timeout=15,
                           check=True).stdout
    assert "launcher.py" in panes and not [s for s in secrets if s in panes], panes
    # the scripted peers need no provider key, nor does an orchestrator of scripted peers
    orchestrator = as_peer(handoff_home, "SEC-1", "orchestrator")
    for env in (as_peer(handoff_home, "SEC-1", "reviewer"), orchestrator):
        assert not set(KEYS) & set(env), sorted(env)
    folder = ticket_path(handoff_home, "SEC-1")
    release(folder, "go")
    wait_event(handoff_home, "SEC-1", "verdict", timeout=60)
    logged = (folder / "handoff.log").read_text()
    assert "run " in logged, "the debug log was written"
    assert not [s for s in secrets if s in logged + started.stderr]
    assert not list((handoff_home / ".launch").iterdir()), "every launch file was used up"
    assert handoff("stop", "SEC-1", cwd=repo).returncode == 0
    assert handoff("close", "SEC-1", cwd=repo).returncode == 0
