"""`handoff resume TICKET --more-rounds N`: an escalated ticket that stopped at its round or
gate limit carried on, every limit given room for N more rounds, the next round briefed with
the open findings (or the gate's failure)."""

from __future__ import annotations

import getpass
from dataclasses import dataclass

from handoff.errors import UsageError
from handoff.loop import rules
from handoff.loop.context import TicketContext
from handoff.loop.gating import gate_note
from handoff.loop.workspace import Workspace
from handoff.machinery.ticket_branch import branch_name
from handoff.next_steps import Verb, refused
from handoff.operations.standing import recovered_state
from handoff.phases import Phase
from handoff.protocol import reports
from handoff.protocol.ledger import Ledger
from handoff.record.lock import TicketLock, holder
from handoff.record.ticket import State, TicketDir
from handoff.role import Kind


def check_more_rounds(tdir: TicketDir, more: int) -> None:
    """The refusals that need no lock: a count below one, a ticket that is not escalated."""
    if more < 1:
        raise UsageError(f"--more-rounds must be at least 1 (got {more})",
                         f"handoff resume {tdir.ticket} --more-rounds 1")
    phase = recovered_state(tdir).state.phase
    if phase == Phase.ESCALATED:
        return
    raise refused(Verb.MORE_ROUNDS, phase, tdir.ticket, tdir.path,
                  holder(tdir.lock_file) is not None)


@dataclass(frozen=True)
class Bound:
    """The limit an escalated ticket stopped at, and what its next round must be told (the
    open findings go with it from the ledger)."""

    name: str  # "max-rounds" or "max-gate-bounces"
    notes: list[tuple[str, str]]


def bound_hit(ws: Workspace, state: State) -> Bound | None:
    """Which limit stopped the ticket (handoff.loop.rules.bound_hit), read from its state and
    its last round's record; None when it escalated for another reason."""
    n = str(state.round)
    earlier = {key for r, keys in state.findings.items() if r != n for key in keys}
    ledger = _ledger(ws, state)
    repeated = bool(earlier & set(state.findings.get(n, []))) or \
        ledger.twice_not_fixed() is not None
    name = rules.bound_hit(state.verdicts.get(n), state.gates.get(n), state.reviews,
                           state.gate_bounces, limits_of(state), repeated)
    if name is None:
        return None
    return Bound(name, [_last_gate_note(ws, state)] if name == "max-gate-bounces" else [])


def limits_of(state: State) -> rules.Limits:
    return rules.Limits(state.max_rounds, state.max_gate_bounces)


def _ledger(ws: Workspace, state: State) -> Ledger:
    """The ticket's ledger; for a ticket from before the ledger, its last review's must-fixes
    as one."""
    ledger = Ledger.of(state.ledger)
    n = state.round
    if ledger.entries or str(n) not in state.verdicts:
        return ledger
    path = ws.tdir.report("reviewer", n)
    report, _ = reports.parse(path.read_text(encoding="utf-8"), Kind.REVIEWER) \
        if path.exists() else (None, [])
    return ledger.merged(n, [("reviewer", report)]) if report else ledger


def _last_gate_note(ws: Workspace, state: State) -> tuple[str, str]:
    """The note the failed gate would have sent had it not escalated, from its log
    (`$ command`, `# cwd`, the output, `# summary`)."""
    log = ws.tdir.gate_log(state.round)
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines() if log.exists() else []
    summary = lines[-1][2:] if lines and lines[-1].startswith("# ") else "the gate failed"
    return gate_note(summary, state.commit_of(state.round), log, "\n".join(lines[2:-1]))


def extend(ws: Workspace, more: int, by: str = "hand") -> str:
    """Carry an escalated ticket on for `more` rounds: every limit gets room for that many more
    rounds from where the ticket stands, and the next round starts as a normal one would, its
    brief carrying the open findings (or the gate failure). The escalated final report is kept
    as final-report.escalated-N.md. Returns a note saying what was done."""
    tdir = ws.tdir
    check_more_rounds(tdir, more)
    with TicketLock(tdir.lock_file):  # no orchestrator may start while the limits change
        state = ws.state()
        bound = bound_hit(ws, state)
        if bound is None:
            raise UsageError(
                f"{state.ticket} escalated without reaching a limit ({state.reason}): "
                "--more-rounds raises its round and gate limits, and neither was reached",
                f"read {tdir.final_report}; start a new ticket from its branch "
                f"{state.branch or branch_name(state.ticket)}, or 'handoff close "
                f"{state.ticket}'")
        before = {"max_rounds": state.max_rounds, "max_gate_bounces": state.max_gate_bounces}
        after = rules.extended(limits_of(state), state.reviews, state.gate_bounces, more)
        state.max_rounds, state.max_gate_bounces = after.max_rounds, after.max_gate_bounces
        state.ledger = _ledger(ws, state).records()  # the open findings go on with it
        tdir.save(state)
        kept = tdir.escalated_report(state.round)
        if tdir.final_report.exists():
            tdir.final_report.replace(kept)
        tdir.events.append("more-rounds", round=state.round, by=by, user=_user(), more=more,
                           bound=bound.name, before=before,
                           after={"max_rounds": state.max_rounds,
                                  "max_gate_bounces": state.max_gate_bounces},
                           final_report=kept.name if kept.exists() else "")
        TicketContext(ws).apply(rules.next_round(bound.notes))
    return (f"{state.ticket} had stopped at {bound.name}; {more} more round(s): max-rounds "
            f"{before['max_rounds']} -> {state.max_rounds}, max-gate-bounces "
            f"{before['max_gate_bounces']} -> {state.max_gate_bounces}; round {state.round + 1} "
            "starts with the open findings")


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container): the event says "hand"
        return ""
