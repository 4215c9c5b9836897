"""What a person does next with a ticket, by where it stands, and why a command refuses it:
one table, read by `status`, the notices, the board and every verb that refuses a ticket, so
that a hint can never send a person to a command that refuses them again (issue 34: `start` on
a running ticket hinted `resume`, which said "already running").

`STEPS` holds, for each phase (and, where it matters, whether an orchestrator runs the ticket),
the command lines that carry it on and a line saying why. `REFUSED` holds, for each verb and
each phase it refuses, the message; its hint is always the step of the ticket's state, taken
from `STEPS`. `close` refuses in no phase (it ends a ticket wherever it stands; a second close
changes nothing), so it has no rows.

Standard library and handoff's base only: the commands' refusals and `status` read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from handoff.errors import Busy, UsageError
from handoff.phases import Phase


@dataclass(frozen=True)
class Command:
    """A command line that carries a ticket on: `{ticket}` stands for its id; TEXT and ROLE
    are the person's to fill in."""

    line: str
    #: what it does, said after it in parentheses ('' when the line says it)
    does: str = ""

    def text(self, ticket: str) -> str:
        line = self.line.format(ticket=ticket)
        return f"{line} ({self.does})" if self.does else line


@dataclass(frozen=True)
class Step:
    """What a person does next in one state of a ticket, and why."""

    #: one line: why this is next (`{ticket}` and `{folder}`: the ticket's folder)
    why: str
    #: the command lines that carry it on, any one of them; () when none does
    commands: tuple[Command, ...] = ()
    #: the board's mark on a ticket that waits for its person ('' when it does not)
    needs: str = ""

    def next(self, ticket: str) -> str:
        """The command lines, as `status` shows them after `next:`."""
        return " or ".join(command.text(ticket) for command in self.commands)

    def hint(self, ticket: str, folder: Path | str) -> str:
        """Why, then what: the hint of every refusal in this state."""
        why = self.why.format(ticket=ticket, folder=folder)
        return f"{why}: {self.next(ticket)}" if self.commands else why


#: a state of a ticket as far as what comes next goes: its phase, and whether an orchestrator
#: runs it (None: the step is the same either way, or no orchestrator runs in that phase)
Where = tuple[Phase, bool | None]

RESUME = Command("handoff resume {ticket}")
ATTACH = Command("handoff attach {ticket}", "watch it")
RECYCLE = Command("handoff recycle {ticket} ROLE", "a stuck peer, started afresh on its brief")
CLOSE = Command("handoff close {ticket}")
#: the phases whose orchestrator carries the ticket on by itself: what comes next depends on
#: whether one runs
CARRIED = (Phase.PLANNING, Phase.WAITING, Phase.QUEUED, Phase.IMPLEMENTING, Phase.TESTING,
           Phase.GATING, Phase.REVIEWING)
_AT_WORK = Step("it is at work, its orchestrator carries it on by itself", (ATTACH, RECYCLE))

STEPS: dict[Where, Step] = {
    (Phase.AWAITING_APPROVAL, None): Step(
        "its plan is waiting for approval",
        (Command("handoff plan {ticket}", "shows it, with what it was grounded in: approve, "
                 "edit, redraft or refuse it there"),
         Command("handoff resume {ticket} --yes", "approves it and starts the loop")),
        needs="approve"),
    (Phase.NEEDS_HUMAN, None): Step(
        "it waits for a person's answer (its reason says to what)",
        (Command("handoff answer {ticket} TEXT"),), needs="answer"),
    (Phase.PASSED, None): Step(
        "it passed review (its final report: {folder}/final-report.md)",
        (Command("handoff finish {ticket}", "merges it"), CLOSE)),
    (Phase.ESCALATED, None): Step(
        "it stopped short of a pass (its final report says why: {folder}/final-report.md)",
        (Command("handoff resume {ticket} --more-rounds 1", "at a round or gate limit"), CLOSE),
        needs="escalated"),
    (Phase.CLOSED, None): Step(
        "it is closed; its record stays in {folder} (final-report.md, transcripts/): to work "
        "on it again, start a new ticket"),
    **{(phase, False): Step("no orchestrator runs it (it was stopped, or cut off)", (RESUME,))
       for phase in CARRIED},
    (Phase.WAITING, True): Step(
        "its orchestrator waits for the tickets it starts after to pass, then starts it",
        (ATTACH,)),
    (Phase.QUEUED, True): Step(
        "its orchestrator waits for a free slot (max_parallel), then starts it", (ATTACH,)),
    (Phase.PLANNING, True): Step(
        "its planner drafts the plan from the ticket's text; the plan then waits for your "
        "approval", (ATTACH,)),
    (Phase.IMPLEMENTING, True): _AT_WORK,
    (Phase.TESTING, True): _AT_WORK,
    (Phase.GATING, True): Step(
        "its orchestrator runs the gate (the plan's tests), then carries it on", (ATTACH,)),
    (Phase.REVIEWING, True): _AT_WORK,
}


def step(phase: str, running: bool) -> Step:
    """The step for a ticket in phase, its orchestrator running or not."""
    return STEPS.get((Phase(phase), running)) or STEPS[(Phase(phase), None)]


def next_step(phase: str, ticket: str, running: bool = False) -> str:
    """The command lines that carry the ticket on ('' when none does: a closed ticket)."""
    return step(phase, running).next(ticket)


def hint(phase: str, ticket: str, folder: Path | str, running: bool) -> str:
    return step(phase, running).hint(ticket, folder)


class Verb(StrEnum):
    """The commands that refuse a ticket by where it stands."""

    #: a new ticket under an id that is taken
    START = "start"
    RESUME = "resume"
    MORE_ROUNDS = "resume --more-rounds"
    ONTO = "resume --onto"
    ANSWER = "answer"
    #: and every command that needs the ticket's tmux session (recycle without one)
    ATTACH = "attach"
    #: in a phase its role works in, only a role of another kind is refused
    RECYCLE = "recycle"
    FINISH = "finish"
    #: the board's approve (`resume --yes` approves only a plan that waits, and goes on)
    APPROVE = "approve"
    #: a record deleted: only a closed ticket's (its worktrees gone, no peer left)
    FORGET = "forget"


def _but(verb: Verb, message: str, *accepted: Phase) -> dict[tuple[Verb, Phase], str]:
    """verb refused with message in every phase but the accepted ones."""
    return {(verb, phase): message for phase in Phase if phase not in accepted}


#: for each verb and each phase it refuses, the message (`{ticket}`, `{phase}`, and the verb's
#: own fields: `{role}`); the hint is the step of the ticket's state
REFUSED: dict[tuple[Verb, Phase], str] = {
    **_but(Verb.START, "ticket {ticket} already exists in this repo (phase {phase})"),
    (Verb.RESUME, Phase.AWAITING_APPROVAL): "{ticket} is waiting for approval",
    (Verb.RESUME, Phase.PASSED): "{ticket} has passed, nothing to resume",
    (Verb.RESUME, Phase.ESCALATED): "{ticket} has escalated, nothing to resume",
    (Verb.RESUME, Phase.CLOSED): "{ticket} is closed, nothing to resume",
    **_but(Verb.MORE_ROUNDS, "{ticket} is {phase}, not escalated: --more-rounds only carries "
           "on a ticket that stopped at its round or gate limit", Phase.ESCALATED),
    **_but(Verb.ONTO, "{ticket} is {phase}: only a ticket that passed or escalated is carried "
           "onto a branch", Phase.PASSED, Phase.ESCALATED),
    **_but(Verb.ANSWER, "{ticket} is not waiting for a person (phase {phase})",
           Phase.NEEDS_HUMAN),
    **_but(Verb.ATTACH, "the peers of {ticket} are not running"),
    **_but(Verb.RECYCLE, "the {role} of {ticket} has no work in progress (phase {phase}); "
           "there is nothing to recycle"),
    **_but(Verb.FINISH, "{ticket} is {phase}, not passed: only a ticket that passed review is "
           "merged", Phase.PASSED),
    **_but(Verb.APPROVE, "{ticket} has no plan waiting for approval (phase {phase})",
           Phase.AWAITING_APPROVAL),
    **_but(Verb.FORGET, "{ticket} is {phase}, not closed: only a closed ticket's record is "
           "forgotten", Phase.CLOSED),
}
#: what a verb adds after a step that names a command: its own other way
ALSO = {Verb.START: "or pick a new id"}
ALREADY_RUNNING = "an orchestrator (pid {pid}) is already running {ticket}"


def refused(verb: Verb, phase: str, ticket: str, folder: Path | str, running: bool,
            **fields: object) -> UsageError:
    """The refusal of verb for a ticket in phase: its message, and the step of the ticket's
    state as its hint."""
    message = REFUSED[(verb, Phase(phase))].format(ticket=ticket, phase=phase, **fields)
    found = step(phase, running)
    also = ALSO.get(verb, "") if found.commands else ""
    return UsageError(message, found.hint(ticket, folder) + (f", {also}" if also else ""))


def already_running(phase: str, ticket: str, folder: Path | str, pid: int) -> Busy:
    """A second orchestrator refused, in any phase: the hint is the step of a running ticket."""
    return Busy(ALREADY_RUNNING.format(pid=pid, ticket=ticket), hint(phase, ticket, folder, True))
