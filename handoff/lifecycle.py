"""What a person does to a ticket, as plain functions: create, approve, answer, recycle, stop,
close, and the status rows. The CLI only parses arguments and renders these results.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handoff import config as config_mod
from handoff import plan as plan_mod
from handoff import tools
from handoff.doctor import ready_to_start
from handoff.errors import Busy, HandoffError, MissingTool, NotFound, UsageError
from handoff.lock import holder
from handoff.peers import ORCHESTRATOR_WINDOW, self_argv, session_name, with_env
from handoff.repo import Repo
from handoff.store import atomic_write, validate_ticket_id
from handoff.ticket import State, TicketDir, all_tickets, find, ticket_dir
from handoff.tmux import Tmux, socket_name
from handoff.workspace import Workspace, check_role


@dataclass(frozen=True)
class NewTicket:
    ticket: str
    repo: Path
    plan_text: str
    summary: str = ""
    base: str = "HEAD"
    max_rounds: int | None = None
    socket: str | None = None


def create(home: Path, new: NewTicket) -> Workspace:
    """Validate everything, then write the ticket directory (phase awaiting-approval)."""
    ticket = validate_ticket_id(new.ticket)
    too_old = tools.problems()
    if too_old:
        raise MissingTool("; ".join(too_old), "install or upgrade it, then run the command again")
    repo = Repo.at(new.repo)
    cfg = config_mod.load(home, repo.top)
    plan = plan_mod.parse(new.plan_text, "the plan")
    ready_to_start(cfg, repo.top)
    tmux = Tmux(new.socket or socket_name(), home)
    base_commit = repo.resolve(new.base)
    tdir = ticket_dir(home, repo.key, ticket)
    if tdir.state_file.exists():
        phase = tdir.load().phase
        raise UsageError(f"ticket {ticket} already exists in this repo (phase {phase})",
                         f"continue it with 'handoff resume {ticket}', or pick a new id")
    max_rounds = new.max_rounds or cfg.max_rounds
    if max_rounds < 1:
        raise UsageError("--max-rounds must be at least 1")
    tdir.path.mkdir(parents=True, exist_ok=True)
    title = new.summary or _title(plan.text) or f"Ticket {ticket}"
    atomic_write(tdir.ticket_md, f"# {ticket}\n\n{title.strip()}\n")
    atomic_write(tdir.plan_md, plan.text)
    state = State(ticket=ticket, repo=str(repo.top), repo_key=repo.key, base=new.base,
                  base_commit=base_commit, socket=tmux.socket,
                  session=session_name(ticket, repo.key), max_rounds=max_rounds)
    tdir.save(state)
    tdir.events.append("created", base=new.base, base_commit=base_commit, repo=str(repo.top))
    return Workspace(home=home, tdir=tdir, repo=repo, config=cfg)


def _title(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def approve(ws: Workspace) -> State:
    state = ws.state()
    if state.phase != "awaiting-approval":
        return state
    state.phase, state.round = "implementing", 1
    ws.tdir.save(state)
    ws.tdir.events.append("phase", round=1, **{"from": "awaiting-approval", "to": "implementing"},
                          reason="plan approved")
    return state


def open_ticket(home: Path, ticket: str, repo: Path | None) -> Workspace:
    """Find a ticket: in the given or current repo first, else anywhere if the id is unique."""
    validate_ticket_id(ticket)
    key = None
    try:
        key = Repo.at(repo or Path.cwd()).key
    except (UsageError, NotFound):
        if repo is not None:
            raise
    if key is not None:
        tdir = ticket_dir(home, key, ticket)
        if tdir.state_file.exists():
            return Workspace.open(home, tdir)
    return Workspace.open(home, find(home, ticket))


def run_in_window(ws: Workspace) -> str:
    """Run the orchestrator in the ticket's tmux window, so it outlives this terminal."""
    state = ws.state()
    peers = ws.peers(state)
    argv = with_env(ws.orchestrator_env(), self_argv(
        "resume", state.ticket, "--repo", str(ws.repo.top), "--foreground"))
    pane = peers.pane(ORCHESTRATOR_WINDOW)
    if pane is None and not peers.tmux.has_session(state.session):
        peers.ensure_session(ws.repo.top, argv)
    elif pane is None:
        peers.tmux.new_window(state.session, ORCHESTRATOR_WINDOW, argv, ws.repo.top)
    else:
        peers.tmux.respawn(pane.id, argv, ws.repo.top)
    return state.session


def answer(ws: Workspace, text: str) -> Path:
    state = ws.state()
    if state.phase != "needs-human":
        raise UsageError(f"{state.ticket} is not waiting for a person (phase {state.phase})")
    if not text.strip():
        raise UsageError("the answer is empty")
    number = state.answers_used + 1
    path = ws.tdir.answer(number)
    atomic_write(path, text.strip() + "\n")
    ws.tdir.events.append("answer", round=state.round, role="human", file=path.name)
    return path


def orchestrator_running(ws: Workspace) -> int | None:
    return holder(ws.tdir.lock_file)


def ensure_idle(ws: Workspace) -> None:
    """Refuse to start a second orchestrator (the lock would refuse it too, but later)."""
    pid = orchestrator_running(ws)
    if pid is not None:
        raise Busy(f"an orchestrator (pid {pid}) is already running {ws.tdir.ticket}",
                   f"watch it with 'handoff attach {ws.tdir.ticket}', or 'handoff stop' it")


def recycle(ws: Workspace, role: str) -> Path:
    """Kill the role's CLI and start it fresh on its current brief (transcript kept)."""
    check_role(role)
    state = ws.state()
    working = {"implementer": "implementing", "reviewer": "reviewing"}[role]
    if state.phase != working:
        raise UsageError(f"the {role} of {state.ticket} has no work in progress "
                         f"(phase {state.phase}); there is nothing to recycle",
                         "recycle a peer while it works on its round")
    brief = ws.latest_brief(role)
    if brief is None:
        raise UsageError(f"the {role} has not been briefed yet", "wait for its first round")
    if not ws.peers(state).tmux.has_session(state.session):
        raise UsageError(f"the peers of {state.ticket} are not running",
                         f"start them with 'handoff resume {state.ticket}'")
    ws.launch(state, role, brief)
    ws.tdir.events.append("recycle", round=state.round, role=role, by="hand", brief=str(brief))
    return brief


def stop(ws: Workspace) -> dict[str, Any]:
    """Stop the orchestrator and the peers; everything stays on disk for 'handoff resume'."""
    state = ws.state()
    pid = ws.stop_orchestrator()
    peers = ws.peers(state)
    left = [role for role in ("implementer", "reviewer") if peers.leave(ws.provider(role), role)]
    captured = []
    for role in ("implementer", "reviewer"):
        transcript = ws.tdir.transcript(role, state.round)
        if peers.capture(role, transcript):
            ws.keep_session(state, role, transcript)
            captured.append(role)
    stopped = peers.stop()
    ws.tdir.events.append("stopped", round=state.round, by="hand", orchestrator=pid, exited=left,
                          session=stopped)
    return {"orchestrator": pid, "session": stopped, "transcripts": captured, "exited": left}


def close(ws: Workspace, keep_worktrees: bool = False, force: bool = False) -> dict[str, Any]:
    """Stop everything, remove the worktrees (never silently losing work), keep the branch."""
    state = ws.state()
    wt = ws.worktrees
    if not keep_worktrees and not force:
        wt.ensure_clean(("implementer",))  # refuse before anything changes, peers included
    stopped = stop(ws) if state.phase != "closed" else {}
    kept: Path | None = None
    if force and not keep_worktrees:
        # --force consents to removing the work, yet a patch of it costs nothing to keep
        kept = ws.tdir.path / "transcripts" / "implementer-discarded-at-close.patch"
        if not wt.save_scratch(wt.path("implementer"), kept):
            kept = None
    scratch = ws.tdir.path / "transcripts" / "reviewer-scratch-close.patch"
    removed = [] if keep_worktrees else wt.remove_all(force=force, reviewer_scratch=scratch)
    state = ws.state()
    before = state.phase
    state.phase = "closed"
    ws.tdir.save(state)
    ws.tdir.events.append("phase", round=state.round, **{"from": before, "to": "closed"},
                          removed=removed, kept_worktrees=keep_worktrees)
    return {"ticket": state.ticket, "removed": removed, "branch": state.branch or ws.branch(),
            "stopped": stopped, "discarded_work": str(kept) if kept else None}


def status_row(tdir: TicketDir) -> dict[str, Any]:
    state = tdir.load()
    pid = holder(tdir.lock_file)
    return {
        "ticket": state.ticket, "repo": state.repo, "phase": state.phase, "round": state.round,
        "reviews": state.reviews, "gate_bounces": state.gate_bounces, "dir": str(tdir.path),
        "branch": state.branch, "commit": state.last_commit(), "reason": state.reason,
        "orchestrator": pid, "session": state.session, "socket": state.socket,
        "updated": state.updated,
    }


def status(home: Path, ticket: str | None = None, repo: Path | None = None) -> list[dict[str, Any]]:
    if ticket is not None:
        return [status_row(open_ticket(home, ticket, repo).tdir)]
    return [_row_or_problem(t) for t in all_tickets(home)]


def _row_or_problem(tdir: TicketDir) -> dict[str, Any]:
    """One broken ticket directory must not hide all the others from `status`."""
    try:
        return status_row(tdir)
    except HandoffError as exc:
        return {"ticket": tdir.ticket, "repo": "", "phase": "unreadable", "round": 0,
                "reviews": 0, "gate_bounces": 0, "dir": str(tdir.path), "branch": "",
                "commit": "", "reason": exc.message, "orchestrator": None, "session": "",
                "socket": "", "updated": ""}


def attach_argv(ws: Workspace, role: str | None) -> list[str]:
    state = ws.state()
    tmux = Tmux(state.socket, ws.home)
    if not tmux.has_session(state.session):
        raise UsageError(f"the peers of {state.ticket} are not running",
                         f"start them with 'handoff resume {state.ticket}'")
    if role is not None:
        pane = ws.peers(state).pane(role if role != "orchestrator" else ORCHESTRATOR_WINDOW)
        if pane is None:
            raise UsageError(f"{state.ticket} has no {role} window yet")
        tmux.run("select-window", "-t", pane.id)
    return tmux.attach_argv(f"={state.session}")
