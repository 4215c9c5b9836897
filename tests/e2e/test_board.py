"""`handoff watch` in a real terminal (an outer tmux server plays the person's): rows appear and
move on without a key press, and the keys approve and stop tickets through the real commands'
core functions."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import wait_until
from tests.e2e.test_terminal import OUTER_CONF, program_ended, screen
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    diagnose,
    events,
    handoff,
    plan_text,
    wait_event,
    wait_phase,
    with_inotify_watches,
    write_plan,
)


def board_in_terminal(socket: str, cwd: Path, *env: str, watches: int | None = None) -> None:
    """`handoff watch` in the person's terminal (env: NAME=VALUE set for it alone; watches:
    the inotify watches it may have, None for the machine's own limit)."""
    board = ["env", *env, sys.executable, "-m", "handoff", "watch"]
    if watches is not None:
        board = with_inotify_watches(watches, board)
    subprocess.run(["tmux", "-L", socket, "-f", str(OUTER_CONF), "new-session", "-d", "-s",
                    "user", "-x", "180", "-y", "40", "-c", str(cwd), "--", *board],
                   check=True, timeout=15)


def press(socket: str, *keys: str) -> None:
    subprocess.run(["tmux", "-L", socket, "send-keys", "-t", "=user:", *keys], check=True,
                   timeout=15)


def row_of(socket: str, ticket: str) -> str:
    """The board's line for ticket ('' while it is not shown)."""
    return next((line for line in screen(socket).splitlines()
                 if re.search(rf"(^|\s){re.escape(ticket)}\s", line)), "")


def shows(socket: str, ticket: str, *words: str, timeout: float = 60) -> str:
    """Wait (bounded) until ticket's row shows every word; the row."""
    try:
        return wait_until(lambda: (lambda row: row if row and all(w in row for w in words)
                                   else None)(row_of(socket, ticket)), timeout,
                          f"the board to show {ticket} with {words}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nthe board:\n{screen(socket)}\n{diagnose()}") from None


def test_the_board_follows_tickets_and_approves_and_stops_them_by_key(
        repo: Path, tmp_path: Path, handoff_home: Path, terminal: str) -> None:
    board_in_terminal(terminal, repo)
    wait_until(lambda: "no tickets yet" in screen(terminal), 30, "the empty board")

    # a plan waiting for approval appears, marked, without a key press
    paused = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD],
                                                 "pause_before_report": "go"}},
                                            test=ADD_ONLY), "paused.md")
    assert handoff("start", "W-1", "--plan", str(paused), cwd=repo).returncode == 1
    # woken by the new folders, not found by the next RESCAN (10 s): a new repository's and a
    # new ticket's folders are watched as soon as they exist
    shows(terminal, "W-1", "APPROVE", "awaiting-approval", timeout=6)
    # the whole width of the terminal, whatever COLUMNS says (the environment of this
    # terminal's tmux server, started from pytest, holds COLUMNS=80)
    assert "LAST EVENT" in screen(terminal)
    assert "1 need you" in screen(terminal)

    # the approve key: as `handoff resume W-1 --yes`; the implementer starts and works
    press(terminal, "y")
    shows(terminal, "W-1", "implementing", "1/3")
    assert "APPROVE" not in row_of(terminal, "W-1")
    wait_event(handoff_home, "W-1", "phase", reason="plan approved")
    wait_event(handoff_home, "W-1", "launch", role="implementer")

    # the attach key: the board steps aside for the ticket's tmux session, and comes back
    # when the person detaches
    press(terminal, "a")
    wait_until(lambda: "[W-1-" in screen(terminal) and "NEEDS YOU" not in screen(terminal), 30,
               "the ticket's session in place of the board")
    press(terminal, "C-b", "d")
    wait_until(lambda: "back from W-1" in screen(terminal), 30, "the board again")
    shows(terminal, "W-1", "implementing")

    # another ticket runs to its end on its own: the board follows with no key pressed
    plain = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY), "p.md")
    started = handoff("start", "P-1", "--plan", str(plain), "--yes", cwd=repo)
    assert started.returncode == 0, started.stderr
    # the ticket's end first: the board, woken at once by each change, may show a row's words
    # ("passed" in its last event) a moment before the phase is
    assert wait_phase(handoff_home, "P-1", "passed", "escalated")["phase"] == "passed"
    shows(terminal, "P-1", "passed", "reported")

    # the stop key (confirmed) on the selected ticket, W-1: as `handoff stop W-1`
    press(terminal, "s")
    wait_until(lambda: "Stop W-1?" in screen(terminal), 15, "the stop question")
    press(terminal, "y")
    shows(terminal, "W-1", "stopped")
    stopped = wait_event(handoff_home, "W-1", "stopped", by="hand")
    assert stopped["orchestrator"], "the orchestrator was stopped"
    wait_until(lambda: "W-1 stopped (orchestrator" in screen(terminal), 30, "the result line")

    # a key that does not fit the ticket says so in one line, no traceback
    press(terminal, "n")
    wait_until(lambda: "W-1 is not waiting for a person" in screen(terminal), 15,
               "the refusal line")

    press(terminal, "q")
    wait_until(lambda: program_ended(terminal), 30, "the board to end on q")
    assert "Traceback" not in screen(terminal)
    assert [e.get("by") for e in events(handoff_home, "W-1") if e["kind"] == "stopped"
            ].count("hand") == 1, "one key press, one stop"


def test_no_color_leaves_the_board_without_colours(
        repo: Path, tmp_path: Path, terminal: str) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "N-1", "--plan", str(plan), cwd=repo).returncode == 1
    board_in_terminal(terminal, repo, "NO_COLOR=1")
    shows(terminal, "N-1", "APPROVE")
    coloured = re.compile(r"\x1b\[[0-9;]*(3[0-7]|9[0-7]|4[0-7]|10[0-7]|[34]8;)")
    drawn = subprocess.run(["tmux", "-L", terminal, "capture-pane", "-e", "-p", "-t", "=user:"],
                           capture_output=True, text=True, timeout=15).stdout
    assert "N-1" in drawn and not coloured.search(drawn), drawn
    press(terminal, "q")
    wait_until(lambda: program_ended(terminal), 30, "the board to end on q")

    subprocess.run(["tmux", "-L", terminal, "kill-server"], capture_output=True, timeout=15)
    board_in_terminal(terminal, repo)  # without NO_COLOR the same board has colours
    shows(terminal, "N-1", "APPROVE")
    drawn = subprocess.run(["tmux", "-L", terminal, "capture-pane", "-e", "-p", "-t", "=user:"],
                           capture_output=True, text=True, timeout=15).stdout
    assert coloured.search(drawn), "the check above can see colours"
    press(terminal, "q")
    wait_until(lambda: program_ended(terminal), 30, "the board to end on q")


def test_a_board_without_inotify_says_it_polls_and_still_follows_tickets(
        repo: Path, tmp_path: Path, terminal: str) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "P-1", "--plan", str(plan), cwd=repo).returncode == 1
    board_in_terminal(terminal, repo, watches=0)
    shows(terminal, "P-1", "APPROVE")
    wait_until(lambda: "polling every" in screen(terminal), 30, "the board to say it polls")
    assert "fs.inotify.max_user_watches" in screen(terminal), screen(terminal)
    assert handoff("start", "P-2", "--plan", str(plan), cwd=repo).returncode == 1
    shows(terminal, "P-2", "APPROVE", timeout=8)  # no key pressed, before a RESCAN: polled
    press(terminal, "q")
    wait_until(lambda: program_ended(terminal), 30, "the board to end on q")
