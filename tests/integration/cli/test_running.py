"""handoff.cli.running: a ticket's run as the command line holds it. With no one at the
terminal a plan waits for approval; a person at one is shown the plan and asked; --yes
approves it, and a run in this terminal ends with the exit code of its outcome."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.harness import ADD_ONLY, FIX_ADD, handoff, plan_text, state, write_plan


def test_unapproved_plan_waits_then_resume_yes_runs_it(repo: Path, tmp_path: Path,
                                                       handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    waiting = handoff("start", "T-2", "--plan", str(plan), cwd=repo, input_text="")
    assert waiting.returncode == 1 and "waiting for approval" in waiting.stderr
    assert state(handoff_home, "T-2")["phase"] == "awaiting-approval"
    assert not (repo / ".worktrees").exists(), "nothing is created before approval"
    done = handoff("resume", "T-2", "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert state(handoff_home, "T-2")["phase"] == "passed"


def read_until(fd: int, needle: bytes, timeout: float = 60) -> bytes:
    """What the terminal showed, read until needle appears (select: no sleep)."""
    seen, deadline = b"", time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{needle!r} never shown; the terminal showed: {seen!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            assert chunk, f"{needle!r} never shown; the terminal showed: {seen!r}"
            seen += chunk
    return seen


def at_the_prompt(repo: Path, plan: Path, ticket: str, keys: bytes) -> tuple[int, bytes]:
    """`handoff start` in a real terminal, keys typed at its approval prompt (none: Ctrl-C,
    the SIGINT a terminal sends its program): its exit status and all it showed."""
    controller, terminal = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "handoff", "start", ticket, "--plan",
                              str(plan)], cwd=repo, stdin=terminal, stdout=terminal,
                             stderr=terminal, start_new_session=True)
    os.close(terminal)
    try:
        shown = read_until(controller, f"Approve this plan for {ticket}? [y/N]: ".encode())
        if keys:
            os.write(controller, keys)
        else:  # as a terminal does: to its foreground process group, the moment it asks
            os.killpg(child.pid, signal.SIGINT)
        # read what it says before waiting for its end: a full terminal would hold it
        shown += read_until(controller, b"not started")
        return child.wait(timeout=60), shown
    finally:
        child.kill()
        child.wait()
        os.close(controller)


def test_a_person_at_the_terminal_is_shown_the_plan_and_no_means_no(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY)
                      + "\nThe sum must add.\n")
    code, shown = at_the_prompt(repo, plan, "T-A", b"n\n")
    assert b"The sum must add." in shown, shown
    assert code == 1
    assert b"T-A was not started: its plan was not approved (no)" in shown, shown
    assert not list(handoff_home.glob("*/T-A")), "nothing waits for an approval nobody gives"
    assert not (repo / ".worktrees").exists(), "nothing is created before approval"
    again = handoff("start", "T-A", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert again.returncode == 0, "the id is free for the mended plan: " + again.stderr


def test_ctrl_c_at_the_prompt_is_an_interruption_and_starts_nothing(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    code, shown = at_the_prompt(repo, plan, "T-C", b"")
    assert code == 130, shown
    assert b"T-C was not started: its plan was not approved (Ctrl-C)" in shown, shown
    assert b"Aborted" not in shown and b"Traceback" not in shown
    assert not list(handoff_home.glob("*/T-C"))
