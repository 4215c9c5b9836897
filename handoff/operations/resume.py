"""A ticket's orchestrator run in its tmux window, so it outlives the terminal: after `start`,
on `resume` (one ticket, or `--all`: every ticket a reboot or a kill cut off) and after an
answer. Carrying an escalated ticket on is handoff.operations.more_rounds."""

from __future__ import annotations

import time
from pathlib import Path

from handoff.errors import HandoffError
from handoff.loop.workspace import Workspace
from handoff.machinery.peers import ORCHESTRATOR_WINDOW, self_argv, with_env
from handoff.machinery.tmux import ServerGone
from handoff.next_steps import Verb, refused
from handoff.operations.approval import approve, sandbox_line
from handoff.operations.more_rounds import check_more_rounds, extend
from handoff.operations.opening import ensure_idle, restore_state
from handoff.operations.results import Running
from handoff.operations.standing import find_ticket
from handoff.phases import FINISHED, Phase
from handoff.record import slots
from handoff.record.lock import holder
from handoff.record.ticket import TicketDir, all_tickets

#: an orchestrator in its window yields the CPU to the person's commands (a `start` of many
#: tickets at once), less than its peers yield to it (handoff.config.PEER_NICE)
ORCHESTRATOR_NICE = 10

#: the phases a run carries on by itself: `resume --all` restarts a ticket left in one
CARRIED_ON = ("planning", "queued", "implementing", "testing", "gating", "reviewing", "waiting")


def open_to_resume(home: Path, ticket: str, repo: Path | None,
                   more_rounds: int | None = None) -> tuple[Workspace, list[str]]:
    """A ticket ready for `resume`: no orchestrator running, a readable state.json (put back
    from state.json.bak if need be) and something left to do; the notes say what was mended.
    more_rounds: first give an escalated ticket that many more rounds (`more_rounds`)."""
    tdir = find_ticket(home, ticket, repo)
    if more_rounds is not None:
        check_more_rounds(tdir, more_rounds)  # before anything is mended or started
    ensure_idle(tdir)
    notes = [note for note in (restore_state(tdir, rebuild=False), torn_note(tdir)) if note]
    ws = Workspace.open(home, tdir)
    if more_rounds is not None:
        notes.append(extend(ws, more_rounds))
    ensure_resumable(ws)
    return ws, notes


def resume_approved(home: Path, ticket: str, repo: Path | None,
                    more_rounds: int | None = None) -> Running:
    """`handoff resume TICKET --yes` (and the board's approve): the ticket opened to resume,
    its plan approved if it waits for that, its orchestrator run in its tmux window."""
    ws, notes = open_to_resume(home, ticket, repo, more_rounds)
    return run_approved(ws, tuple(notes))


def run_approved(ws: Workspace, notes: tuple[str, ...] = ()) -> Running:
    """ws approved if it waits for that, then run in its tmux window."""
    sandbox = ""
    if ws.state().phase == Phase.AWAITING_APPROVAL:
        approve(ws)
        sandbox = sandbox_line(ws)
    return Running(ws.tdir.ticket, run_in_window(ws), ws.tdir.path, sandbox, notes)


def run_in_window(ws: Workspace) -> str:
    """Run the orchestrator in the ticket's tmux window, so it outlives this terminal."""
    state = ws.state()
    peers = ws.peers(state)
    nice = ORCHESTRATOR_NICE if ws.config.peer_nice else 0
    argv = with_env(ws.orchestrator_env(), self_argv(
        "resume", state.ticket, "--repo", str(ws.repo.top), "--foreground"), ws.home, nice,
        owner=state.session)
    # said before it starts, so it always comes before the run's `orchestrator` event: until
    # that one, `status` says it is starting rather than hint a `resume` that would start it
    # again (handoff.operations.standing.starting)
    ws.tdir.events.append("starting", round=state.round, session=state.session)
    # new-session first: one tmux call for a ticket's first run (a `start`), where asking
    # for its panes first would be two; only a session already there is asked about
    if peers.tmux.new_session_unless_there(state.session, ORCHESTRATOR_WINDOW, argv,
                                           ws.repo.top, nice) is not None:
        return state.session
    try:  # one list-panes says all: no panes is no session (a session has a window)
        panes = peers.tmux.panes(state.session)
    except ServerGone:
        panes = {}
    pane = panes.get(ORCHESTRATOR_WINDOW)
    if not panes:  # gone since new-session found it
        peers.tmux.new_session(state.session, ORCHESTRATOR_WINDOW, argv, ws.repo.top, nice)
    elif pane is None:
        peers.tmux.new_window(state.session, ORCHESTRATOR_WINDOW, argv, ws.repo.top, nice)
    else:
        peers.tmux.respawn(pane.id, argv, ws.repo.top)
    return state.session


def torn_note(tdir: TicketDir) -> str:
    """A word on unreadable lines of events.jsonl (a torn last line after a crash)."""
    _, bad = tdir.events.read()
    if not bad:
        return ""
    return (f"events.jsonl has {len(bad)} unreadable line(s) (line {', '.join(map(str, bad[:5]))})"
            ": skipped, every other event is kept")


def ensure_resumable(ws: Workspace) -> None:
    """A finished ticket has nothing to resume: say so rather than start an orchestrator
    that ends at once in a fresh session (one with no final report yet is resumed to write
    it)."""
    state = ws.state()
    if state.phase == Phase.CLOSED or (state.phase in FINISHED and
                                       ws.tdir.final_report.exists()):
        raise refused(Verb.RESUME, state.phase, state.ticket, ws.tdir.path, running=False)


def left_behind(home: Path, repo_key: str | None = None,
                by_hand: list[TicketDir] | None = None) -> list[TicketDir]:
    """The tickets whose run was cut off (a reboot, a kill, a lost tmux server): in a phase a
    run carries on, and no orchestrator holds them. Not those waiting for a person (their
    approval or answer starts them), nor those a person stopped (`handoff stop`: they go on
    when that person says; by_hand, when given, gets them)."""
    found: list[tuple[bool, str, TicketDir]] = []
    for tdir in all_tickets(home, repo_key):
        try:
            phase = tdir.load().phase
        except HandoffError:
            continue  # `status` shows it unreadable, `resume TICKET` mends it by name
        if phase not in CARRIED_ON or holder(tdir.lock_file) is not None:
            continue
        if stopped_by_hand(tdir):
            if by_hand is not None:
                by_hand.append(tdir)
            continue
        found.append((phase == Phase.QUEUED, tdir.load().created, tdir))
    # the ones that were at work first, then the queue in its order: each is started once the
    # one before has its place (`in_line`), so the order survives the restart
    return [tdir for _, _, tdir in sorted(found, key=lambda f: (f[0], f[1], str(f[2].path)))]


def stopped_by_hand(tdir: TicketDir) -> bool:
    """Its last run was ended by a person's `handoff stop` (a `stopped` event of theirs since
    the last orchestrator started), not cut off."""
    events, _ = tdir.events.read()
    for event in reversed(events):
        if event.get("kind") == "stopped" and event.get("by") == "hand":
            return True
        if event.get("kind") == "orchestrator":
            return False
    return False


#: how long `resume --all` waits for a resumed ticket to take its slot or place in the queue
IN_LINE_BOUND = 20.0


def in_line(home: Path, tdir: TicketDir, bound: float = IN_LINE_BOUND) -> bool:
    """Wait until the ticket's new orchestrator holds a slot or a place in the queue (or has
    already finished with it); False after bound seconds."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        now = slots.standing(home)
        if any(h.ticket == str(tdir.path) for h in (*now.at_work, *now.waiting)):
            return True
        try:
            if tdir.load().phase not in CARRIED_ON:
                return True
        except HandoffError:
            pass
        time.sleep(0.05)
    return False
