"""`handoff stop` and `handoff close`, from the ticket directory alone: state.json may be
unreadable and the repo may be gone. Stop keeps everything for `resume`; close also removes
the worktrees (never silently losing work) and keeps the branch and the record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from handoff.loop.gate import end_left
from handoff.loop.workspace import Workspace
from handoff.machinery.peers import forget_launches
from handoff.machinery.ports import PortBook
from handoff.next_steps import Verb, already_running, refused
from handoff.operations.opening import restore_state
from handoff.operations.results import Closed, Forgotten, Stopped
from handoff.operations.standing import find_ticket, recovered_state
from handoff.phases import Phase
from handoff.record.lock import holder
from handoff.record.ticket import State


def stop_ticket(home: Path, ticket: str, repo: Path | None) -> Stopped:
    """`handoff stop` from the ticket directory alone: state.json may be unreadable (the backup
    or the event log says where the peers run) and the repo may be gone."""
    tdir = find_ticket(home, ticket, repo)
    found = recovered_state(tdir)
    ws = Workspace.open(home, tdir, found.state, repo_may_be_gone=True)
    result = stop(ws, found.state)
    return replace(result, notes=tuple(note for note in (found.note, _gone_note(ws)) if note))


def stop(ws: Workspace, state: State | None = None) -> Stopped:
    """Stop the orchestrator and the peers; everything stays on disk for 'handoff resume'.
    state: the recovered state when state.json cannot be read."""
    state = state or ws.state()
    pid = ws.stop_orchestrator()
    end_left(ws.tdir, state.round, "handoff stop")  # a gate a killed orchestrator left running
    peers = ws.peers(state)
    # with the repo gone its config is too: which CLI a pane runs is unknown, so no keys
    roles = state.roles.names
    polite = () if ws.repo_gone else tuple(r for r in roles if r in ws.config.roles)
    left = peers.leave_all({role: ws.provider(role) for role in polite})
    captured = []
    for role in roles:
        transcript = ws.transcript_for(state, role)
        if peers.capture(role, transcript):
            ws.keep_session(state, role, transcript)
            captured.append(role)
    stopped = peers.stop()
    # a window ended before its launcher read its file leaves the environment it was given
    forget_launches(ws.home, state.session)
    ws.tdir.events.append("stopped", round=state.round, by="hand", orchestrator=pid, exited=left,
                          session=stopped)
    return Stopped(state.ticket, pid, stopped, tuple(captured), tuple(left))


def close_ticket(home: Path, ticket: str, repo: Path | None, keep_worktrees: bool = False,
                 force: bool = False) -> Closed:
    """`handoff close` from the ticket directory alone: a damaged state.json is put back from
    its backup (or the event log) first, and a repo that is gone has no worktrees to remove."""
    tdir = find_ticket(home, ticket, repo)
    restored = restore_state(tdir, rebuild=True)
    ws = Workspace.open(home, tdir, repo_may_be_gone=True)
    result = close(ws, keep_worktrees=keep_worktrees, force=force)
    return replace(result, notes=(*(note for note in (restored, _gone_note(ws)) if note), *(
        f"{path} was left in place: it is not a worktree handoff made" for path in result.left)))


def close(ws: Workspace, keep_worktrees: bool = False, force: bool = False,
          reason: str = "closed by handoff close") -> Closed:
    """Stop everything, remove the worktrees (never silently losing work), keep the branch.
    With the repo gone there is nothing left to remove: the peers are stopped, the record kept."""
    state = ws.state()
    wt = ws.worktrees
    keep_worktrees = keep_worktrees or ws.repo_gone
    if not keep_worktrees and not force:
        wt.ensure_clean(("implementer",))  # refuse before anything changes, peers included
    stopped = stop(ws) if state.phase != Phase.CLOSED else None
    ws.forget_logins()  # no CLI runs any more: the copies of the person's logins go
    kept: Path | None = None
    if force and not keep_worktrees:
        # --force consents to removing the work, yet a patch of it costs nothing to keep
        kept = ws.tdir.discarded("implementer")
        if not wt.save_scratch(wt.path("implementer"), kept):
            kept = None
    removed = [] if keep_worktrees else wt.remove_all(
        force=force, scratch=lambda name: ws.tdir.scratch_patch(name, "close"))
    # what was not handoff's worktree stays where it is, and is named
    left = [] if keep_worktrees else [str(p) for p in wt.left()]
    state = ws.state()
    # the worktrees' ports go back to the machine's book (kept worktrees included: their
    # ticket is over, and nothing of handoff's runs in them any more)
    ports = PortBook(ws.home).release(f"{ws.tdir.path}#")
    if state.phase != Phase.CLOSED:  # a second close changes nothing and says so
        ws.tdir.move(state, Phase.CLOSED, reason, removed=removed,
                     kept_worktrees=keep_worktrees, left=left, repo_gone=ws.repo_gone,
                     ports=ports)
    branch = state.branch or ws.branch()
    return Closed(state.ticket, ws.tdir.path, tuple(removed),
                  # a ticket closed before its plan was approved never had a branch
                  branch if not ws.repo_gone and ws.repo.branch_head(branch) else "",
                  stopped, kept, tuple(left), ws.repo_gone)


def _gone_note(ws: Workspace) -> str:
    if not ws.repo_gone:
        return ""
    return (f"the repository {ws.repo.top} is gone, and the ticket's worktrees and branch with "
            f"it; the record stays in {ws.tdir.path}")


def forget_ticket(home: Path, ticket: str, repo: Path | None) -> Forgotten:
    """`handoff forget`: delete a closed ticket's record, holding its lock so that no
    orchestrator starts on it meanwhile. Anything else is refused with where it stands: a
    ticket is closed (its worktrees and peers gone) before its history may go."""
    from handoff.operations.gc.records import delete_record

    tdir = find_ticket(home, ticket, repo)
    state = recovered_state(tdir).state
    if state.phase != Phase.CLOSED:
        raise refused(Verb.FORGET, state.phase, ticket, tdir.path,
                      holder(tdir.lock_file) is not None)
    if not delete_record(tdir):
        raise already_running(state.phase, ticket, tdir.path, holder(tdir.lock_file) or 0)
    return Forgotten(ticket, tdir.path, state.branch if state.commits else "")
