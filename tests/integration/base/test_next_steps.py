"""handoff.next_steps: the one table of what a person does next and why a command refuses,
and the property issue 34 asks of it: every hint handoff gives, followed, works.

* The table's shape: a step for every phase, either way an orchestrator stands; the board's
  marks and the refusals' hints come from it.
* Every refusal of `REFUSED`, through the real CLI (the board's keys: its rows), on a real
  ticket made in this process in each phase: its message, and as its hint the step of the
  ticket's state.
* Every step of `STEPS`, on a real ticket in that state (the scripted agents, real tmux and
  git): the hint that `status` or a refusal printed is read back, each command it names is run
  through the real CLI, and it is not refused: it does what it says. Each scenario declares
  the rows it walks and checks that it walked them; together they cover the table.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from handoff.loop.workspace import Workspace
from handoff.next_steps import (
    REFUSED,
    STEPS,
    Verb,
    Where,
    next_step,
    refused,
)
from handoff.operations.approval import approve
from handoff.operations.board import Board
from handoff.phases import Phase
from tests.conftest import wait_until
from tests.e2e.test_terminal import OUTER_CONF
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    release,
    state,
    ticket_path,
    wait_briefed,
    wait_event,
    wait_phase,
    write_plan,
)
from tests.loop_tickets import TESTER, team
from tests.tickets import moved, new_ticket
from tests.unit.base.test_next_steps import (
    ON_THE_LINE,
    PLANNED,
    QUEUE_AND_AFTER,
    THROUGH_THE_TEAM,
    TURNS,
    every_command,
    named,
)

# ---- reading a hint as a person does ------------------------------------------------------



def said(done: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """A refusal's message and hint, as the CLI printed them (no traceback, one error)."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines and lines[0].startswith("handoff: error: "), done.stderr
    shown = next((line.strip()[len("hint: "):] for line in lines[1:]
                  if line.strip().startswith("hint: ")), "")
    return lines[0][len("handoff: error: "):], shown


def status_row(repo: Path, ticket: str) -> dict[str, Any]:
    [row] = json.loads(handoff("status", ticket, "--json", cwd=repo).stdout)
    assert isinstance(row, dict)
    return row


def where_now(repo: Path, ticket: str) -> Where:
    """The ticket's row of the table: its phase, and whether an orchestrator runs it where
    that makes a row of its own."""
    row = status_row(repo, ticket)
    phase, running = Phase(row["phase"]), row["orchestrator"] is not None
    return (phase, running) if (phase, running) in STEPS else (phase, None)


# ---- every refusal, by verb and phase -----------------------------------------------------

def in_phase(home: Path, repo: Path, phase: Phase) -> Workspace:
    """T-1 made as `start` makes it and put in phase, as a run that ended there left it (a
    finished run wrote its final report); no orchestrator, no session."""
    ws = new_ticket(home, repo)
    if phase != Phase.AWAITING_APPROVAL:
        moved(ws, phase, round=1)
    if phase in (Phase.PASSED, Phase.ESCALATED):
        ws.tdir.final_report.write_text(f"# T-1: {phase}\n", encoding="utf-8")
    return ws


def verb_argv(verb: Verb, phase: Phase, plan: Path) -> list[str]:
    """The command line of verb for T-1 in phase (recycle: a role that does not work in it)."""
    other = "reviewer" if phase == Phase.IMPLEMENTING else "implementer"
    return {Verb.START: ["start", "T-1", "--plan", str(plan)], Verb.RESUME: ["resume", "T-1"],
            Verb.MORE_ROUNDS: ["resume", "T-1", "--more-rounds", "1"],
            Verb.ONTO: ["resume", "T-1", "--onto", "main"],
            Verb.ANSWER: ["answer", "T-1", "go on"], Verb.ATTACH: ["attach", "T-1"],
            Verb.RECYCLE: ["recycle", "T-1", other], Verb.FINISH: ["finish", "T-1"],
            Verb.FORGET: ["forget", "T-1"]}[verb]


@pytest.mark.parametrize("phase", list(Phase))
def test_each_verb_refuses_a_ticket_in_this_phase_with_the_step_of_its_state(
        repo: Path, tmp_path: Path, handoff_home: Path, phase: Phase) -> None:
    ws = in_phase(handoff_home, repo, phase)
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    before = ws.tdir.state_file.read_text(encoding="utf-8")
    verbs = [verb for verb in Verb if (verb, phase) in REFUSED]
    for verb in verbs:
        if verb not in ON_THE_LINE:
            continue
        done = handoff(*verb_argv(verb, phase, plan), cwd=repo)
        assert done.returncode == 2, (verb, done.stdout, done.stderr)
        other = "reviewer" if phase == Phase.IMPLEMENTING else "implementer"
        exc = refused(verb, phase, "T-1", ws.tdir.path, False, role=other)
        assert said(done) == (exc.message, exc.hint), verb
    assert ws.tdir.state_file.read_text(encoding="utf-8") == before, "a refusal changes nothing"
    board = Board(handoff_home)
    board.refresh()
    [row] = board.rows()
    for verb in (Verb.APPROVE, Verb.ANSWER):  # the board's keys say what the commands say
        if (verb, phase) not in REFUSED:
            assert row.refusal(verb) == ""
            continue
        said_so = refused(verb, phase, "T-1", ws.tdir.path, False)
        assert row.refusal(verb) == f"{said_so.message} (hint: {said_so.hint})"


# ---- every step, followed ------------------------------------------------------------------

class Walk:
    """The rows of the table a scenario reached, and the commands of each it ran."""

    def __init__(self, repo: Path, home: Path, terminal: str = "") -> None:
        self.repo, self.home, self.terminal = repo, home, terminal
        self.visited: set[Where] = set()
        self.followed: set[tuple[Where, int]] = set()
        self.attaches = 0

    def reached(self, ticket: str, expected: Where, shown: str) -> list[list[str]]:
        """The ticket is at expected; shown is a hint printed for it: the commands it names,
        which must be the step's."""
        assert where_now(self.repo, ticket) == expected, (ticket, expected)
        self.visited.add(expected)
        lines = named(shown)
        assert lines == named(next_step(expected[0], ticket, bool(expected[1]))), shown
        return lines

    def follow(self, where: Where, index: int, argv: list[str], role: str = "") -> \
            subprocess.CompletedProcess[str]:
        """Run the index-th command of where's step, as printed (TEXT and ROLE filled in)."""
        argv = [{"TEXT": "go on", "ROLE": role}.get(word, word) for word in argv]
        done = self.attach(argv) if argv[0] == "attach" else \
            handoff(*argv, cwd=self.repo, timeout=120)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        self.followed.add((where, index))
        return done

    def attach(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        """`handoff attach` typed into the person's terminal: it attaches to the ticket's
        session (a client of it appears there), and Ctrl-b d comes back."""
        current = state(self.home, argv[1])
        self.attaches += 1
        name = f"user-{self.attaches}"
        subprocess.run(["tmux", "-L", self.terminal, "-f", str(OUTER_CONF), "new-session", "-d",
                        "-s", name, "-x", "160", "-y", "40", "-c", str(self.repo), "--",
                        sys.executable, "-m", "handoff", *argv], check=True, timeout=15)

        def clients() -> str:
            return subprocess.run(["tmux", "-L", str(current["socket"]), "list-clients", "-t",
                                   f"={current['session']}:"], capture_output=True, text=True,
                                  timeout=15).stdout.strip()
        wait_until(clients, 30, f"the person's terminal to attach to {argv[1]}")
        subprocess.run(["tmux", "-L", self.terminal, "send-keys", "-t", f"={name}:", "C-b", "d"],
                       check=True, timeout=15)
        wait_until(lambda: _ended(self.terminal, name), 30, "the attach to end on detach")
        return subprocess.CompletedProcess(argv, 0, "", "")

    def at_work(self, ticket: str, phase: Phase, plan: Path, role: str = "",
                again: tuple[Phase, ...] = ()) -> None:
        """A ticket its orchestrator carries on in phase: what a refusal hints while it runs,
        followed; then stopped, what `status` hints, followed (again: the phases it may be
        in once resumed, phase by default)."""
        running, idle = (phase, True), (phase, False)
        wait_until(lambda: where_now(self.repo, ticket) == running, 60,
                   f"{ticket} {phase} with its orchestrator")
        busy = handoff("resume", ticket, cwd=self.repo)
        assert busy.returncode == 4, busy.stderr  # the orchestrator runs: one at a time
        taken = handoff("start", ticket, "--plan", str(plan), cwd=self.repo)
        assert taken.returncode == 2, taken.stderr
        lines = self.reached(ticket, running, said(busy)[1])
        assert named(said(taken)[1]) == lines, "start on a running ticket: the same step"
        for index, argv in enumerate(lines):
            done = self.follow(running, index, argv, role)
            if argv[0] == "recycle":
                assert wait_event(self.home, ticket, "recycle", by="hand", role=role)
        assert handoff("stop", ticket, cwd=self.repo).returncode == 0
        [argv] = self.reached(ticket, idle, status_row(self.repo, ticket)["hint"])
        done = self.follow(idle, 0, argv)
        assert "already running" not in done.stderr
        row = status_row(self.repo, ticket)
        assert row["hint"] == "", "started: status says no resume (it would start it again)"
        assert row["run"] in ("starting", "running"), row
        wait_until(lambda: where_now(self.repo, ticket) in {(p, True) for p in again or (phase,)},
                   60, f"{ticket} carried on again")


def _ended(terminal: str, name: str) -> bool:
    done = subprocess.run(["tmux", "-L", terminal, "list-panes", "-t", f"={name}:", "-F",
                           "#{pane_dead}"], capture_output=True, text=True, timeout=15)
    return done.stdout.strip() == "1"


def paused_plan(tmp_path: Path, name: str, **more: Any) -> Path:
    """A plan whose implementer waits for the file `go` before it works (never written)."""
    return write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "pause_until": "go"}},
                                          test=ADD_ONLY, **more), f"{name}.md")


def test_the_queue_and_the_tickets_started_after_others(
        repo: Path, tmp_path: Path, handoff_home: Path, terminal: str) -> None:
    """A-1 at work (its implementer paused), Q-1 queued behind it (max_parallel 1), W-1
    waiting for A-1 to pass: in each, running and stopped, every hint followed."""
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("max_parallel: 1\n", encoding="utf-8")
    walk = Walk(repo, handoff_home, terminal)
    plans = {name: paused_plan(tmp_path, name) for name in ("A-1", "Q-1", "W-1")}
    started = handoff("start", "A-1", "--plan", str(plans["A-1"]), "--yes", cwd=repo)
    assert started.returncode == 0, started.stderr
    row = status_row(repo, "A-1")
    assert row["hint"] == "" and row["run"] in ("starting", "running"), \
        "right after start: no `resume` hinted while its orchestrator starts"
    wait_event(handoff_home, "A-1", "launch", role="implementer")
    assert handoff("start", "Q-1", "--plan", str(plans["Q-1"]), "--yes", cwd=repo).returncode == 0
    wait_phase(handoff_home, "Q-1", "queued")
    assert handoff("start", "W-1", "--plan", str(plans["W-1"]), "--yes", "--after", "A-1",
                   cwd=repo).returncode == 0
    wait_phase(handoff_home, "W-1", "waiting")

    walk.at_work("Q-1", Phase.QUEUED, plans["Q-1"])  # while A-1 holds the only slot
    walk.at_work("W-1", Phase.WAITING, plans["W-1"])
    # stopped, A-1 gives its slot to Q-1: resumed, it queues behind it
    walk.at_work("A-1", Phase.IMPLEMENTING, plans["A-1"], "implementer",
                 again=(Phase.IMPLEMENTING, Phase.QUEUED))
    assert walk.visited == QUEUE_AND_AFTER
    assert walk.followed == every_command(QUEUE_AND_AFTER)
    for ticket in ("A-1", "Q-1", "W-1"):
        handoff("stop", ticket, cwd=repo)


def test_a_ticket_whose_planner_drafts_its_plan(
        repo: Path, tmp_path: Path, handoff_home: Path, terminal: str) -> None:
    """P-1 started from its text: its planner at work (paused), running and stopped, every
    hint followed."""
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("roles: {planner: {provider: scripted}}\n",
                                              encoding="utf-8")
    ticket = tmp_path / "ticket.md"
    ticket.write_text("Fix add.\n\n~~~handoff-planner\npause_until: go\ndrafts: []\n~~~\n",
                      encoding="utf-8")
    walk = Walk(repo, handoff_home, terminal)
    plan = paused_plan(tmp_path, "P-1")
    started = handoff("start", "P-1", "--ticket-file", str(ticket), cwd=repo)
    assert started.returncode == 0, started.stderr
    wait_event(handoff_home, "P-1", "launch", role="planner")
    walk.at_work("P-1", Phase.PLANNING, plan, "planner")
    assert walk.visited == PLANNED
    assert walk.followed == every_command(PLANNED)
    handoff("stop", "P-1", cwd=repo)


#: the plan's tests, held in the gate's own checkout until the file ~/gate-go exists (the
#: gate's fence shows the home; the implementer, tester and reviewer run them unheld)
GATE_HELD = [sys.executable, "-c",
             "import os, subprocess, sys, time\n"
             "while os.path.basename(os.getcwd()) == 'gate' and "
             "not os.path.exists(os.path.expanduser('~/gate-go')):\n    time.sleep(0.1)\n"
             f"sys.exit(subprocess.call({ADD_ONLY!r}))"]


def test_a_ticket_through_its_team_to_the_end(
        repo: Path, tmp_path: Path, handoff_home: Path, terminal: str) -> None:
    """B-1 with a tester: testing, gating and reviewing, each running and stopped; then
    passed, finished by its hint, and closed: what is left is its record."""
    team(repo, tester=TESTER)
    walk = Walk(repo, handoff_home, terminal)
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD], "tester": {
        "pause_until": "t-go"}, "reviewer": {"pause_until": "r-go"}}}, test=GATE_HELD))
    gate_go = Path.home() / "gate-go"
    try:
        assert handoff("start", "B-1", "--plan", str(plan), "--yes", cwd=repo).returncode == 0
        folder = ticket_path(handoff_home, "B-1")
        wait_event(handoff_home, "B-1", "launch", role="tester")
        walk.at_work("B-1", Phase.TESTING, plan, "tester")
        release(folder, "t-go")
        wait_phase(handoff_home, "B-1", "gating")
        walk.at_work("B-1", Phase.GATING, plan)
        gate_go.write_text("go\n", encoding="utf-8")
        wait_phase(handoff_home, "B-1", "reviewing")
        wait_briefed(handoff_home, "B-1", "reviewer")
        walk.at_work("B-1", Phase.REVIEWING, plan, "reviewer")
        release(folder, "r-go")
        wait_phase(handoff_home, "B-1", "passed", "escalated")
        wait_until(lambda: status_row(repo, "B-1")["orchestrator"] is None, 60,
                   "the orchestrator to end")

        passed = (Phase.PASSED, None)
        shown = status_row(repo, "B-1")["hint"]
        lines = walk.reached("B-1", passed, shown)
        assert named(said(handoff("answer", "B-1", "go on", cwd=repo))[1]) == lines
        walk.follow(passed, 0, lines[0])  # finish: merged, then closed
        assert "return a + b" in (repo / "calc.py").read_text(encoding="utf-8")

        closed = (Phase.CLOSED, None)
        refusal = said(handoff("attach", "B-1", cwd=repo))[1]
        assert walk.reached("B-1", closed, refusal) == []
        assert str(folder) in refusal, "it names where its record is"
        assert (folder / "final-report.md").is_file() and any((folder / "transcripts").iterdir())
        assert status_row(repo, "B-1")["hint"] == ""
    finally:
        gate_go.write_text("go\n", encoding="utf-8")  # no held gate outlives the test
    assert walk.visited == THROUGH_THE_TEAM
    assert walk.followed == every_command(THROUGH_THE_TEAM - {passed}) | {(passed, 0)}


def _needs_human(home: Path, repo: Path) -> Workspace:
    ws = new_ticket(home, repo, "N-1")
    approve(ws)
    moved(ws, "needs-human", round=1, reason="the implementer is blocked: which API?",
          after_answer="implementing")
    return ws


def _passed(home: Path, repo: Path) -> Workspace:
    ws = new_ticket(home, repo, "P-1")
    approve(ws)
    moved(ws, "passed", round=1)
    ws.tdir.final_report.write_text("# P-1: passed\n", encoding="utf-8")
    return ws


def _escalated(home: Path, repo: Path) -> Workspace:
    ws = new_ticket(home, repo, "E-1")
    approve(ws)
    moved(ws, "escalated", round=1, max_rounds=1, verdicts={"1": "fail"},
          findings={"1": ["calc.py:a"]}, reason="still failing after 1 review round(s)")
    ws.tdir.final_report.write_text("# E-1: escalated\n", encoding="utf-8")
    return ws


BUILD: dict[str, Callable[[Path, Path], Workspace]] = {
    "read-plan": lambda home, repo: new_ticket(home, repo, "R-1"),
    "approve": lambda home, repo: new_ticket(home, repo, "C-1"), "answer": _needs_human,
    "close-passed": _passed, "more-rounds": _escalated, "close-escalated": _escalated,
}
#: what each followed command did, read from the ticket's record
DID: dict[str, Callable[[Path, str], bool]] = {
    # reading it changes nothing: it still waits for the person
    "read-plan": lambda home, t: state(home, t)["phase"] == "awaiting-approval",
    "approve": lambda home, t: state(home, t)["phase"] != "awaiting-approval",
    "answer": lambda home, t: any(e["kind"] == "answer" for e in events(home, t)),
    "close-passed": lambda home, t: state(home, t)["phase"] == "closed",
    "more-rounds": lambda home, t: any(e["kind"] == "more-rounds" for e in events(home, t)),
    "close-escalated": lambda home, t: state(home, t)["phase"] == "closed",
}


@pytest.mark.parametrize("turn", sorted(TURNS))
def test_a_persons_turn_hinted_and_taken(repo: Path, handoff_home: Path, turn: str) -> None:
    """A ticket waiting for its person: `status` and a refusal (attach: no session yet) hint
    the same step; the command it names is taken, and does what it says."""
    ws = BUILD[turn](handoff_home, repo)
    ticket = ws.tdir.ticket
    where, index = TURNS[turn]
    walk = Walk(repo, handoff_home)
    lines = walk.reached(ticket, where, status_row(repo, ticket)["hint"])
    refusal = said(handoff("attach", ticket, cwd=repo))
    assert refusal[0] == f"the peers of {ticket} are not running"
    assert named(refusal[1]) == lines
    walk.follow(where, index, lines[index])
    assert DID[turn](handoff_home, ticket), turn
    assert walk.followed == {TURNS[turn]}
    handoff("stop", ticket, cwd=repo)
