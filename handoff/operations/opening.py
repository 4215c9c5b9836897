"""A ticket opened for a verb, the pieces every verb's module shares: found by its id, asked
whether an orchestrator holds it, a damaged state.json put back before one runs again."""

from __future__ import annotations

from pathlib import Path

from handoff.errors import UsageError
from handoff.loop.workspace import Workspace
from handoff.next_steps import already_running
from handoff.operations.standing import find_ticket, recovered_state
from handoff.record.lock import holder
from handoff.record.ticket import TicketDir


def open_ticket(home: Path, ticket: str, repo: Path | None) -> Workspace:
    """Find a ticket: in the given or current repo first, else anywhere if the id is unique."""
    return Workspace.open(home, find_ticket(home, ticket, repo))


def orchestrator_running(ws: Workspace) -> int | None:
    return holder(ws.tdir.lock_file)


def ensure_idle(tdir: TicketDir) -> None:
    """No orchestrator runs the ticket: a second is refused, with what to do while the first
    carries it on."""
    pid = holder(tdir.lock_file)
    if pid is not None:
        raise already_running(recovered_state(tdir).state.phase, tdir.ticket, tdir.path, pid)


def restore_state(tdir: TicketDir, rebuild: bool) -> str:
    """Before resume or close: put a readable state.json back when it is damaged, from
    state.json.bak or (rebuild: for close only) from the event log; the damaged file is kept as
    state.json.corrupt-N. Returns what was done ('' when state.json was fine)."""
    found = recovered_state(tdir)
    if found.source == "state.json":
        return ""
    if found.source == "events.jsonl" and not rebuild:
        raise UsageError(f"{found.problem}, and state.json.bak cannot be read either",
                         "the loop cannot carry on from the event log alone: 'handoff close "
                         f"{tdir.ticket}' ends the ticket (its branch and record are kept)")
    kept = tdir.set_aside() if tdir.state_file.exists() else None
    tdir.save(found.state)
    tdir.events.append("state-restored", round=found.state.round, source=found.source,
                       kept=kept.name if kept else "", problem=found.problem)
    return (f"{found.problem}: restored it from {found.source}"
            + (f"; the damaged file is kept as {kept.name}" if kept else ""))
