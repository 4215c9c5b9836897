"""handoff in a real terminal (an outer tmux server plays the user's): attach, the approval prompt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_until
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    handoff,
    plan_text,
    state,
    tmux_alive,
    wait_phase,
    write_plan,
)
from tests.paths import TESTS

OUTER_CONF = TESTS / "user-terminal.tmux.conf"


def run_in_terminal(socket: str, cwd: Path, *args: str) -> None:
    """Start `handoff ARGS` in the user's terminal, as a person typing it would."""
    subprocess.run(["tmux", "-L", socket, "-f", str(OUTER_CONF), "new-session", "-d", "-s",
                    "user", "-x", "160", "-y", "40", "-c", str(cwd), "--", sys.executable, "-m",
                    "handoff", *args], check=True, timeout=15)


def screen(socket: str) -> str:
    done = subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-t", "=user:"],
                          capture_output=True, text=True, timeout=15)
    return done.stdout


def program_ended(socket: str) -> bool:
    """The program in the user's terminal has ended."""
    done = subprocess.run(["tmux", "-L", socket, "list-panes", "-t", "=user:", "-F",
                           "#{pane_dead}"], capture_output=True, text=True, timeout=15)
    return done.stdout.strip() == "1"


def test_attach_shows_the_chosen_peers_window_and_detaching_leaves_it(
        repo: Path, tmp_path: Path, socket: str, terminal: str) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", "T-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    assert done.returncode == 0, done.stderr

    # the ticket passed, so its reviewer left; its window stays with its last screen
    run_in_terminal(terminal, repo, "attach", "T-1", "--role", "reviewer")
    wait_until(lambda: "review-report-1.md" in screen(terminal)
               and "scripted: leaving" in screen(terminal),
               what="the reviewer's last screen in the user's terminal")
    assert "[T-1-" in screen(terminal), "the status line names the ticket's session"

    subprocess.run(["tmux", "-L", terminal, "send-keys", "-t", "=user:", "C-b", "d"], check=True,
                   timeout=15)
    wait_until(lambda: program_ended(terminal), what="the attach to end on detach")
    assert tmux_alive(socket), "detaching never ends the ticket's session"


def test_attach_to_a_ticket_without_peers_says_how_to_start_them(
        repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "T-2", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo).returncode == 0
    assert handoff("close", "T-2", cwd=repo).returncode == 0
    done = handoff("attach", "T-2", cwd=repo)
    assert done.returncode == 2
    # closed: its record is what is left to look at, not a resume that would refuse it
    assert "not running" in done.stderr and "handoff resume" not in done.stderr
    assert "it is closed" in done.stderr and "final-report.md, transcripts/" in done.stderr


def test_plan_approval_prompt_in_a_terminal(repo: Path, tmp_path: Path, handoff_home: Path,
                                            terminal: str) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    run_in_terminal(terminal, repo, "start", "T-3", "--plan", str(plan), "--foreground")
    wait_until(lambda: "Approve this plan for T-3?" in screen(terminal), what="the prompt")
    shown = screen(terminal)
    assert "# Fix calc" in shown, "the plan is shown before the question"
    # and what else is approved: who runs with which powers, from where, how far
    assert "implementer: scripted; permissions bypassed" in shown
    assert "reviewer: scripted; permissions bypassed" in shown
    assert "branch handoff/T-3" in shown and "at most 3 review round(s)" in shown
    assert "sandbox: bubblewrap" in shown, "the sandbox in force is approved too"
    assert state(handoff_home, "T-3")["phase"] == "awaiting-approval"

    subprocess.run(["tmux", "-L", terminal, "send-keys", "-t", "=user:", "y", "Enter"],
                   check=True, timeout=15)
    assert wait_phase(handoff_home, "T-3", "passed", "escalated")["phase"] == "passed"


def test_declining_the_plan_starts_nothing_and_keeps_nothing_waiting(
        repo: Path, tmp_path: Path, handoff_home: Path, terminal: str) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    run_in_terminal(terminal, repo, "start", "T-4", "--plan", str(plan), "--foreground")
    wait_until(lambda: "Approve this plan for T-4?" in screen(terminal), what="the prompt")
    subprocess.run(["tmux", "-L", terminal, "send-keys", "-t", "=user:", "n", "Enter"],
                   check=True, timeout=15)
    wait_until(lambda: program_ended(terminal), what="start to end after the refusal")
    assert "T-4 was not started: its plan was not approved (no)" in screen(terminal)
    assert not list(handoff_home.glob("*/T-4")), "no ticket left awaiting an approval"
    assert not (repo / ".worktrees").exists()


def test_a_person_attaching_from_a_small_terminal_does_not_resize_the_peers(
        repo: Path, tmp_path: Path, handoff_home: Path, socket: str, terminal: str) -> None:
    """Peers' screens must read the same whoever attaches: their windows stay 200x50."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_until": "never"}},
                                          test=ADD_ONLY))
    assert handoff("start", "T-9", "--plan", str(plan), "--yes", cwd=repo).returncode == 0
    session = wait_until(lambda: state(handoff_home, "T-9").get("session")
                         if list(handoff_home.glob("*/T-9/state.json")) else None,
                         what="the ticket's session")
    wait_until(lambda: "implementer" in _windows(socket, str(session)), what="the implementer")
    run_in_terminal(terminal, repo, "attach", "T-9")
    wait_until(lambda: _clients(socket), what="the person's terminal to attach")
    assert _clients(socket) == ["160x40"], "attached from a terminal smaller than the panes"
    assert set(_windows(socket, str(session)).values()) == {"200x50"}
    handoff("close", "T-9", "--force", cwd=repo)


def _windows(socket: str, session: str) -> dict[str, str]:
    done = subprocess.run(["tmux", "-L", socket, "list-windows", "-t", f"={session}", "-F",
                           "#{window_name} #{window_width}x#{window_height}"],
                          capture_output=True, text=True, timeout=15)
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


def _clients(socket: str) -> list[str]:
    done = subprocess.run(["tmux", "-L", socket, "list-clients", "-F",
                           "#{client_width}x#{client_height}"], capture_output=True, text=True,
                          timeout=15)
    return done.stdout.split()
