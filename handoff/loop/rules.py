"""The loop's rules: what follows a report, a gate, a rejection, a budget, an answer, and the
limits a ticket stops at. State and inputs in, a `Move` out: pure, so each rule is a unit test.

`Orchestrator` waits and acts; every "what now" it asks is answered here, and so are the
questions `resume --more-rounds` asks afterwards (which limit stopped the ticket, how far the
limits move).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from handoff.phases import AT_WORK, WORKING, Phase
from handoff.protocol.ledger import Ledger
from handoff.protocol.reports import Finding
from handoff.role import Kind
from handoff.verdicts import GateOutcome, Status, Verdict

#: reports rejected in a ticket before a person is asked to look
MAX_REJECTIONS = 3
#: the answers that let a ticket's change of control files stand
ALLOW_WORDS = ("allow", "allowed", "yes", "go", "ok", "approve", "approved")

Note = tuple[str, str]
#: the title of the note a person's answer becomes in the next round's briefs
ANSWERED = "A person answered"


@dataclass(frozen=True)
class Move:
    """Where the ticket goes, and why.

    next_round: the implementer's next round starts, its brief carrying the ledger's open
    findings and notes (titled feedback: a failed gate, a rejected report, an answer).
    after_answer: for needs-human, the phase a person's answer carries the same round on in
    ("" : the answer starts the implementer's next round)."""

    phase: Phase
    reason: str = ""
    next_round: bool = False
    notes: tuple[Note, ...] = ()
    after_answer: str = ""
    #: for queued, the phase the ticket goes back to once it has a slot
    back_to: str = ""


def next_round(notes: Sequence[Note] = ()) -> Move:
    """The implementer's next round (its brief carries the ledger's open findings and notes)."""
    return Move(Phase.IMPLEMENTING, next_round=True, notes=tuple(notes))


def plan_drafted(draft: int, approved: bool, after: Sequence[str]) -> Move:
    """The planner filed a plan that validated: a person approves it, unless the ticket was
    started with --yes (then it goes to work, or waits for the tickets it starts after)."""
    if not approved:
        return Move(Phase.AWAITING_APPROVAL, f"the planner drafted the plan (draft {draft}): "
                    "read it, then approve it")
    if after:
        return Move(Phase.WAITING, f"the planner's plan (draft {draft}) approved by --yes; it "
                    f"waits for {', '.join(after)}")
    return Move(Phase.IMPLEMENTING, f"the planner's plan (draft {draft}) approved by --yes")


def ask(reason: str, after_answer: str = "") -> Move:
    """A person decides; their answer carries the ticket on (in after_answer's phase)."""
    return Move(Phase.NEEDS_HUMAN, reason, after_answer=after_answer)


def plan_changed(plan: str, ticket: str, phase: Phase) -> Move:
    """The plan changed after a person approved it: handoff runs no plan nobody approved."""
    return ask(f"{plan} changed after it was approved: handoff runs no plan nobody approved. "
               f"Put the approved plan back, or read the change and 'handoff answer {ticket} "
               f"\"approved\"' to approve the plan as it is now", after_answer=phase)


def no_slot(phase: Phase, why: str) -> Move:
    """A phase at work found every slot of the machine taken: the ticket queues, to go back to
    that phase once it has one."""
    return Move(Phase.QUEUED, why, back_to=phase)


def got_slot(queued_for: str, limit: int) -> Move:
    """A queued ticket got a slot: back to the phase it queued from (the implementer's, for a
    record that names none a slot is held in)."""
    back = Phase(queued_for) if queued_for in AT_WORK else Phase.IMPLEMENTING
    return Move(back, f"it got a slot (max_parallel {limit})")


def started_after(reason: str, base: str) -> Move:
    """Every ticket it starts after has passed: it starts from their merged work."""
    return Move(Phase.IMPLEMENTING, f"{reason}: it starts from their work ({base})")


def after_unmet(reason: str, ticket: str) -> Move:
    """A ticket it starts after will not pass (escalated, closed unmerged): a person decides."""
    return ask(f"{reason}: it was to start from that work. 'handoff answer {ticket} go' starts "
               f"it from its base as it is, 'handoff close {ticket}' ends it",
               after_answer=Phase.IMPLEMENTING)


def after_conflicts(conflicts: Sequence[str], ticket: str) -> Move:
    """The passed work of the tickets it starts after does not merge: a person decides."""
    return ask(f"the work it starts after does not merge: conflicts in {'; '.join(conflicts)}. "
               f"'handoff answer {ticket} go' starts it from its base alone", Phase.IMPLEMENTING)


def next_tester(testers: Sequence[str], done: Collection[str]) -> str | None:
    """The tester whose turn it is: the first, in the team's order, not done this round."""
    return next((t for t in testers if t not in done), None)


def after_work(kind: Kind, role: str, status: str, question: str,
               next_tester: str | None) -> Move:
    """The implementer's or a tester's report was accepted: a blocked one goes to a person;
    else the next tester works, or the gate runs."""
    if status == Status.BLOCKED:
        return ask(f"the {role} is blocked: {question}")
    if next_tester is not None:
        return Move(Phase.TESTING, f"{next_tester} writes tests" if kind is Kind.IMPLEMENTER
                    else f"{role} is done; {next_tester} writes tests")
    return Move(Phase.GATING)


def round_tested() -> Move:
    """Every tester of the round reported (before a crash, say): the gate runs."""
    return Move(Phase.GATING, "every tester of the round reported")


def gate_skipped() -> Move:
    """Nothing to run at the gate (no test command, no scanner): the reviewers judge."""
    return Move(Phase.REVIEWING, "the plan names no test command")


def gate_passes(test_passed: bool | None, scanners_block: bool) -> bool:
    """The gate passes when its test command passed (None: the plan names none) and no
    required scanner failed."""
    return test_passed is not False and not scanners_block


def after_gate(passed: bool, bounces: int, max_bounces: int, summary: str,
               notes: Sequence[Note]) -> Move:
    """bounces: the failed gates before this one. A pass goes to the reviewers; a failure goes
    back to the implementer with notes, or escalates at the limit."""
    if passed:
        return Move(Phase.REVIEWING)
    if bounces + 1 >= max_bounces:
        return Move(Phase.ESCALATED, f"the verification gate failed {bounces + 1} times: "
                                     f"{summary}")
    return next_round(notes=notes)


def gate_void(changed: str, ticket: str) -> Move:
    """The gate passed in a checkout that changed while it ran: nobody's pass."""
    return ask(f"the gate passed, but its checkout changed while it ran ({changed}): its pass "
               f"is not taken. Look at the gate's worktree (a peer may have written into it), "
               f"then 'handoff answer {ticket} \"go\"' runs the gate again on a reset checkout",
               after_answer=Phase.GATING)


def missing_scanners(names: Sequence[str], fixes: Sequence[str]) -> Move:
    """A required scanner is not installed: the gate cannot judge the commit, and no round of
    the implementer's can mend that."""
    return ask(f"the gate stopped: required scanner(s) {', '.join(names)} not installed. "
               + " ".join(fixes), after_answer=Phase.GATING)


def protected(files: Sequence[str], round_: int, ticket: str) -> Move:
    shown = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
    return ask(f"round {round_}'s commit changes control files, which steer handoff or the "
               f"peers and which the plan does not list under may_change: {shown}. 'handoff "
               f"answer {ticket} allow' lets them stand and runs the gate; any other answer "
               "goes to the implementer as its next round (e.g. \"put CLAUDE.md back\")",
               after_answer=Phase.GATING)


def round_verdict(verdicts: Mapping[str, str]) -> str:
    """The round's verdict: pass only when every reviewer passed."""
    return Verdict.PASS if all(v == Verdict.PASS for v in verdicts.values()) else Verdict.FAIL


def repeated(raised: Sequence[Finding], earlier: Collection[str]) -> Finding | None:
    """The first must-fix raised this round that an earlier round raised too (earlier: their
    keys): the implementer could not fix it, and asking again would not converge."""
    return next((f for f in raised if f.key() in earlier), None)


def after_reviews(verdicts: Mapping[str, str], ledger: Ledger, repeated: Finding | None,
                  reviews: int, max_rounds: int) -> Move:
    """Every reviewer of the round reported (verdicts: role → pass|fail; ledger: with this
    round merged in; repeated: a must-fix raised again that an earlier round raised; reviews:
    the review rounds so far, this one included). Pass only when every reviewer passed."""
    if round_verdict(verdicts) == Verdict.PASS:
        return Move(Phase.PASSED, "every reviewer passed it" if len(verdicts) > 1 else "")
    if repeated is not None:
        return Move(Phase.ESCALATED, "the same must-fix came back: " + repeated.render())
    stuck = ledger.twice_not_fixed()
    if stuck is not None:
        return Move(Phase.ESCALATED, f"a must-fix was answered not-fixed in two rounds: "
                                     f"{stuck.attributed()}")
    if reviews >= max_rounds:
        return Move(Phase.ESCALATED, f"still failing after {reviews} review round(s) "
                                     "(--max-rounds)")
    return next_round()


def after_forgery(rejections: int, report: str, why: str) -> Move | None:
    """A report that did not come from its peer was set aside (rejections: counted with it);
    too many go to a person, else the ticket waits on (None)."""
    if rejections > MAX_REJECTIONS:
        return ask(f"{rejections} reports were rejected; the last: {report} {why}")
    return None


def after_rejection(kind: Kind, rejections: int, problems: Sequence[str]) -> Move | None:
    """A report was not taken (rejections: counted with it). Too many go to a person; an
    implementer's next round carries the problems; another peer starts afresh on its brief
    (None: the ticket stays where it is)."""
    if rejections > MAX_REJECTIONS:
        return ask(f"{rejections} reports were rejected; the last problems: "
                   + "; ".join(problems))
    if kind is Kind.IMPLEMENTER:
        return next_round(notes=[("Your last report was not accepted",
                                  "".join(f"- {p}\n" for p in problems))])
    return None


def relaunches_spent(role: str, relaunches: int, max_relaunches: int) -> str:
    """Why a peer that died is not started again ('' while it may be)."""
    if relaunches <= max_relaunches:
        return ""
    return f"the {role} died {relaunches} times this round; see transcripts/, then 'handoff " \
           "answer' to carry on"


def over_budget(spent: str, limit: str, over: str, ticket: str, phase: str) -> Move:
    return ask(f"over budget: the peers used {spent}, the budget ({over}) is {limit}; 'handoff "
               f"answer {ticket} TEXT' carries it on (raise budget in the config to be asked "
               "again later)", after_answer=phase)


def allows(answer: str) -> bool:
    """A person's answer lets a ticket's changed control files stand."""
    return " ".join(answer.split()).lower().rstrip(".!") in ALLOW_WORDS


@dataclass(frozen=True)
class Answered:
    """What a person's answer does: the move, the control files it lets stand, and the note
    the same round's peers are told (none: the answer only carries the ticket on)."""

    move: Move
    allowed: tuple[str, ...] = ()
    note: str = ""


def after_answer(text: str, after_answer: str, asked_changes: Sequence[str]) -> Answered:
    """A person answered a ticket in needs-human. after_answer: the phase it carries the same
    round on in ('' : the implementer's next round, carrying the answer); asked_changes: the
    control files it was asked about (an allowing answer lets them stand and runs the gate,
    any other goes to the implementer)."""
    allowed: tuple[str, ...] = ()
    if asked_changes:
        if allows(text):
            allowed = tuple(asked_changes)
        else:
            after_answer = ""
    if not after_answer:
        return Answered(next_round([(ANSWERED, text)]), allowed)
    # a peer of the same round is told the answer; gating has none to tell (a budget stop
    # after a report): there it only carries the ticket on
    note = text if after_answer in WORKING else ""
    return Answered(Move(Phase(after_answer), "answered: " + " ".join(text.split())[:200]),
                    allowed, note)


@dataclass(frozen=True)
class Limits:
    max_rounds: int
    max_gate_bounces: int


def bound_hit(verdict: str | None, gate: str | None, reviews: int, gate_bounces: int,
              limits: Limits, repeated: bool) -> str | None:
    """Which limit an escalated ticket stopped at ("max-gate-bounces", "max-rounds"), read
    from its last round (verdict, gate: its results); None when it escalated for another
    reason (the same must-fix came back, a finding twice not fixed)."""
    if gate == GateOutcome.FAIL and gate_bounces >= limits.max_gate_bounces:
        return "max-gate-bounces"
    if verdict not in (None, Verdict.PASS) and reviews >= limits.max_rounds and not repeated:
        return "max-rounds"
    return None


def extended(limits: Limits, reviews: int, gate_bounces: int, more: int) -> Limits:
    """Every limit gets room for `more` rounds from where the ticket stands."""
    return Limits(max(limits.max_rounds, reviews + more),
                  max(limits.max_gate_bounces, gate_bounces + more))
