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

import pytest

from handoff.next_steps import (
    CARRIED,
    REFUSED,
    STEPS,
    Verb,
    Where,
    hint,
    next_step,
    refused,
    step,
)
from handoff.operations.board import NEEDS_PERSON
from handoff.phases import Phase

# ---- the table ----------------------------------------------------------------------------


def test_every_phase_has_a_step_whether_an_orchestrator_runs_or_not() -> None:
    for phase in Phase:
        for running in (False, True):
            assert step(phase, running) is not None
    # the phases an orchestrator carries on by itself differ by whether one runs; the others
    # (a person's turn, or the end) do not
    assert {where for where in STEPS if where[1] is not None} == {
        (phase, running) for phase in CARRIED for running in (False, True)}
    assert {phase for phase, running in STEPS if running is None} == set(Phase) - set(CARRIED)


@pytest.mark.parametrize(("phase", "running", "shown"), [
    ("awaiting-approval", False, "handoff plan T-1 (shows it, with what it was grounded in: "
                                 "approve, edit, redraft or refuse it there) or "
                                 "handoff resume T-1 --yes (approves it and starts the loop)"),
    ("needs-human", False, "handoff answer T-1 TEXT"),
    ("needs-human", True, "handoff answer T-1 TEXT"),
    ("passed", False, "handoff finish T-1 (merges it) or handoff close T-1"),
    ("escalated", False, "handoff resume T-1 --more-rounds 1 (at a round or gate limit) or "
                         "handoff close T-1"),
    ("testing", False, "handoff resume T-1"), ("reviewing", False, "handoff resume T-1"),
    ("queued", True, "handoff attach T-1 (watch it)"),
    ("implementing", True, "handoff attach T-1 (watch it) or handoff recycle T-1 ROLE (a stuck "
                           "peer, started afresh on its brief)"),
    ("closed", False, ""),
])
def test_what_status_shows_after_next(phase: str, running: bool, shown: str) -> None:
    assert next_step(phase, "T-1", running) == shown


def test_a_refusal_hints_the_step_of_the_state_it_refuses_in() -> None:
    for (verb, phase), _ in REFUSED.items():
        for running in (False, True):
            exc = refused(verb, phase, "T-1", "/d/T-1", running, role="reviewer")
            assert exc.hint.startswith(hint(phase, "T-1", "/d/T-1", running)), (verb, phase)
            assert "{" not in exc.message + exc.hint, (verb, phase, exc.message)
    # a start under a taken id may also take another id, when the step names a command
    assert refused(Verb.START, Phase.PASSED, "T-1", "/d", False).hint.endswith(
        "or handoff close T-1, or pick a new id")


def test_the_board_marks_the_phases_whose_step_waits_for_the_person() -> None:
    assert NEEDS_PERSON == {"awaiting-approval": "approve", "needs-human": "answer",
                            "escalated": "escalated", "unreadable": "unreadable"}


# ---- reading a hint as a person does ------------------------------------------------------

#: the commands a hint may name
VERBS = {"start", "plan", "resume", "answer", "attach", "recycle", "finish", "close"}


def named(text: str) -> list[list[str]]:
    """The command lines a hint names, each as handoff's arguments (`handoff` left off): a
    line ends at its note in parentheses, at "or", or at a comma."""
    words = text.split()
    found = []
    for i, word in enumerate(words[:-1]):
        if word != "handoff" or words[i + 1] not in VERBS:
            continue
        argv: list[str] = []
        for token in words[i + 1:]:
            if token.startswith("(") or token == "or":
                break
            argv.append(token.rstrip(",;"))
            if token.endswith((",", ";")):
                break
        found.append(argv)
    return found


def test_named_reads_the_command_lines_of_a_hint() -> None:
    assert named("its plan is waiting for approval: handoff resume T-1 --yes") == [
        ["resume", "T-1", "--yes"]]
    assert named("it is at work, …: handoff attach T-1 (watch it) or handoff recycle T-1 ROLE "
                 "(a stuck peer), or pick a new id") == [["attach", "T-1"],
                                                         ["recycle", "T-1", "ROLE"]]
    assert named("it is closed; its record stays in /x (final-report.md, transcripts/)") == []


#: the verbs a person gives on the command line; APPROVE is the board's key
ON_THE_LINE = set(Verb) - {Verb.APPROVE}


def test_the_refusal_cases_cover_the_table() -> None:
    assert {(verb, phase) for phase in Phase for verb in Verb} >= set(REFUSED)
    assert ON_THE_LINE | {Verb.APPROVE} == set(Verb)


#: the rows each scenario walks, and the commands of each it runs (by their place in the step)
QUEUE_AND_AFTER: set[Where] = {(Phase.QUEUED, True), (Phase.QUEUED, False), (Phase.WAITING, True),
                   (Phase.WAITING, False), (Phase.IMPLEMENTING, True),
                   (Phase.IMPLEMENTING, False)}
THROUGH_THE_TEAM: set[Where] = {(Phase.TESTING, True), (Phase.TESTING, False), (Phase.GATING, True),
                    (Phase.GATING, False), (Phase.REVIEWING, True), (Phase.REVIEWING, False),
                    (Phase.PASSED, None), (Phase.CLOSED, None)}
#: a ticket whose planner drafts its plan: running and stopped
PLANNED: set[Where] = {(Phase.PLANNING, True), (Phase.PLANNING, False)}
#: the person's turns, on tickets made in this process: (row, command followed)
TURNS: dict[str, tuple[Where, int]] = {
    "read-plan": ((Phase.AWAITING_APPROVAL, None), 0),
    "approve": ((Phase.AWAITING_APPROVAL, None), 1), "answer": ((Phase.NEEDS_HUMAN, None), 0),
    "close-passed": ((Phase.PASSED, None), 1), "more-rounds": ((Phase.ESCALATED, None), 0),
    "close-escalated": ((Phase.ESCALATED, None), 1),
}


def every_command(rows: set[Where]) -> set[tuple[Where, int]]:
    return {(where, i) for where in rows for i in range(len(STEPS[where].commands))}


def test_the_scenarios_walk_every_row_and_run_every_command_of_the_table() -> None:
    turns = {where for where, _ in TURNS.values()}
    assert QUEUE_AND_AFTER | THROUGH_THE_TEAM | PLANNED | turns == set(STEPS)
    run = every_command(QUEUE_AND_AFTER) | every_command(PLANNED) | every_command(
        THROUGH_THE_TEAM - {
        (Phase.PASSED, None)}) | {((Phase.PASSED, None), 0)} | set(TURNS.values())
    assert run == every_command(set(STEPS))
