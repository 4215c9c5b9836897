"""What a person does to a ticket, as plain functions: create, approve, answer, recycle, stop,
close, carry on with more rounds. The CLI and the board call these and render their results;
where a ticket stands (`status`) is read by handoff.operations.standing.
"""

from __future__ import annotations

import getpass
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import NamedTuple

from handoff import config as config_mod
from handoff.errors import Busy, HandoffError, MissingTool, UsageError
from handoff.inputs import PLAN_LIMIT, need_folder, read_text
from handoff.loop import after, notify, rules
from handoff.loop.context import TicketContext
from handoff.loop.gate import end_left
from handoff.loop.gating import gate_note
from handoff.loop.workspace import Workspace
from handoff.machinery import sandbox, tools
from handoff.machinery.peers import ORCHESTRATOR_WINDOW, self_argv, session_name, with_env
from handoff.machinery.ports import PortBook
from handoff.machinery.repo import Repo, short_sha
from handoff.machinery.repo_worktrees import WORKTREES_DIR
from handoff.machinery.ticket_branch import branch_name
from handoff.machinery.tmux import ServerGone, Tmux, socket_name
from handoff.machinery.worktrees import TicketWorktrees
from handoff.operations.doctor import ready_to_start
from handoff.operations.results import Closed, Running, Stopped
from handoff.operations.standing import find_ticket, recovered_state
from handoff.phases import FINISHED, Phase, awaited
from handoff.protocol import plan as plan_mod
from handoff.protocol import reports
from handoff.protocol.ledger import Ledger
from handoff.record import placed, slots
from handoff.record.lock import TicketLock, holder
from handoff.record.store import (
    atomic_write,
    file_digest,
    keep_private,
    private_dir,
    validate_ticket_id,
)
from handoff.record.ticket import State, TicketDir, all_tickets, ticket_dir
from handoff.role import IMPLEMENTER, Kind, check_name


@dataclass(frozen=True)
class NewTicket:
    ticket: str
    repo: Path
    plan_text: str
    summary: str = ""
    base: str = "HEAD"
    max_rounds: int | None = None
    socket: str | None = None
    #: take a slot over max_parallel rather than wait in the queue
    now: bool = False
    #: count the checkout's uncommitted changes for `Created.notes`
    notes: bool = True
    #: the tickets it builds on, beside its plan's `after:` (handoff.loop.after)
    after: tuple[str, ...] = ()
    #: the `after:` of each ticket of the same `start --plans` (they may name each other)
    batch: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class PlanToStart:
    ticket: str
    path: Path
    text: str


def read_plan(path: Path, label: str = "the plan") -> str:
    """A plan's text (a binary file, /dev/zero or an oversized one refused clearly)."""
    return read_text(path, PLAN_LIMIT, label)


def plans_to_start(paths: list[Path]) -> list[PlanToStart]:
    """`start --plans`: each plan with the ticket it starts (its frontmatter's `ticket:`, else
    its file name), all read and checked before any starts, so a mistake in the fifth does not
    leave four started and the rest not."""
    found: list[PlanToStart] = []
    seen: dict[str, Path] = {}
    for path in paths:
        text = read_plan(path, f"the plan {path}")
        plan = plan_mod.parse(text, str(path))
        ticket = plan.ticket or path.stem
        try:
            validate_ticket_id(ticket)
        except UsageError as exc:
            raise UsageError(f"{path}: {exc.message}" + ("" if plan.ticket else
                             " (taken from the file's name)"),
                             f"name the ticket in the plan's frontmatter (ticket: PROJ-12), or "
                             f"rename the file; {exc.hint}") from None
        if ticket in seen:
            raise UsageError(f"{seen[ticket]} and {path} both start ticket {ticket}",
                             "give one of them its own id: ticket: ID in its frontmatter")
        seen[ticket] = path
        found.append(PlanToStart(ticket, path, text))
    return found


def queue_note(ws: Workspace) -> str:
    """What `start` says when the ticket will wait for a slot ('' when one is free). The
    orchestrator decides; this only reads the queue, so it may be a moment out of date."""
    limit = ws.config.parallel
    now = slots.standing(ws.home, limit)
    if len(now.at_work) + len(now.waiting) < limit:
        return ""
    if ws.state().jumps_queue:
        return (f"{len(now.at_work)} of {limit} tickets at work (max_parallel): --now starts "
                "it anyway")
    return (f"{len(now.at_work)} of {limit} tickets at work (max_parallel): it waits in the "
            f"queue{f' behind {len(now.waiting)}' if now.waiting else ''} and starts by itself "
            "when a slot frees (handoff status shows its place)")


class Created(NamedTuple):
    workspace: Workspace
    #: what a person starting it should know (as `open_to_resume`'s notes): uncommitted
    #: changes in their checkout are not part of it
    notes: list[str]


def create(home: Path, new: NewTicket) -> Created:
    """Validate everything, then write the ticket directory (phase awaiting-approval)."""
    ticket = validate_ticket_id(new.ticket)
    keep_private()
    too_old = tools.problems()
    if too_old:
        raise MissingTool("; ".join(too_old), "install or upgrade it, then run the command again")
    repo = Repo.at(new.repo)
    need_folder(repo.top / WORKTREES_DIR / ticket, repo.top, "for the ticket's worktrees")
    cfg = config_mod.load(home, repo.top)
    plan = plan_mod.parse(new.plan_text, "the plan")
    ready_to_start(cfg, repo.top)
    tmux = Tmux(new.socket or socket_name(), home)
    checkout = repo.checkout() if new.base == "HEAD" or new.notes else None
    # HEAD from the status a person is told of anyway; rev-parse for a branch with no commit
    # yet (its clear error) and any other base
    base_commit = checkout.head if checkout and new.base == "HEAD" and checkout.head else \
        repo.resolve(new.base)
    tdir = ticket_dir(home, repo.key, ticket)
    if tdir.state_file.exists():
        phase = tdir.load().phase
        raise UsageError(f"ticket {ticket} already exists in this repo (phase {phase})",
                         _existing_hint(ticket, phase, tdir))
    refuse_stale(tdir)
    elsewhere = placed.load(home, ticket)
    if elsewhere is not None:  # ids are unique across this machine and its hosts
        raise UsageError(f"ticket {ticket} already runs on host {elsewhere.host}",
                         f"pick another id, or close it there: handoff close {ticket}")
    refuse_taken_branch(repo, ticket)
    after_ = list(dict.fromkeys((*plan.after, *new.after)))
    for name in after_:
        validate_ticket_id(name)
    after.check(home, repo.key, ticket, after_, dict(new.batch))
    max_rounds = new.max_rounds or cfg.max_rounds
    if max_rounds < 1:
        raise UsageError("--max-rounds must be at least 1")
    for folder in (home, tdir.path.parent, tdir.path):  # the user's alone, whatever the umask
        private_dir(folder)
    title = new.summary or _title(plan.text) or f"Ticket {ticket}"
    atomic_write(tdir.ticket_md, f"# {ticket}\n\n{title.strip()}\n")
    atomic_write(tdir.plan_md, plan.text)
    state = State(ticket=ticket, repo=str(repo.top), repo_key=repo.key, base=new.base,
                  base_commit=base_commit, socket=tmux.socket,
                  session=session_name(ticket, repo.key), max_rounds=max_rounds,
                  max_gate_bounces=cfg.max_gate_bounces, max_relaunches=cfg.max_relaunches,
                  team=cfg.team.records(), jumps_queue=new.now, after=after_)
    tdir.save(state)
    tdir.events.append("created", base=new.base, base_commit=base_commit, repo=str(repo.top))
    notes = [f"{checkout.changes} uncommitted change(s) in {repo.top} are not part of {ticket}: "
             f"it starts from {new.base} ({short_sha(base_commit)})"] \
        if new.notes and checkout and checkout.changes else []
    return Created(Workspace(home=home, tdir=tdir, repo=repo, config=cfg), notes)


def refuse_taken_branch(repo: Repo, ticket: str) -> None:
    """A new ticket makes its branch itself: one that is there already (a ticket's of an
    earlier life of this id, a person's, or one a peer of another ticket planted with a
    backdoor in it) is never taken over. Named, and nothing is changed."""
    tip = TicketWorktrees(repo, ticket).branch_tip()
    if tip:
        branch = branch_name(ticket)
        raise UsageError(f"branch {branch} already exists (at {short_sha(tip)}): a new ticket "
                         "starts its branch itself and never takes one over",
                         f"look at it ('git log {branch}'), then rename it ('git branch -m "
                         f"{branch} {branch}-old') or delete it, or pick another ticket id")


def refuse_stale(tdir: TicketDir) -> None:
    """A folder with files but no state.json is the record of an earlier ticket (its state was
    removed or lost): a new ticket there would take the old reports as its own. Refused, and
    nothing is moved or deleted: the person decides what the old record is worth."""
    if not tdir.path.is_dir():
        return
    entries = sorted(p.name for p in tdir.path.iterdir())
    if not entries:
        return
    shown = ", ".join(entries[:5]) + (", …" if len(entries) > 5 else "")
    backup = " (state.json.bak may hold its state: copy it to state.json to carry it on)" \
        if tdir.backup_file.exists() else ""
    raise UsageError(
        f"the folder of ticket {tdir.ticket}, {tdir.path}, holds an earlier record "
        f"({len(entries)} entries: {shown}) but no state.json",
        f"handoff deletes nothing: move it aside (mv '{tdir.path}' '{tdir.path}.old') or pick "
        f"another id{backup}")


def _title(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def _existing_hint(ticket: str, phase: str, tdir: TicketDir) -> str:
    """What to do with a ticket id that is taken, by where that ticket stands."""
    if phase == "closed":
        return f"it is closed (its record stays in {tdir.path}): pick a new id"
    if phase == "passed":
        return f"take it with 'handoff finish {ticket}', or pick a new id"
    if phase == "escalated":
        return f"give it more rounds with 'handoff resume {ticket} --more-rounds 1', or pick a new id"
    return f"continue it with 'handoff resume {ticket}', or pick a new id"


def approval_summary(ws: Workspace) -> list[str]:
    """What a person approves besides the plan's text: who runs, from where, how far, and
    with which powers (shown above the plan by `start`)."""
    state, plan = ws.state(), ws.plan()
    lines = []
    for role in state.roles.roles:
        provider = ws.provider(role.name)
        power = ("permissions bypassed: it acts without asking" if provider.mode == "bypass"
                 else f"permission mode {provider.mode}: it stops on each question")
        reach = provider.reaches(dict(os.environ))
        spec = ws.spec(role.name)
        what = role.name if role.name == role.kind else f"{role.name} ({role.kind}" + (
            f", {spec.focus}" if spec.focus else "") + ")"
        lines.append(f"{what}: {provider.name}{' (' + reach + ')' if reach else ''}; {power}")
    lines += independence(ws)
    if ws.config.scanners:
        lines.append("scanners: " + ", ".join(
            s.name + ("" if s.required else " (optional)") for s in ws.config.scanners))
    lines.append(f"base: {state.base} at {state.base_commit[:12]}; branch {branch_name(state.ticket)}")
    gate = " ".join(plan.test) if plan.test else "none (the plan names no test command)"
    lines.append(f"rounds: at most {state.max_rounds} review round(s); gate: {gate}")
    lines.append(sandbox_line(ws))
    return lines


def independence(ws: Workspace) -> list[str]:
    """A warning when every reviewer runs on the implementer's CLI: one model family reviewing
    its own work finds less (the review still runs)."""
    state = ws.state()
    implementer = ws.spec(IMPLEMENTER).provider
    if implementer in ("scripted", "command") or any(
            ws.spec(r).provider != implementer for r in state.roles.reviewers):
        return []
    return [f"note: every reviewer runs on {implementer}, the implementer's CLI: the review is "
            "not independent (a reviewer on another installed CLI finds more)"]


def sandbox_line(ws: Workspace) -> str:
    """The sandbox in force, in one line (UsageError for sandbox: on where it cannot be)."""
    found = ws.sandbox()
    if found is not None:
        return (f"sandbox: {found.why}: each peer writes only its worktree (the implementer "
                "and testers also the commits they make; handoff alone moves the branch), its "
                "CLI's state and its drafts; it sees no credentials, no other ticket, no other "
                "process; the network stays open")
    if ws.config.sandbox.mode == "off":
        return ("sandbox: off (your config): the peers run as you, with whatever your user can "
                "read and write; only what they commit on the branch is judged")
    return (f"sandbox: none, {sandbox.support().why}: the peers run as you, with whatever your "
            "user can read and write (handoff doctor says how to mend it)")


def approve(ws: Workspace) -> State:
    state = ws.state()
    if state.phase != "awaiting-approval":
        return state
    state.round = 1
    state.plan_digest = file_digest(ws.tdir.plan_md)
    if state.after:  # it starts once they have passed, from their work (the orchestrator)
        ws.tdir.move(state, Phase.WAITING, f"plan approved; it waits for {', '.join(state.after)}")
    else:
        ws.tdir.move(state, Phase.IMPLEMENTING, "plan approved")
    return state


def ask_for_approval(ws: Workspace) -> None:
    """Nobody answered the approval prompt (no terminal): the person is told the plan waits."""
    state = ws.state()
    notify.approval_wanted(state, ws.config.notify, ws.repo.top, lambda kind, **fields: (
        ws.tdir.events.append(kind, round=state.round, **fields)))


def open_ticket(home: Path, ticket: str, repo: Path | None) -> Workspace:
    """Find a ticket: in the given or current repo first, else anywhere if the id is unique."""
    return Workspace.open(home, find_ticket(home, ticket, repo))


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


def torn_note(tdir: TicketDir) -> str:
    """A word on unreadable lines of events.jsonl (a torn last line after a crash)."""
    _, bad = tdir.events.read()
    if not bad:
        return ""
    return (f"events.jsonl has {len(bad)} unreadable line(s) (line {', '.join(map(str, bad[:5]))})"
            ": skipped, every other event is kept")


def _gone_note(ws: Workspace) -> str:
    if not ws.repo_gone:
        return ""
    return (f"the repository {ws.repo.top} is gone, and the ticket's worktrees and branch with "
            f"it; the record stays in {ws.tdir.path}")


def run_in_window(ws: Workspace) -> str:
    """Run the orchestrator in the ticket's tmux window, so it outlives this terminal."""
    state = ws.state()
    peers = ws.peers(state)
    nice = ORCHESTRATOR_NICE if ws.config.peer_nice else 0
    argv = with_env(ws.orchestrator_env(), self_argv(
        "resume", state.ticket, "--repo", str(ws.repo.top), "--foreground"), ws.home, nice)
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


def answer_ticket(home: Path, ticket: str, repo: Path | None, text: str) -> tuple[Path, bool]:
    """`handoff answer`: file the answer, and start the orchestrator again (in its tmux window)
    when none runs to pass it on. (where it was filed, whether the orchestrator was started)"""
    ws = open_ticket(home, ticket, repo)
    path = answer(ws, text)
    if orchestrator_running(ws) is not None:
        return path, False
    run_in_window(ws)
    return path, True


def orchestrator_running(ws: Workspace) -> int | None:
    return holder(ws.tdir.lock_file)


def ensure_idle(tdir: TicketDir) -> None:
    pid = holder(tdir.lock_file)
    if pid is not None:
        raise Busy(f"an orchestrator (pid {pid}) is already running {tdir.ticket}",
                   f"watch it with 'handoff attach {tdir.ticket}', or 'handoff stop' it")


def ensure_resumable(ws: Workspace) -> None:
    """A finished ticket has nothing to resume: say so rather than start an orchestrator
    that ends at once in a fresh session."""
    state = ws.state()
    if state.phase == "closed":
        raise UsageError(f"{state.ticket} is closed, nothing to resume",
                         f"its record stays in {ws.tdir.path}; to work on it again, start a "
                         "new ticket")
    if state.phase in FINISHED and ws.tdir.final_report.exists():
        raise UsageError(f"{state.ticket} has {state.phase}, nothing to resume",
                         f"its final report is {ws.tdir.final_report}; 'handoff close "
                         f"{state.ticket}' removes its worktrees")


#: an orchestrator in its window yields the CPU to the person's commands (a `start` of many
#: tickets at once), less than its peers yield to it (handoff.config.PEER_NICE)
ORCHESTRATOR_NICE = 10

#: the phases a run carries on by itself: `resume --all` restarts a ticket left in one
CARRIED_ON = ("queued", "implementing", "testing", "gating", "reviewing", "waiting")


def left_behind(home: Path, repo_key: str | None = None) -> list[TicketDir]:
    """The tickets whose run was cut off (a reboot, a kill, a lost tmux server): in a phase a
    run carries on, and no orchestrator holds them. Not those waiting for a person: their
    approval or answer starts them."""
    found: list[tuple[bool, str, TicketDir]] = []
    for tdir in all_tickets(home, repo_key):
        try:
            phase = tdir.load().phase
        except HandoffError:
            continue  # `status` shows it unreadable, `resume TICKET` mends it by name
        if phase in CARRIED_ON and holder(tdir.lock_file) is None:
            found.append((phase == "queued", tdir.load().created, tdir))
    # the ones that were at work first, then the queue in its order: each is started once the
    # one before has its place (`in_line`), so the order survives the restart
    return [tdir for _, _, tdir in sorted(found, key=lambda f: (f[0], f[1], str(f[2].path)))]


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


def open_to_resume(home: Path, ticket: str, repo: Path | None,
                   more_rounds: int | None = None) -> tuple[Workspace, list[str]]:
    """A ticket ready for `resume`: no orchestrator running, a readable state.json (put back
    from state.json.bak if need be) and something left to do; the notes say what was mended.
    more_rounds: first give an escalated ticket that many more rounds (`more_rounds`)."""
    tdir = find_ticket(home, ticket, repo)
    if more_rounds is not None:
        _check_more_rounds(tdir, more_rounds)  # before anything is mended or started
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
    if ws.state().phase == "awaiting-approval":
        approve(ws)
        sandbox = sandbox_line(ws)
    return Running(ws.tdir.ticket, run_in_window(ws), ws.tdir.path, sandbox, notes)


def _check_more_rounds(tdir: TicketDir, more: int) -> None:
    """The refusals that need no lock: a count below one, a ticket that is not escalated."""
    if more < 1:
        raise UsageError(f"--more-rounds must be at least 1 (got {more})",
                         f"handoff resume {tdir.ticket} --more-rounds 1")
    phase = recovered_state(tdir).state.phase
    if phase == "escalated":
        return
    hint = {"passed": f"it passed: 'handoff finish {tdir.ticket}' merges it, 'handoff close "
                      f"{tdir.ticket}' ends it",
            "closed": "it is closed: start a new ticket to work on it again",
            "needs-human": f"it waits for a person: 'handoff answer {tdir.ticket} TEXT'",
            "awaiting-approval": f"its plan waits for approval: 'handoff resume {tdir.ticket} "
                                 "--yes'"}.get(phase, f"it is still running: 'handoff status "
                                                      f"{tdir.ticket}' shows where it stands")
    raise UsageError(f"{tdir.ticket} is {phase}, not escalated: --more-rounds only carries on a "
                     "ticket that stopped at its round or gate limit", hint)


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
    _check_more_rounds(tdir, more)
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


def recycle(ws: Workspace, role: str) -> Path:
    """Kill the role's CLI and start it fresh on its current brief (transcript kept)."""
    check_name(role)
    state = ws.state()
    working = awaited(state.roles.kind(role))
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
    made = ws.ensure_worktree(state, role)
    if made:
        ws.tdir.events.append("worktree", round=state.round, role=role, **made)
    marker = ws.tdir.recycling(role)
    atomic_write(marker, str(os.getpid()))
    try:
        ws.launch(state, role, brief)
    finally:
        marker.unlink(missing_ok=True)
    ws.tdir.events.append("recycle", round=state.round, role=role, by="hand", brief=str(brief))
    return brief


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


def close(ws: Workspace, keep_worktrees: bool = False, force: bool = False) -> Closed:
    """Stop everything, remove the worktrees (never silently losing work), keep the branch.
    With the repo gone there is nothing left to remove: the peers are stopped, the record kept."""
    state = ws.state()
    wt = ws.worktrees
    keep_worktrees = keep_worktrees or ws.repo_gone
    if not keep_worktrees and not force:
        wt.ensure_clean(("implementer",))  # refuse before anything changes, peers included
    stopped = stop(ws) if state.phase != "closed" else None
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
        ws.tdir.move(state, Phase.CLOSED, "closed by handoff close", removed=removed,
                     kept_worktrees=keep_worktrees, left=left, repo_gone=ws.repo_gone,
                     ports=ports)
    branch = state.branch or ws.branch()
    return Closed(state.ticket, ws.tdir.path, tuple(removed),
                  # a ticket closed before its plan was approved never had a branch
                  branch if not ws.repo_gone and ws.repo.branch_head(branch) else "",
                  stopped, kept, tuple(left), ws.repo_gone)


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
        tmux.bring_forward(pane.id)
    return tmux.attach_argv(f"={state.session}")
