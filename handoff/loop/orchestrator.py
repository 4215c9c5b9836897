"""The ticket state machine. Resumable from the ticket directory alone.

A round is stages over the team's kinds: the implementer, then each tester in order, then the
gate (the plan's test command and the scanners, in a checkout of its own), then every reviewer
at once. What follows each stage is decided by handoff.loop.rules; this module waits for the
peers, watches them while they work, and acts.

Every step is idempotent: it looks at what is on disk (and what the peers' panes were started
for) before acting, so a `kill -9` at any point followed by `handoff resume` finishes the
ticket with nothing lost and no round done twice.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from handoff import trace
from handoff.errors import HandoffError, Tampered, UsageError
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.loop import (
    after,
    filer,
    metering,
    notify,
    rules,
    scanners,
    submission,
    summary,
    testcount,
    weakened,
)
from handoff.loop.baseline import BASE_ROUND as BASELINE_ROUND
from handoff.loop.baseline import Baseline
from handoff.loop.gate import GateResult, end_left_gate, excerpt, run_gate
from handoff.loop.monitor import Decision, PeerMonitor
from handoff.loop.rules import Move
from handoff.loop.submission import provenance, set_aside
from handoff.loop.testcount import Count
from handoff.loop.workspace import Workspace
from handoff.machinery import limits, reaper
from handoff.machinery.peers import Peers, self_argv
from handoff.machinery.repo import short_sha
from handoff.machinery.tmux import Pane, Patience, ServerGone, TmuxFailure
from handoff.machinery.watch import POLL_INTERVAL, Watcher
from handoff.machinery.worktrees import GATE
from handoff.phases import AT_WORK, FINISHED, Phase
from handoff.processes import alive
from handoff.protocol import briefs, protected, reports
from handoff.protocol.intake import Intake, Request, Verdict
from handoff.protocol.ledger import Entry, Ledger
from handoff.protocol.reports import Report
from handoff.providers.base import first_message, shown
from handoff.providers.screen import READY, STARTING
from handoff.providers.signals import STOP, read_signals
from handoff.record import durable, overlaps, slots, starts
from handoff.record.events import EventKind
from handoff.record.grants import Grants
from handoff.record.lock import TicketLock
from handoff.record.slots import Slot
from handoff.record.store import atomic_write, digest, file_digest
from handoff.record.ticket import State, TicketDir, brief_round, ticket_dir
from handoff.record.usage import over_budget, per_round
from handoff.role import DEFAULT, IMPLEMENTER, Kind, Team

#: a commit named in full (SHA-1, or SHA-256 for repositories that use it)
FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
TICK = 0.5
#: seconds a `handoff recycle` may take to start a peer afresh before its marker is stale
RECYCLE_GRACE = 60.0
SETTLE = 1.0
#: seconds between looks at a tester or reviewer that filed its report but is still in its turn
TURN_LOOK = 0.2
#: the key of the base's count among a ticket's test counts (State.tests_ran)
BASE = "base"
#: seconds between looks at the queue when nothing in its folder changed (every slot given
#: back and every waiter gone changes something there: this is only the fallback)
QUEUE_LOOK = 5.0
#: seconds the peers of a finished ticket are given to leave when asked, all together: a CLI
#: that saves its session on the way out (Claude Code) took over 3 s on a loaded machine, and
#: nothing waits on a finished ticket but its own orchestrator's exit
LEAVE_FINISHED = 10.0

#: where each recorded event is shown as it happens (a foreground run prints them)
EventSink = Callable[[dict[str, Any]], None]


class Stopped(Exception):
    """SIGTERM/SIGHUP/SIGINT: leave everything as it is for `handoff resume`."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


@dataclass
class PeerView:
    """The orchestrator's view of one running peer: its monitor and the last message sent."""

    monitor: PeerMonitor
    message: str
    since_ns: int
    #: the process it judges: another one in the pane was started by a `handoff recycle`
    pid: int = 0


@dataclass
class Awaited:
    """One peer whose report a wait is for."""

    role: str
    brief: Path
    report: Path
    patience: Patience
    #: when it is next looked at (time.monotonic(); 0: at once)
    look_at: float = 0.0
    #: why it waits for a person ('' while it works): the others go on meanwhile
    held: str = ""


def clip_words(text: str, words: int) -> str:
    """At most words words of text (the final report has a word budget)."""
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def signal_clock() -> int:
    """Now, for comparing with signal files' mtimes. File times come from a coarse clock that
    may lag a few milliseconds: a little slack keeps a hook that fired just after us."""
    return time.time_ns() - 20_000_000


def nudge_message(n: int, brief: Path) -> str:
    return (f"You ended your turn without filing your report for round {n}. Read and follow "
            f"{shown(brief)} to the end: file your report with the submit command it gives.")


class Orchestrator:
    def __init__(self, ws: Workspace, say: EventSink | None = None) -> None:
        self.ws = ws
        self.tdir = ws.tdir
        self.say = say or (lambda event: None)
        self.state = ws.state()
        self.views: dict[str, PeerView] = {}
        #: when this orchestrator launched each peer: its hooks' signals count from then
        self.launched_ns: dict[str, int] = {}
        #: where `handoff submit` hands reports over while this orchestrator runs
        self.intake = Intake(str(self.tdir.path))
        #: the report files this orchestrator judged and filed itself, by name: parsed once
        self.judged: dict[str, submission.Filed] = {}
        #: what wakes the waits of a run (`run` keeps it open): reports, signals, the intake
        self.watcher: Watcher | None = None
        #: when each role last filed a report through this orchestrator (time.time_ns())
        self.filed_ns: dict[str, int] = {}
        #: the plan's tests run at the base, beside round 1 (handoff.loop.baseline)
        self.baseline: Baseline | None = None
        #: one of the machine's max_parallel slots, held while the ticket is at work
        self.slot = Slot(ws.home, self.tdir.path, self.state.created, ws.config.parallel,
                         now=self.state.jumps_queue)

    @property
    def team(self) -> Team:
        return self.state.roles

    # ---- bookkeeping -------------------------------------------------------------------
    def event(self, kind: EventKind, role: str = "", **fields: Any) -> None:
        self.say(self.tdir.events.append(kind, round=self.state.round, role=role, **fields))

    def save(self) -> None:
        self.tdir.save(self.state)

    def transition(self, phase: str, reason: str = "") -> None:
        self.say(self.tdir.move(self.state, phase, reason))
        if phase in FINISHED:
            self.finish()  # before the person is told: the final report is there to read
        notify.phase_changed(self.state, self.ws.peers(self.state).tmux, self.ws.config.notify,
                             self.ws.repo.top, self.event)

    def apply(self, move: Move) -> None:
        """Carry out what the rules decided."""
        if move.next_round:
            self.next_round(move.notes)
            return
        if move.phase == Phase.NEEDS_HUMAN:
            self.state.after_answer = move.after_answer
        self.transition(move.phase, move.reason)

    def next_round(self, notes: Sequence[tuple[str, str]] = ()) -> None:
        """The implementer's next round: its brief carries the ledger's open findings and the
        notes (a failed gate, a rejected report, an answer)."""
        self.state.round += 1
        self.state.relaunched = {}
        self.state.held = []
        self.state.feedback = {"round": self.state.round,
                               "findings": [e.fields() for e in Ledger.of(self.state.ledger).open()],
                               "notes": [list(n) for n in notes]}
        self.transition(Phase.IMPLEMENTING)

    # ---- the loop ----------------------------------------------------------------------
    def run(self) -> State:
        with TicketLock(self.tdir.lock_file), durable.deferred(self.tdir.path), self.intake, \
                self.file_watcher() as watcher:
            # one watcher for the whole run: closing an inotify descriptor waits for the
            # kernel (about 9 ms, measured), and a watcher a wait closed would put that on
            # every hand-over
            self.watcher = watcher
            trace.to_file(self.tdir.debug_log)
            old_term = signal.signal(signal.SIGTERM, _stop)
            old_hup = signal.signal(signal.SIGHUP, _stop)  # its tmux window was closed
            try:
                self.state = self.ws.state()
                # a person started this run: the peers' relaunch budget starts afresh
                carried, self.state.relaunched = self.state.relaunches, {}
                if carried:
                    self.save()
                fenced = self.ws.sandbox()
                # the starts a person is waiting for go first (handoff.record.starts)
                waited = starts.wait_for_starts(self.ws.home)
                self.event("orchestrator", pid=os.getpid(), relaunches_before=carried,
                           after_starts=f"{waited:.2f} s",
                           intake=self.intake.error or "listening",
                           sandbox=fenced.why if fenced is not None else "none",
                           team=[f"{r.name}:{r.kind}" for r in self.team.roles],
                           max_parallel=self.slot.limit)
                while self.state.phase not in FINISHED:
                    if not self.hold_slot():
                        continue
                    step = {
                        Phase.AWAITING_APPROVAL: None,
                        Phase.QUEUED: self.queued,
                        Phase.WAITING: self.waiting,
                        Phase.IMPLEMENTING: self.implementing,
                        Phase.TESTING: self.testing,
                        Phase.GATING: self.gating,
                        Phase.REVIEWING: self.reviewing,
                        Phase.NEEDS_HUMAN: self.needs_human,
                    }[Phase(self.state.phase)]
                    if step is None:
                        return self.state
                    step()
                    self.check_budget()
                self.finish()
                if self.state.phase in (Phase.PASSED, Phase.ESCALATED):
                    self.leave_finished(f"the ticket {self.state.phase}")
            except (Stopped, KeyboardInterrupt):
                self.event("stopped", phase=self.state.phase)
            except Exception as exc:  # recorded for `handoff log`, then shown as usual
                self.event("error", phase=self.state.phase,
                           message=getattr(exc, "message", None) or repr(exc))
                raise
            finally:
                self.slot.release()
                signal.signal(signal.SIGTERM, old_term)
                signal.signal(signal.SIGHUP, old_hup)
        return self.state

    # ---- the machine's slots ------------------------------------------------------------
    def hold_slot(self) -> bool:
        """A phase at work needs one of the machine's slots, taken before its step; without
        one the ticket queues (False). Any other phase gives its slot back."""
        phase = Phase(self.state.phase)
        if phase not in AT_WORK:
            if phase != Phase.QUEUED:
                self.slot.release()
            return True
        standing = self.slot.take()
        if standing is None:
            return True
        self.state.queued_for = phase
        self.transition(Phase.QUEUED, standing.why(self.tdir.path))
        return False

    def queued(self) -> None:
        """Wait for a slot, then go back to the phase the ticket queued from."""
        slots.folder(self.ws.home).mkdir(parents=True, exist_ok=True)
        with Watcher([slots.folder(self.ws.home)]) as watcher:
            while self.slot.take() is not None:
                watcher.wait(QUEUE_LOOK)
        back = self.state.queued_for if self.state.queued_for in AT_WORK else Phase.IMPLEMENTING
        self.state.queued_for = ""
        self.transition(back, f"it got a slot (max_parallel {self.slot.limit})")

    def waiting(self) -> None:
        """Until every ticket it starts after has passed (handoff.loop.after), holding no slot;
        each change of what it waits for is an event. Then it starts from their passed work,
        or a person is asked why it cannot."""
        home, key = self.ws.home, self.ws.repo.key
        folders = [self.tdir.path.parent, *(path for name in self.state.after
                                            if (path := ticket_dir(home, key, name).path).is_dir())]
        said = ""
        with Watcher(folders) as watcher:
            while True:
                found = after.read(home, key, self.state.after)
                decision = after.decide(found)
                if decision.action != "wait":
                    break
                if decision.reason != said:  # status and the board show it as the reason
                    said = self.state.reason = decision.reason
                    self.save()
                    self.event("waiting", reason=said, after=list(self.state.after))
                watcher.wait(QUEUE_LOOK)
        if decision.action == "ask":
            self.apply(rules.ask(f"{decision.reason}: it was to start from that work. 'handoff "
                                 f"answer {self.state.ticket} go' starts it from its base as it "
                                 f"is, 'handoff close {self.state.ticket}' ends it",
                                 after_answer=Phase.IMPLEMENTING))
            return
        base, conflicts = after.base_for(self.ws.repo, self.state.base_commit, found,
                                         self.state.ticket)
        if conflicts:
            self.apply(rules.ask(f"the work it starts after does not merge: conflicts in "
                                 f"{'; '.join(conflicts)}. 'handoff answer {self.state.ticket} "
                                 "go' starts it from its base alone", Phase.IMPLEMENTING))
            return
        self.event("waiting", reason=decision.reason, after=list(self.state.after),
                   base=base, before=self.state.base_commit,
                   commits={d.ticket: d.commit for d in found})
        self.state.base_commit = base
        self.transition(Phase.IMPLEMENTING,
                        f"{decision.reason}: it starts from their work ({short_sha(base)})")

    def setup(self) -> None:
        """Worktrees and the tmux session: created once, found again on resume."""
        state, wt = self.state, self.ws.worktrees
        if not state.worktrees:
            state.worktrees = {IMPLEMENTER: str(wt.create_implementer(state.base_commit))}
            for role in self.team.names[1:]:
                state.worktrees[role] = str(wt.create_detached(role, state.base_commit))
            state.branch = self.ws.branch()
            self.save()
            self.event("worktrees", **state.worktrees)
        else:  # each made again if deleted by hand, set up again if its setup had failed
            for role in self.team.names:
                rev = state.base_commit if role == IMPLEMENTER else state.last_commit()
                made = wt.ensure(role, rev, recreate=True)
                if made.changed:
                    self.event("worktree", role, **made.fields())
        booked = {name: ports for name in (*self.team.names, GATE)
                  if (ports := self.ws.ports(name))}
        if booked != state.ports:
            state.ports = booked
            self.save()
        peers = self.ws.peers(state)
        if not peers.tmux.has_session(state.session):
            follow = self_argv("log", state.ticket, "--repo", str(self.ws.repo.top), "--follow")
            peers.ensure_session(self.ws.repo.top, follow)
            notify.show_phase(state, peers.tmux)
            self.event("session", session=state.session, socket=state.socket)

    def hand(self, path: Path, render: Callable[[], str]) -> None:
        """Write what handoff hands a peer (a brief, a diff) and record its digest. A file of
        that name whose digest is not the recorded one (planted by a peer before handoff wrote
        it, or changed since) is written again, and that is said; a resumed orchestrator finds
        its own file and leaves it."""
        name = str(path.relative_to(self.tdir.path))
        found = file_digest(path)
        if found and found == self.state.handed.get(name):
            return
        text = render()
        if found and found != digest(text):
            self.event("replaced", file=name, why="it was not what handoff wrote: a peer's file "
                       "is never handed on as handoff's")
        atomic_write(path, text)
        self.state.handed[name] = digest(text)
        self.save()

    def plan_unchanged(self) -> bool:
        """The plan is the one a person approved; else the ticket waits for a person."""
        now = file_digest(self.tdir.plan_md)
        if not self.state.plan_digest:  # approved by a handoff that kept no digest
            self.state.plan_digest = now
            self.save()
        if now == self.state.plan_digest:
            return True
        self.event("plan-changed", approved=self.state.plan_digest, now=now)
        self.apply(rules.ask(
            f"{self.tdir.plan_md} changed after it was approved: handoff runs no plan nobody "
            f"approved. Put the approved plan back, or read the change and 'handoff answer "
            f"{self.state.ticket} \"approved\"' to approve the plan as it is now",
            after_answer=self.state.phase))
        return False

    def control_files_allowed(self) -> bool:
        """The round's commit changes no control file the plan or a person did not allow;
        else the ticket waits for a person, naming the files."""
        n = self.state.round
        commit = self.state.commit_of(n)
        touched = protected.touched(
            self.ws.repo.changed_paths(self.state.base_commit, commit),
            (*protected.DEFAULT, *self.ws.config.protected),
            (*self.ws.plan().may_change, *self.state.allowed_changes))
        if not touched:
            return True
        self.state.asked_changes = touched
        self.event("protected", files=touched, commit=commit)
        self.apply(rules.protected(touched, n, self.state.ticket))
        return False

    # ---- the implementer and the testers ------------------------------------------------
    def implementing(self) -> None:
        if not self.plan_unchanged():
            return
        self.setup()
        n = self.state.round
        self.start_baseline()
        brief = self.tdir.brief(IMPLEMENTER, n)
        self.hand(brief, lambda: self.render_implementer_brief(n))
        self.ensure_briefed(IMPLEMENTER, brief, fresh=False)
        self.pass_on_note({IMPLEMENTER: brief})
        got = self.wait_for_reports({IMPLEMENTER: brief})
        if got:
            self.accept_work(IMPLEMENTER, n, got[IMPLEMENTER])

    def start_baseline(self) -> None:
        """The plan's tests at the base, counted once per ticket, while the implementer works
        (handoff.loop.baseline): the gates of its rounds are compared with it."""
        test = self.ws.plan().test
        if test and self.ws.config.base_tests and BASE not in self.state.tests_ran and \
                self.baseline is None:
            self.baseline = Baseline(self.ws, self.state.base_commit, test)
            self.baseline.start()

    def settle_baseline(self) -> None:
        """The base's count in the record before a round's gate runs: waited for (bounded by
        the gate's own timeout), or run now when no base run was started (a resume)."""
        if BASE in self.state.tests_ran or not self.ws.plan().test or \
                not self.ws.config.base_tests:
            return
        self.start_baseline()
        assert self.baseline is not None
        self.baseline.wait()
        count = self.baseline.count()
        self.state.tests_ran[BASE] = count.fields() if count is not None else {}
        self.save()
        result = self.baseline.result
        self.event("gate", result="base", commit=self.state.base_commit,
                   summary=result.summary() if result is not None else self.baseline.error,
                   log=self.tdir.gate_log(BASELINE_ROUND).name if result else "",
                   tests=count.fields() if count is not None else {})
        self.baseline = None

    def render_implementer_brief(self, n: int) -> str:
        feedback = self.state.feedback if self.state.feedback.get("round") == n else {}
        findings = [_entry(f) for f in feedback.get("findings", [])]
        notes = [(str(t), str(x)) for t, x in feedback.get("notes", [])]
        notes += self.elsewhere()
        ctx = self.ws.brief_context(self.state, IMPLEMENTER, n)
        return briefs.implementer(ctx, self.ws.branch(), findings, notes)

    def elsewhere(self) -> list[tuple[str, str]]:
        """What other tickets did to the files this one changes: merged into the base branch
        since this ticket started, or passed and waiting to be. Said so the implementer can
        keep its change apart from theirs before the merge, not find it out at the merge."""
        touched = set(self.state.touched)
        if not touched:
            return []
        lines = [f"- {o.shown()}: it passed review and will be merged into the base branch"
                 for o in overlaps.for_ticket(self.ws.home, self.state)
                 if o.phase == Phase.PASSED]
        base = self.ws.repo.base_of(self.state.base)
        head = self.ws.repo.branch_head(base) if base else ""
        if head and head != self.state.base_commit and \
                self.ws.repo.is_ancestor(self.state.base_commit, head):
            moved = sorted(touched & set(self.ws.repo.changed_paths(self.state.base_commit, head)))
            if moved:
                lines.append(f"- {base} changed since this ticket started, in files you change "
                             f"too: {', '.join(moved[:10])}" + (" …" if len(moved) > 10 else ""))
        if not lines:
            return []
        return [("Other tickets change your files", "\n".join(lines) + "\n\nKeep your change "
                 "to what the plan asks; where you must touch these files, expect to merge with "
                 "their change.")]

    def next_tester(self, n: int) -> str | None:
        return rules.next_tester(self.team.testers, self.state.tested.get(str(n), {}))

    def testing(self) -> None:
        """The next tester of the round adds tests on top of the round's commit so far."""
        if not self.plan_unchanged():
            return
        self.setup()
        n = self.state.round
        tester = self.next_tester(n)
        if tester is None:  # every tester reported before a crash: on to the gate
            self.transition(Phase.GATING)
            return
        commit = self.state.commit_of(n)
        diff = self.tdir.diff(n)
        self.hand(diff, lambda: self.ws.repo.diff(self.state.base_commit, commit) + "\n")
        brief = self.tdir.brief(tester, n)
        if self.ws.peers(self.state).working_on(tester) != str(brief):
            self.point(tester, n)
        feedback = self.state.feedback if self.state.feedback.get("round") == n else {}
        answers = [(str(t), str(x)) for t, x in feedback.get("notes", [])
                   if t == rules.ANSWERED]  # a blocked tester's question, answered
        self.hand(brief, lambda: briefs.tester(
            self.ws.brief_context(self.state, tester, n), commit, diff, answers))
        self.ensure_briefed(tester, brief, fresh=True)
        self.pass_on_note({tester: brief})
        got = self.wait_for_reports({tester: brief})
        if got:
            self.accept_work(tester, n, got[tester])

    def accept_work(self, role: str, n: int, report: Report) -> None:
        """The implementer's or a tester's accepted report: its commit becomes the round's
        (a tester's is put on the ticket branch first), and the rules say what follows."""
        kind = self.team.kind(role)
        if report.status != "blocked":
            # judged: the commit exists; a full sha is its own resolution (no git call)
            commit = report.commit if FULL_SHA.fullmatch(report.commit) \
                else self.ws.repo.resolve(report.commit)
            # handoff alone moves the ticket branch: no peer writes a ref
            if not self.onto_branch(role, commit):
                return
            if kind is Kind.TESTER:
                self.state.tested.setdefault(str(n), {})[role] = commit
            self.state.commits[str(n)] = commit
        question = report.sections.get("open questions", "").strip()
        self.apply(rules.after_work(kind, role, report.status, question, self.next_tester(n)))
        if report.status != "blocked":
            # what another ticket of the repository may overlap (handoff.record.overlaps):
            # bookkeeping for the others, so after the next action is on its way (a git call
            # and a save, which under a crowd of tickets would double the hand-over)
            self.state.touched = self.ws.repo.changed_paths(self.state.base_commit,
                                                            self.state.commits[str(n)])
            self.save()

    def onto_branch(self, role: str, commit: str) -> bool:
        """Move the ticket branch forward to an accepted commit (the implementer's, or a
        tester's: it builds on the last accepted one, the validators checked), as a plain ref,
        and the implementer's checkout with it."""
        made = self.ws.ensure_worktree(self.state, IMPLEMENTER)
        if made:
            self.event("worktree", IMPLEMENTER, **made)
        previous = self.state.last_commit()
        problem = self.ws.worktrees.advance_branch(previous, commit)
        if not problem:
            if commit != previous:
                self.event("branch", role, commit=commit, branch=self.ws.branch(),
                           by="fast-forward")
            return True
        self.apply(rules.ask(f"the {role}'s commit {short_sha(commit)} cannot be put on "
                             f"{self.ws.branch()}: {problem}. Mend the implementer's worktree, "
                             f"then 'handoff answer {self.state.ticket} go'",
                             after_answer=self.state.phase))
        return False

    # ---- the gate -----------------------------------------------------------------------
    def gating(self) -> None:
        if not self.plan_unchanged() or not self.control_files_allowed():
            return
        self.settle_baseline()
        left = end_left_gate(self.tdir.gate_running)
        if left is not None:  # a killed orchestrator's gate: ended first, never two at once
            self.event("gate", result="ended", reason="left running by an earlier orchestrator",
                       **left)
        n, plan = self.state.round, self.ws.plan()
        commit = self.state.commit_of(n)
        self.retire_finished()
        self.point(GATE, n)
        cwd, env = self.ws.worktrees.path(GATE), self.ws.gate_env()
        missing = [s for s in self.ws.config.scanners
                   if s.required and not scanners.installed(s.command[0], env, cwd)]
        if missing:
            names = [s.name for s in missing]
            self.event("gate", result="stopped", reason="required scanner(s) not installed",
                       scanners=names, commit=commit)
            self.apply(rules.missing_scanners(names, [scanners.fix_for_missing(
                s, env, self.state.ticket) for s in missing]))
            return
        if plan.test is None and not self.ws.config.scanners:
            self.state.gates[str(n)] = "skipped"
            self.event("gate", result="skipped", reason="the plan names no test command")
            self.transition(Phase.REVIEWING)
            return
        result = self.run_test(plan.test, commit, cwd, env) if plan.test else None
        if result is not None:
            count = testcount.read(result.output)
            self.state.tests_ran[str(n)] = count.fields() if count is not None else {}
        scans = self.run_scanners(n, commit, cwd, env)
        passed = rules.gate_passes(result.passed if result is not None else None,
                                   any(s.blocks for s in scans))
        changed = self.changed_checkout(GATE, commit, untracked=True) if passed else ""
        if changed:  # a pass counts only at the exact commit: someone wrote into the checkout
            self.event("gate", result="void", why=changed, log=self.tdir.gate_log(n).name,
                       commit=commit)
            self.apply(rules.gate_void(changed, self.state.ticket))
            return
        self.state.gates[str(n)] = "pass" if passed else "fail"
        said = gate_summary(result, scans)
        self.event("gate", result=self.state.gates[str(n)], summary=said,
                   log=self.tdir.gate_log(n).name if result else "", commit=commit)
        notes = [gate_note(result.summary(), commit, self.tdir.gate_log(n), result.output)] \
            if result is not None and not result.passed else []
        blocking = scanners.note(scans)
        if blocking is not None:
            notes.append(blocking)
        move = rules.after_gate(passed, self.state.gate_bounces, self.state.max_gate_bounces,
                                said, notes)
        if not passed:
            self.state.gate_bounces += 1
        self.apply(move)

    def run_test(self, argv: Sequence[str], commit: str, cwd: Path,
                 env: dict[str, str]) -> GateResult:
        n = self.state.round
        self.event("gate", result="running", command=list(argv), commit=commit)
        return run_gate(argv, cwd, env, self.ws.config.gate_timeout, self.tdir.gate_log(n),
                        record=self.tdir.gate_running, fence=self.ws.gate_fence(),
                        nice=self.ws.config.peer_nice)

    def run_scanners(self, n: int, commit: str, cwd: Path,
                     env: dict[str, str]) -> list[scanners.ScanResult]:
        """Every scanner of the config at the gate's commit, each said in an event."""
        if not self.ws.config.scanners:
            return []
        scope = scanners.Scope(base=self.state.base_commit, commit=commit,
                               changed=tuple(self.ws.repo.present_changes(
                                   self.state.base_commit, commit)))
        found = scanners.run_scanners(self.ws.config.scanners, scope, cwd, env,
                                      self.ws.config.gate_timeout,
                                      lambda name: self.tdir.scan_log(n, name),
                                      record=self.tdir.gate_running,
                                      fence=self.ws.gate_fence(),
                                      nice=self.ws.config.peer_nice)
        for scan in found:
            self.event("scanner", **scan.fields())
        self.state.scans[str(n)] = {scan.name: scan.state for scan in found}
        return found

    def retire_finished(self) -> None:
        """The testers and reviewers of an earlier stage still in their panes are asked to
        leave (their sessions kept), so each works fresh next time."""
        peers = self.ws.peers(self.state)
        working = [role for role in self.team.names[1:] if peers.working_on(role)]
        transcripts = {role: self.ws.transcript_for(self.state, role) for role in working}
        peers.leave_all({role: self.ws.provider(role) for role in working})
        for role in working:
            self.ws.keep_session(self.state, role, transcripts[role])
            peers.retire(role, transcripts[role])
            self.event("recycle", role, stage="stopped", by="orchestrator")

    def leave_finished(self, why: str) -> None:
        """A finished ticket holds no slot, so it runs no CLI either (ten passed tickets' idle
        peers were gigabytes of node): each peer is asked to leave, and its pane stays with
        its last screen for `handoff attach`; one that does not go is ended. The pane histories
        and sessions are kept. A resume after a crash here finishes the job."""
        peers = self.ws.peers(self.state)
        working = [role for role in self.team.names if peers.working_on(role)]
        transcripts = {role: self.ws.transcript_for(self.state, role) for role in working}
        left = peers.leave_all({role: self.ws.provider(role) for role in working},
                               wait=LEAVE_FINISHED)
        for role in working:
            self.ws.keep_session(self.state, role, transcripts[role])
            if role in left:
                peers.capture(role, transcripts[role])
                peers.reap(role)
            else:
                peers.retire(role, transcripts[role])
            self.event("left", role, reason=why, pane="kept" if role in left else "ended")

    # ---- the reviewers --------------------------------------------------------------------
    def reviewing(self) -> None:
        """Every reviewer at once, each fresh in its own checkout of the commit; the round is
        judged when all of them have reported."""
        if not self.plan_unchanged():
            return
        self.setup()
        n = self.state.round
        commit = self.state.commit_of(n)
        diff = self.tdir.diff(n)
        self.hand(diff, lambda: self.ws.repo.diff(self.state.base_commit, commit) + "\n")
        review = self.review_of(n, commit, diff)
        done = self.state.reviewed.get(str(n), {})
        peers = self.ws.peers(self.state)
        waiting: dict[str, Path] = {}
        for role in (r for r in self.team.reviewers if r not in done):
            brief = self.tdir.brief(role, n)
            if peers.working_on(role) != str(brief):
                self.point(role, n)
            self.hand(brief, lambda role=role: briefs.reviewer(  # type: ignore[misc]
                self.ws.brief_context(self.state, role, n), review))
            self.ensure_briefed(role, brief, fresh=True)
            waiting[role] = brief
        self.pass_on_note(waiting)
        got = self.wait_for_reports(waiting, self.record_review)
        if got is not None:
            self.judge_round(n, got)

    def review_of(self, n: int, commit: str, diff: Path) -> briefs.Review:
        """What every reviewer of round n is shown beside the plan: the diff since the last
        review, the ledger's open findings, the tests the change weakened, what the scanners
        that do not block found."""
        earlier = sorted(int(r) for r in self.state.verdicts if int(r) < n)
        last = self.state.commit_of(earlier[-1]) if earlier else ""
        increment = None
        if last and last != commit:
            increment = self.tdir.diff_since(n, earlier[-1])
            self.hand(increment, lambda: self.ws.repo.diff(last, commit) + "\n")
        if str(n) not in self.state.weakened:
            plan = self.ws.plan()
            found = weakened.with_fewer_tests(
                weakened.weakened(self.ws.repo, self.state.base_commit, commit,
                                  [*(c for c in (plan.test,) if c), *plan.review]),
                Count.from_fields(self.state.tests_ran.get(BASE)),
                Count.from_fields(self.state.tests_ran.get(str(n))))
            self.state.weakened[str(n)] = [w.fields() for w in found]
            self.save()
            if found:
                self.event("weakened", tests=[w.render() for w in found], commit=commit)
        shown_weak = tuple((str(w["id"]), weakened.described(w))
                           for w in self.state.weakened[str(n)])
        advisory = [f"- `{name}` {state}: see `{self.tdir.scan_log(n, name)}`"
                    for name, state in self.state.scans.get(str(n), {}).items()
                    if state == "failed"]
        notes = (("What the scanners that do not block found",
                  "\n".join(advisory) + "\n"),) if advisory else ()
        return briefs.Review(commit, diff, increment, tuple(Ledger.of(self.state.ledger).open()),
                             shown_weak, notes)

    def record_review(self, role: str, n: int, report: Report) -> None:
        """One reviewer's accepted verdict, said at once (the others may still be at work)."""
        self.state.reviewed.setdefault(str(n), {})[role] = report.verdict
        self.save()
        extra: dict[str, Any] = {}
        if report.ledger:
            extra["ledger"] = [f"{a.id} {a.status}" for a in report.ledger]
        if report.weakened:
            extra["weakened"] = [f"{a.id} {a.answer}" for a in report.weakened]
        self.event("verdict", role, verdict=report.verdict, commit=report.commit,
                   must_fix=[f.render() for f in report.must_fix],
                   should_fix=[f.render() for f in report.should_fix], **extra)

    def judge_round(self, n: int, got: Mapping[str, Report]) -> None:
        """Every reviewer reported: their findings go into the ledger, and the rules judge."""
        reviews = [(role, got.get(role) or self.filed_review(role, n))
                   for role in self.team.reviewers]
        ledger = Ledger.of(self.state.ledger).merged(n, reviews)
        raised = [f for _, report in reviews for f in report.must_fix]
        earlier = {key for r, keys in self.state.findings.items() if r != str(n) for key in keys}
        repeated = rules.repeated(raised, earlier)
        verdicts = {role: self.state.reviewed.get(str(n), {}).get(role, report.verdict)
                    for role, report in reviews}
        self.state.verdicts[str(n)] = rules.round_verdict(verdicts)
        self.state.findings[str(n)] = sorted({f.key() for f in raised})
        self.state.ledger = ledger.records()
        if len(verdicts) > 1 or self.state.ledger:
            self.event("reviews", verdict=self.state.verdicts[str(n)], verdicts=verdicts,
                       open=[e.id for e in ledger.open()])
        self.apply(rules.after_reviews(verdicts, ledger, repeated, self.state.reviews,
                                       self.state.max_rounds))

    def filed_review(self, role: str, n: int) -> Report:
        """A review accepted by an earlier run, read from its file."""
        path = self.tdir.report(role, n)
        report, _ = reports.parse(read_text(path, REPORT_LIMIT, "the report"), Kind.REVIEWER,
                                  role=role)
        verdict = self.state.reviewed.get(str(n), {}).get(role, "fail")
        return report or Report(role=role, commit=self.state.commit_of(n), verdict=verdict)

    # ---- a person -------------------------------------------------------------------------
    def needs_human(self) -> None:
        """Wait for `handoff answer`; the answer starts the implementer's next round."""
        number = self.state.answers_used + 1
        path = self.tdir.answer(number)
        with self.file_watcher() if self.watcher is None else nullcontext(self.watcher) \
                as watcher:
            while not path.exists():
                watcher.wait(TICK)
        self.state.answers_used = number
        text = path.read_text(encoding="utf-8")
        approved = file_digest(self.tdir.plan_md)
        if approved != self.state.plan_digest:  # the person was told it changed, and answered
            self.state.plan_digest = approved
            self.event("plan-approved", by="answer", digest=approved)
        answered = rules.after_answer(text, self.state.after_answer, self.state.asked_changes)
        self.state.asked_changes, self.state.after_answer = [], ""
        if answered.allowed:
            self.state.allowed_changes = sorted({*self.state.allowed_changes, *answered.allowed})
            self.event("protected-allowed", files=list(answered.allowed))
        if not answered.move.next_round:  # the same round: its peers are told the answer
            self.state.relaunched = {}
            self.state.note_for_peer = answered.note
            self.views.clear()
        self.apply(answered.move)

    def pass_on_note(self, briefed: Mapping[str, Path]) -> None:
        """A person's answer for the same round goes to the live peers it was asked about (all
        of the phase's when it was about none: a budget stop); a peer that cannot take it
        (gone, or still on a dialog) starts afresh on its brief."""
        note, self.state.note_for_peer = self.state.note_for_peer, ""
        held, self.state.held = self.state.held, []
        if not note:
            if held:
                self.save()
            return
        self.save()
        for role, brief in briefed.items():
            if held and role not in held:
                continue
            since = signal_clock()
            message = (f"A person answered: {' '.join(note.split())[:800]} -- Read and follow "
                       f"{shown(brief)} to the end and file your report with its submit "
                       "command.")
            delivery = self.ws.peers(self.state).deliver(self.ws.provider(role), role, message)
            self.event("answer-passed-on", role, delivered=delivery.taken, why=delivery.why)
            if delivery:
                self.views[role] = self.new_view(role, message, since)
            else:
                self.launch(role, brief, "answered")

    # ---- peers: briefing and launching ---------------------------------------------------
    def ensure_briefed(self, role: str, brief: Path, fresh: bool) -> None:
        """Make sure the role's live process is working on brief, without sending it twice.

        fresh: always start a new process (testers, reviewers); otherwise paste into the
        running CLI and fall back to a fresh start when the paste is not taken.
        """
        peers = self.ws.peers(self.state)
        if peers.working_on(role) == str(brief):
            return
        pane = peers.pane(role)
        round_ = brief_round(brief)
        if fresh or pane is None or pane.dead or round_ is None:
            self.launch(role, brief, "")
            return
        # the live process may file this round's report too (handoff.loop.filer)
        found = filer.identity(pane.pid)
        if not found:
            self.launch(role, brief, "its process is gone")
            return
        Grants(self.tdir.path).grant(role, round_, found)
        self.launched_ns[role] = signal_clock()  # its signals count from this message on
        delivery = peers.deliver_brief(self.ws.provider(role), role, brief)
        if delivery:
            self.event("brief", role, brief=str(brief), by="paste")
            self.views.pop(role, None)
            return
        self.event("delivery-failed", role, brief=str(brief), why=delivery.why)
        self.launch(role, brief, "")

    def launch(self, role: str, brief: Path, reason: str) -> None:
        # never start a peer in a folder that is no longer its worktree (deleted by hand)
        made = self.ws.ensure_worktree(self.state, role)
        if made:
            self.event("worktree", role, **made)
        self.launched_ns[role] = signal_clock()
        launch = self.ws.launch(self.state, role, brief)
        self.views.pop(role, None)
        self.event("launch", role, brief=str(brief), provider=self.ws.spec(role).provider,
                   message=first_message(brief), reason=reason,
                   limits=limits.said(self.ws.config.sandbox.limits, launch.sandboxed),
                   **({"session_id": launch.session_id} if launch.signals else {}))

    # ---- waiting for reports, watching the peers ------------------------------------
    def wait_for_reports(
            self, briefed: Mapping[str, Path],
            accepted: Callable[[str, int, Report], None] | None = None,
    ) -> dict[str, Report] | None:
        """Wait for the reports of the briefed peers (role → brief), watching each one
        meanwhile: a dead one, or one whose tmux server is gone, is relaunched (bounded), a
        stuck one nudged or held for a person while the others go on. A tmux that does not
        answer proves no death: it gets Patience, then the TmuxFailure ends the run for a
        later resume. accepted: told of each report as it is taken. None: the phase changed
        (a person must step in, or the round went on).

        Waiting runs nothing: a report or a hook's signal wakes it (inotify), so does a
        peer's exit (a pidfd on its process). A peer is looked at (its pane listed, its screen
        read) only when one of those says so, or when `PeerMonitor.next_look` is due."""
        n, phase = self.state.round, self.state.phase
        peers = self.ws.peers(self.state)
        waits = [Awaited(role, brief, self.tdir.report(role, n), Patience(self.state.ticket))
                 for role, brief in briefed.items()]
        got: dict[str, Report] = {}
        with self.file_watcher() if self.watcher is None else nullcontext(self.watcher) \
                as watcher:
            for wait in waits:
                watcher.follow(None, wait.role)  # the peer of an earlier wait is not this one's
            while True:
                self.intake.serve(self.judge_handed)
                for cut in self.intake.cut():  # a client too slow to send its request
                    self.event("intake", pid=cut.pid, why=cut.why)
                if self.state.phase != phase or self.state.round != n:
                    return None  # a filing a person must look at (`judge_handed`)
                # a held peer's report counts too: a person may have mended it meanwhile
                for wait in (w for w in waits if w.role not in got):
                    # one this orchestrator filed is whole: it was renamed into place
                    if wait.report.exists() and (wait.report.name in self.judged or report_settled(
                            wait.report, self.team.kind(wait.role), wait.role)):
                        if submission.taken_at_turn_end(self.team.kind(wait.role)) and \
                                not self.turn_over(wait.role):
                            # a tester or reviewer ran the code under review, which may file in
                            # its name: what it files itself, last, counts (handoff.loop.filer)
                            wait.look_at = min(wait.look_at, time.monotonic() + TURN_LOOK)
                            continue
                        report = self.take_report(wait.role, n, wait.report)
                        if self.state.phase != phase or self.state.round != n:
                            return None
                        if report is not None:
                            got[wait.role], wait.held = report, ""
                            if accepted is not None:
                                accepted(wait.role, n, report)
                working = [w for w in waits if w.role not in got and not w.held]
                if not working:
                    held = [w for w in waits if w.held]
                    if held:
                        self.hand_to_person(held)
                        return None
                    return got
                for wait in working:
                    if time.monotonic() >= wait.look_at or wait.role in watcher.gone \
                            or self.signalled(wait.role):
                        looked = self.look(wait, n, peers, watcher)
                        if self.state.phase != phase:
                            return None
                        wait.look_at = time.monotonic() + (looked or 0.0)
                working = [w for w in waits if w.role not in got and not w.held]
                if working:
                    due = min(w.look_at for w in working)
                    watcher.wait(max(due - time.monotonic(), 0.0))

    def hand_to_person(self, held: Sequence[Awaited]) -> None:
        """The peers that need a person, once every other peer of the phase has reported."""
        self.state.held = [w.role for w in held]
        self.apply(rules.ask("; ".join(w.held for w in held), after_answer=self.state.phase))

    def look(self, wait: Awaited, n: int, peers: Peers, watcher: Watcher) -> float | None:
        """Look at the peer once and act on it; seconds until the next look is due, None when
        it is held for a person (it needs one, or could not be revived)."""
        role, brief = wait.role, wait.brief
        try:
            try:
                pane, lost = peers.look(role), ""
            except ServerGone as gone:
                pane, lost = None, gone.message
            if (pane is None or pane.dead) and self.recycled_by_hand(role):
                watcher.follow(None, role)
                return TICK  # a person's `handoff recycle` is starting it afresh
            if pane is None or pane.dead:
                watcher.follow(None, role)
                self.void_unfinished(role, n, wait.report)
                wait.held = self.revive(role, brief, pane is not None,
                                        peers.exit_status(role) if pane else None, lost)
                return None if wait.held else TICK
            if not watcher.follow(pane.pid, role):
                return TICK  # its exit cannot wake us (no pidfd, or tmux has yet to see it)
            wait.held = self.assess(role, n, brief, wait.report, pane)
            if wait.held:
                return None
        except TmuxFailure as failure:
            if wait.patience.failed(failure):  # raises once tmux was silent for too long
                self.event("tmux", role, state="failing", message=failure.message,
                           patience=wait.patience.limit)
            return TICK
        except ServerGone:
            return TICK  # it went away in the middle: the next look relaunches on a new one
        silent = wait.patience.answered()
        if silent is not None:
            self.event("tmux", role, state="answering", after=round(silent, 1))
        view = self.views.get(role)
        if view is None:
            return TICK
        return view.monitor.next_look(time.monotonic(), self.ws.provider(role).signals)

    def file_watcher(self) -> Watcher:
        """A watcher of what the loop waits on: `watched_folders`, and the intake's socket."""
        watcher = Watcher(watched_folders(self.tdir, self.team.names),
                          also=[self.intake.fileno()])
        if watcher.polling:  # it still works, at a look every POLL_INTERVAL: say why
            self.event("watch", state="polling", every=POLL_INTERVAL, reason=watcher.polling)
        return watcher

    def recycled_by_hand(self, role: str) -> bool:
        """A `handoff recycle` of the role is under way (its marker is fresh and its process
        alive): the peer's end is its doing, not a death to count and relaunch."""
        marker = self.tdir.recycling(role)
        try:
            pid, age = int(marker.read_text(encoding="utf-8")), time.time() - marker.stat().st_mtime
        except (OSError, ValueError):
            return False
        return age < RECYCLE_GRACE and alive(pid)

    def turn_over(self, role: str) -> bool:
        """The role's CLI has finished its turn: its screen, read from outside the sandbox, shows
        it ready for a message (a hook's signal file, which the peer can write, only says when
        to look)."""
        peers = self.ws.peers(self.state)
        try:
            pane = peers.look(role)
        except (ServerGone, TmuxFailure):
            return False
        screen = peers.screen_of(pane)
        if screen is None:
            return False
        state = self.ws.provider(role).read(screen).state
        if state == READY:
            return True
        # a screen none of its rules read (a CLI release handoff does not know yet, or a
        # role's own markers that miss): its hooks are all there is, and a Stop after the
        # filing is taken, as the rest of the loop takes them then (a weaker word: the peer
        # can write its signals folder; said in docs/reliability.md)
        filed = self.filed_ns.get(role, 0)
        return state == STARTING and filed > 0 and any(
            signal.event == STOP for signal in read_signals(self.tdir.signals(role), filed))

    def void_unfinished(self, role: str, n: int, report: Path) -> None:
        """A tester's or reviewer's reports of this round, filed by a session that ended before
        its turn did, are not taken: the code under review could have filed one and then ended
        the session before the peer filed its own. Kept beside the record; the relaunched peer
        files afresh."""
        if not submission.taken_at_turn_end(self.team.kind(role)):
            return
        for path in [*submission.filed_before(self.tdir, report), report]:
            if path.exists():
                self.judged.pop(path.name, None)
                event = set_aside(self.tdir, path, role, n,
                                  "its session ended before its turn was over", kind="void")
                if event is not None:
                    self.say(event)

    def signalled(self, role: str) -> bool:
        """A hook of the role's peer wrote a signal not yet judged."""
        view = self.views.get(role)
        return view is not None and bool(read_signals(self.tdir.signals(role),
                                                          view.since_ns))

    def new_view(self, role: str, message: str, since_ns: int) -> PeerView:
        """A fresh judgement of the role's peer, from message (the last one it was sent) on."""
        monitor = PeerMonitor(time.monotonic(), self.ws.timing(),
                              frozenset(self.ws.spec(role).answer))
        return PeerView(monitor, message, since_ns)

    def assess(self, role: str, n: int, brief: Path, report: Path, pane: Pane) -> str:
        """Read the screen of the peer's live pane (just looked up) and act on what it shows;
        why a person must step in ('' while it need not)."""
        view = self.views.get(role)
        if view is not None and view.pid and view.pid != pane.pid:
            # started afresh by a person (`handoff recycle`): judged afresh, signals from now
            self.launched_ns[role] = signal_clock()
            self.event("peer", role, state="recycled", evidence=f"pid {view.pid} was "
                       f"replaced by pid {pane.pid} in its pane (handoff recycle)")
            view = None
        if view is None:
            view = self.views[role] = self.new_view(
                role, first_message(brief), self.launched_ns.get(role, signal_clock()))
            view.pid = pane.pid
        peers, provider = self.ws.peers(self.state), self.ws.provider(role)
        screen = peers.screen_of(pane)
        signals = read_signals(self.tdir.signals(role), view.since_ns)
        if signals:
            view.since_ns = signals[-1].mtime_ns + 1
        reading = provider.read(screen) if screen is not None else None
        submitted = screen is not None and provider.rules.submitted(screen, view.message)
        for decision in view.monitor.observe(time.monotonic(), reading, signals, submitted,
                                                 screen or ""):
            if report.exists() and (decision.action == "nudge" or not submission.
                                    taken_at_turn_end(self.team.kind(role))):
                # the report came in meanwhile: it is judged first (a tester's or reviewer's
                # once its turn is over; until then it is still watched, stuck or not)
                return ""
            held = self.act(role, n, brief, decision, view, screen or "")
            if held:
                return held
        return ""

    def act(self, role: str, n: int, brief: Path, decision: Decision, view: PeerView,
            screen: str) -> str:
        """Carry out one judgement of the peer; why a person must step in ('' : none)."""
        peers, provider = self.ws.peers(self.state), self.ws.provider(role)
        if decision.action == "note":
            self.event("peer", role, state=decision.state, evidence=decision.evidence)
        elif decision.action == "answer":
            peers.steady(role)
            peers.keys(role, decision.keys)
            gone = peers.dialog_gone(provider, role, decision.dialog)
            self.event("dialog", role, state=decision.state, evidence=decision.evidence,
                       keys=list(decision.keys), answered=decision.fix, gone=gone)
        elif decision.action == "unrecognised":
            self.unrecognised(role, decision, screen)
        elif decision.action == "nudge":
            message = nudge_message(n, brief)
            since = signal_clock()
            delivery = peers.deliver(provider, role, message)
            self.event("nudge", role, evidence=decision.evidence, delivered=delivery.taken,
                       why=delivery.why)
            if not delivery:
                return self.escalate(role, Decision(
                    "escalate", "turn-ended",
                    f"{decision.evidence}; the nudge was not taken: {delivery.why}",
                    fix="attach to see what holds its input line; 'handoff answer' passes your "
                        "answer on"), screen)
            view.message, view.since_ns = message, since
            view.monitor.after_nudge_or_answer(time.monotonic())
        else:
            return self.escalate(role, decision, screen)
        return ""

    def unrecognised(self, role: str, decision: Decision, screen: str) -> None:
        """Nothing of the peer could be read: said with its screen kept and its CLI's version
        (the likeliest cause is a release whose screen handoff does not know yet)."""
        provider = self.ws.provider(role)
        kept = self.tdir.transcript(role, self.state.round, "unrecognised")
        self.ws.peers(self.state).capture(role, kept)
        last = [line.rstrip() for line in screen.strip().splitlines()[-8:]]
        self.event("screen-unrecognised", role, evidence=decision.evidence, fix=decision.fix,
                   provider=provider.name, version=provider.version() or "unknown",
                   screen=kept.name, last_lines=last)

    def escalate(self, role: str, decision: Decision, screen: str) -> str:
        """The peer needs a person: its screen kept, the reason and the fix spelled out (the
        ticket goes to one once the phase's other peers have reported)."""
        shown_as = self.tdir.transcript(role, self.state.round)
        self.ws.peers(self.state).capture(role, shown_as)
        self.ws.keep_session(self.state, role, shown_as)
        last = [line.rstrip() for line in screen.strip().splitlines()[-8:]]
        self.event("escalate", role, state=decision.state, evidence=decision.evidence,
                   fix=decision.fix, screen=shown_as.name, last_lines=last)
        return (f"the {role} needs a person ({decision.state}): {decision.evidence}. Fix: "
                f"{decision.fix} (its screen is in transcripts/{shown_as.name}); then 'handoff "
                f"answer {self.state.ticket} TEXT' to carry on")

    def revive(self, role: str, brief: Path, existed: bool, status: int | None,
               lost: str = "") -> str:
        """A peer died before reporting, or (lost: what tmux said) the tmux server went away
        with it: keep its screen, make the session again as resume does, relaunch it on the
        same brief. Both count as relaunches, so a server that keeps dying is bounded too.
        Why a person must step in ('' : it was relaunched)."""
        self.state.relaunched[role] = self.state.relaunched.get(role, 0) + 1
        count = self.state.relaunched[role]
        self.save()
        if lost:
            self.event("tmux", role, state="server-gone", message=lost, relaunches=count)
        else:
            self.event("death", role, exit_status=status, existed=existed, relaunches=count,
                       **limits.death(self.ws.home, reaper.marker(self.tdir.path, role)))
        spent = rules.relaunches_spent(role, count, self.state.max_relaunches)
        if spent:
            if existed:
                self.ws.peers(self.state).capture(role, self.tdir.transcript(role, self.state.round))
            return spent
        follow = self_argv("log", self.state.ticket, "--repo", str(self.ws.repo.top), "--follow")
        if self.ws.peers(self.state).ensure_session(self.ws.repo.top, follow):
            notify.show_phase(self.state, self.ws.peers(self.state).tmux)
            self.event("session", session=self.state.session, socket=self.state.socket,
                       reason="the tmux server was gone" if lost else "the session was gone")
        self.launch(role, brief, "tmux server gone" if lost else "relaunch")
        return ""

    # ---- reports ------------------------------------------------------------------------
    def judge_handed(self, request: Request) -> Verdict:
        """The verdict on a report `handoff submit` handed over: judged here, once."""
        if not self.team.has(request.role):
            return Verdict(None, [f"unknown role {request.role!r}"])
        try:
            filed, problems = submission.judge(self.ws, self.state, request.role,
                                               request.round, request.report, request.pid)
        except Tampered as exc:  # not the peer's to mend: what it wrote would steer handoff
            self.event("tampered", request.role, evidence=exc.message)
            self.apply(rules.ask(f"{exc.message}. Fix: {exc.hint}; then 'handoff answer "
                                 f"{self.state.ticket} go'", after_answer=self.state.phase))
            return Verdict(None, [f"{exc.message}; nothing was filed, and a person was asked"])
        except HandoffError as exc:  # tmux or git did not answer: nothing filed, said
            return Verdict(None, [f"{exc.message}; nothing was filed: submit again"])
        if filed is None:
            return Verdict(None, problems)
        self.judged[filed.path.name] = filed
        self.filed_ns[request.role] = time.time_ns()
        self.event("submitted", request.role, report=filed.path.name, pid=request.pid)
        return Verdict(str(filed.path), [])

    def take_report(self, role: str, n: int, path: Path) -> Report | None:
        """Parse and check a filed report; a bad one is set aside and the peer told why. One
        this orchestrator judged itself (`judge_handed`) and nobody changed since is neither
        parsed nor checked again."""
        kind = self.team.kind(role)
        filed = self.judged.pop(path.name, None)
        try:
            text = read_text(path, REPORT_LIMIT, "the report")
            judged = filed is not None and filed.digest == digest(text)
            forged = "" if judged else provenance(self.tdir, path, text, role, n)
        except UsageError as exc:  # too large or not text: `handoff submit` never filed it
            text, forged, judged = "", exc.message, False
        if forged:
            self.state.rejections += 1
            self.save()
            event = set_aside(self.tdir, path, role, n, forged)
            if event is not None:
                self.say(event)
            move = rules.after_forgery(self.state.rejections, path.name, forged)
            if move is not None:
                self.apply(move)
            return None
        if kind is Kind.REVIEWER:
            text, path, filed = self.strictest(role, n, path, text, filed)
            judged = filed is not None and filed.digest == digest(text)
        report: Report | None
        problems: list[str]
        if judged and filed is not None:
            report, problems = filed.report, []
        else:
            report, problems = reports.parse(text, kind, {"role": role, "round": n,
                                                          "ticket": self.state.ticket}, role)
        if report is not None and not judged:
            # submit checked the worktree when it filed the report; only the history claims
            # are checked again here
            problems = submission.claims(self.ws, self.state, role, n, report,
                                         worktree_state=False)
        if not problems and report is not None and kind is Kind.REVIEWER and \
                report.verdict == "pass":
            changed = self.changed_checkout(role, self.state.commit_of(n))
            if changed:  # a pass counts only from the exact commit
                problems = [f"the review passed in a checkout that is not the commit under "
                            f"review any more ({changed}): it is reset, review it again"]
        if not problems and report is not None:
            self.event("submission", role, report=path.name, accepted=True,
                       commit=report.commit, **({"status": report.status} if report.status
                                                else {"verdict": report.verdict}))
            self.record_usage(role)
            return report
        self.reject(role, kind, n, path, problems)
        return None

    def strictest(self, role: str, n: int, path: Path, text: str,
                  filed: submission.Filed | None) -> tuple[str, Path, submission.Filed | None]:
        """A reviewer's report of the round as it counts: the last it filed, unless it filed a
        fail earlier in the same turn, which then stands (nothing filed in its name while it
        worked can undo its own fail). (text, path, filed) of the report taken."""
        earlier = submission.filed_before(self.tdir, path)
        if not earlier or reports.verdict_of(text) == "fail":
            return text, path, filed
        for kept in reversed(earlier):
            try:
                old = read_text(kept, REPORT_LIMIT, "an earlier report")
            except UsageError:
                continue
            if reports.verdict_of(old) != "fail" or \
                    provenance(self.tdir, kept, old, role, n, filed_as=path.name):
                continue
            submission.supersede(self.tdir, path)
            kept.replace(path)
            receipt = self.tdir.receipt(kept)
            if receipt.exists():
                receipt.replace(self.tdir.receipt(path))
            self.event("verdict-kept", role, report=path.name, verdict="fail",
                       why=f"it filed a fail earlier in round {n} ({kept.name}): a later pass "
                           "in the same turn does not undo it")
            return old, path, None
        return text, path, filed

    def reject(self, role: str, kind: Kind, n: int, path: Path, problems: list[str]) -> None:
        """A report that does not stand is kept beside the record; the rules say what now."""
        self.state.rejections += 1
        rejected = self.tdir.rejected(path, self.state.rejections)
        path.replace(rejected)
        self.save()
        self.event("submission", role, report=rejected.name, accepted=False, problems=problems)
        move = rules.after_rejection(kind, self.state.rejections, problems)
        if move is not None:
            self.apply(move)
            return
        if kind is Kind.REVIEWER:  # a tester's checkout keeps its commits for its next go
            self.point(role, n)
        self.launch(role, self.tdir.brief(role, n), "report rejected")

    def point(self, name: str, n: int) -> None:
        """A detached checkout (a tester's, a reviewer's, the gate's) back at round n's
        commit, whatever was left in it kept as a patch."""
        self.ws.worktrees.point(name, self.state.commit_of(n), self.tdir.scratch_patch(name, n))

    def changed_checkout(self, name: str, commit: str, untracked: bool = False) -> str:
        """Why a detached checkout (a reviewer's, where its review ran; the gate's) is no longer
        exactly commit: its HEAD moved, tracked files changed, or (untracked: for the gate,
        which starts on a checkout cleaned of them) files not ignored appeared, such as a
        planted conftest.py; '' when it is exactly commit."""
        head = self.ws.worktrees.head(name)
        if head != commit:
            return f"its HEAD is {short_sha(head)}, not {short_sha(commit)}"
        entries = self.ws.worktrees.dirty(self.ws.worktrees.path(name))
        changed = [e[3:] for e in entries if not e.startswith("??")]
        if changed:
            return f"tracked files changed: {', '.join(changed[:5])}"
        new = [e[3:] for e in entries if e.startswith("??")] if untracked else []
        return (f"files appeared that .gitignore does not cover: {', '.join(new[:5])} (a test "
                "that writes files should write them where .gitignore says)") if new else ""

    def record_usage(self, role: str) -> None:
        """What the role's CLI spent on the round just reported, from its own session files
        (handoff.loop.metering); nothing is recorded for a CLI that keeps none (the scripted
        agent)."""
        worktree = self.state.worktrees.get(role) or str(self.ws.worktrees.path(role))
        provider = self.ws.provider(role)
        if not provider.keeps_usage:
            return  # before reading the whole event log: it is on the hand-over's path
        events, _ = self.tdir.events.read()
        fields = metering.measure(provider, role, Path(worktree), events, os.environ)
        if fields is not None:
            self.event("usage", role, **fields)

    def check_budget(self) -> None:
        """After each step: when the peers' usage has passed the budget, a person decides
        whether the ticket goes on; their answer carries it on where it stood."""
        budget = self.ws.config.budget
        if budget is None or self.state.phase in (*FINISHED, Phase.NEEDS_HUMAN,
                                                  Phase.AWAITING_APPROVAL):
            return
        events, _ = self.tdir.events.read()
        over = over_budget(events, budget.tokens, budget.cost_usd)
        if over is None:
            return
        self.event("budget", **over)
        spent = f"${over['total']}" if over["over"] == "cost_usd" else f"{over['total']:,} tokens"
        limit = f"${over['limit']}" if over["over"] == "cost_usd" else f"{over['limit']:,} tokens"
        self.apply(rules.over_budget(spent, limit, over["over"], self.state.ticket,
                                     self.state.phase))

    # ---- the end -------------------------------------------------------------------------
    def finish(self) -> None:
        if self.state.phase == Phase.CLOSED or self.tdir.final_report.exists():
            return
        atomic_write(self.tdir.final_report, self.render_final())
        self.event("final-report", outcome=self.state.phase, reason=self.state.reason)

    def render_final(self) -> str:
        state, plan = self.state, self.ws.plan()
        commit = state.last_commit()
        verified = []
        last = max((int(r) for r in state.commits), default=0)
        if plan.test and str(last) in state.gates:
            base, now = (Count.from_fields(state.tests_ran.get(key)) for key in (BASE, str(last)))
            ran = testcount.compared(base, now) if base is not None and now is not None else ""
            verified.append(f"gate `{' '.join(plan.test)}` {state.gates[str(last)]} "
                            f"(orchestrator{f'; {ran}' if ran else ''})")
        for name, result in state.scans.get(str(last), {}).items():
            verified.append(f"scanner {name} {result}")
        for role, verdict in state.reviewed.get(str(last), {}).items():
            path = self.tdir.report(role, last)
            review, _ = reports.parse(path.read_text(encoding="utf-8"), Kind.REVIEWER,
                                      role=role) if path.exists() else (None, [])
            # what the reviewer says it ran, in its own words: the plan only says what it was
            # asked to run
            said = (review.sections.get("tests run") or "").strip().splitlines() if review else []
            ran = clip_words(said[0], 14) if said else "its report names no tests run"
            verified.append(f"{role}: {ran}; verdict {verdict} at {short_sha(commit)}")
        open_findings = [e.attributed() for e in Ledger.of(state.ledger).open()] \
            if state.phase == Phase.ESCALATED else []
        weak = [weakened.described(w) for w in state.weakened.get(str(last), [])]
        shared = [o.shown() for o in overlaps.for_ticket(self.ws.home, state)]
        changed = self.ws.repo.diffstat(state.base_commit, commit) if commit != state.base_commit \
            else []
        return summary.final_report(
            ticket=state.ticket, outcome=state.phase, reason=state.reason, branch=state.branch,
            commit=commit, rounds=state.round, reviews=state.reviews, bounces=state.gate_bounces,
            changed=changed, verified=verified, open_findings=open_findings, weakened=weak,
            overlaps=shared,
            usage=per_round(self.tdir.events.read()[0], self.team.names))


def _entry(data: Mapping[str, Any]) -> Entry:
    """A finding a brief carries: a ledger entry, or (a ticket from before the ledger) a bare
    {file, line, reason} the reviewer raised."""
    if "id" in data:
        return Entry.from_fields(data)
    return Entry("", 0, ("reviewer",), str(data.get("file", "")), int(data.get("line", 0)),
                 str(data.get("reason", "")))


def gate_summary(result: GateResult | None, scans: Sequence[scanners.ScanResult]) -> str:
    """The gate's one line: its test command's summary, and each scanner's state."""
    parts = [result.summary()] if result is not None else []
    parts += [f"{s.name} {s.state}" for s in scans if s.state != "passed" or not s.required]
    if scans and all(s.state == "passed" for s in scans):
        parts.append(f"{len(scans)} scanner(s) passed")
    return "; ".join(parts) or "nothing to run"


def watched_folders(tdir: TicketDir, roles: Sequence[str] = DEFAULT.names) -> list[Path]:
    """What an orchestrator waits on: the ticket directory (reports, answers' folder) and each
    role's signal folder (`handoff doctor` tries the same set)."""
    return [tdir.path, tdir.answer(1).parent, *(tdir.signals(role) for role in roles)]


def gate_note(summary: str, commit: str, log: Path, output: str) -> tuple[str, str]:
    """The feedback a failed gate sends the implementer (also when resume --more-rounds
    carries an escalated ticket on from its last failed gate)."""
    tail = excerpt(output)  # bytes, not lines: one line may be 50 MB
    return ("The verification gate failed",
            f"{summary} at {short_sha(commit)}; the full output is in `{log}`. Its end:"
            f"\n\n```\n{tail}\n```")


def report_settled(path: Path, kind: str, role: str = "") -> bool:
    """Ready to judge: it parses whole (`handoff submit` renames a checked file into place), or
    nobody has written to it for a while (a peer that wrote it in place has finished)."""
    try:
        if time.time() - path.stat().st_mtime >= SETTLE:
            return True
        report, _ = reports.parse(read_text(path, REPORT_LIMIT, "the report"), kind, role=role)
    except FileNotFoundError:
        return False
    except UsageError:
        return True  # judged at once: take_report sets it aside
    return report is not None


