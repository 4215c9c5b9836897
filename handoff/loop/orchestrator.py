"""The ticket state machine. Resumable from the ticket directory alone.

Every step is idempotent: it looks at what is on disk (and what the peers' panes were started
for) before acting, so a `kill -9` at any point followed by `handoff resume` finishes the
ticket with nothing lost and no round done twice.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from handoff import trace
from handoff.errors import UsageError
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.loop import metering, notify, submission, summary
from handoff.loop.gate import end_left_gate, excerpt, record_path, run_gate
from handoff.loop.monitor import Decision, PeerMonitor
from handoff.loop.submission import provenance, set_aside, spend
from handoff.loop.validators import check_implementer, check_reviewer
from handoff.loop.workspace import Workspace
from handoff.machinery.peers import Peers, self_argv
from handoff.machinery.processes import environ, process_alive
from handoff.machinery.repo import short_sha
from handoff.machinery.tmux import Pane, Patience, ServerGone, TmuxFailure
from handoff.machinery.watch import POLL_INTERVAL, Watcher
from handoff.protocol import briefs, protected, reports
from handoff.protocol.intake import Intake, Request, Verdict
from handoff.protocol.reports import Finding, Report
from handoff.providers.base import first_message, shown
from handoff.providers.sessions import keeps_usage
from handoff.providers.signals import read_signals
from handoff.record import seals
from handoff.record.lock import TicketLock
from handoff.record.seals import Seals
from handoff.record.store import atomic_write, digest, file_digest
from handoff.record.ticket import FINISHED, State, TicketDir, brief_round
from handoff.record.usage import over_budget, per_round
from handoff.role import ROLES, phase_of

#: a commit named in full (SHA-1, or SHA-256 for repositories that use it)
FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
TICK = 0.5
#: the answers that let a ticket's change of control files stand
ALLOW_WORDS = ("allow", "allowed", "yes", "go", "ok", "approve", "approved")
#: seconds a `handoff recycle` may take to start a peer afresh before its marker is stale
RECYCLE_GRACE = 60.0
SETTLE = 1.0
MAX_REJECTIONS = 3

#: where each recorded event is shown as it happens (a foreground run prints them)
EventSink = Callable[[dict[str, Any]], None]


class Stopped(Exception):
    """SIGTERM/SIGHUP/SIGINT: leave everything as it is for `handoff resume`."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


@dataclass
class Watching:
    """The orchestrator's view of one running peer: its monitor and the last message sent."""

    monitor: PeerMonitor
    message: str
    since_ns: int
    #: the process it judges: another one in the pane was started by a `handoff recycle`
    pid: int = 0


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
        self.monitors: dict[str, Watching] = {}
        #: when this orchestrator launched each peer: its hooks' signals count from then
        self.launched_ns: dict[str, int] = {}
        #: where `handoff submit` hands reports over while this orchestrator runs
        self.intake = Intake(str(self.tdir.path))
        #: the report files this orchestrator judged and filed itself → the digest of their text
        self.judged: dict[str, str] = {}
        #: what wakes the waits of a run (`run` keeps it open): reports, signals, the intake
        self.watcher: Watcher | None = None

    # ---- bookkeeping -------------------------------------------------------------------
    def event(self, kind: str, role: str = "", **fields: Any) -> None:
        self.say(self.tdir.events.append(kind, round=self.state.round, role=role, **fields))

    def save(self) -> None:
        self.tdir.save(self.state)

    def transition(self, phase: str, reason: str = "") -> None:
        self.say(self.tdir.move(self.state, phase, reason))
        if phase in FINISHED:
            self.finish()  # before the person is told: the final report is there to read
        notify.phase_changed(self.state, self.ws.peers(self.state).tmux, self.ws.config.notify,
                             self.ws.repo.top, self.event)

    def next_round(self, findings: list[Finding], notes: list[tuple[str, str]]) -> None:
        self.state.round += 1
        self.state.relaunches = 0
        self.state.feedback = {"round": self.state.round,
                               "findings": [asdict(f) for f in findings],
                               "notes": [list(n) for n in notes]}
        self.transition("implementing")

    # ---- the loop ----------------------------------------------------------------------
    def run(self) -> State:
        with TicketLock(self.tdir.lock_file), self.intake, self.files_watched() as watcher:
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
                carried, self.state.relaunches = self.state.relaunches, 0
                if carried:
                    self.save()
                fenced = self.ws.sandbox()
                self.event("orchestrator", pid=os.getpid(), relaunches_before=carried,
                           intake=self.intake.error or "listening",
                           sandbox=fenced.why if fenced is not None else "none")
                while self.state.phase not in FINISHED:
                    step = {
                        "awaiting-approval": None,
                        "implementing": self.implementing,
                        "gating": self.gating,
                        "reviewing": self.reviewing,
                        "needs-human": self.needs_human,
                    }[self.state.phase]
                    if step is None:
                        return self.state
                    step()
                    self.check_budget()
                self.finish()
            except (Stopped, KeyboardInterrupt):
                self.event("stopped", phase=self.state.phase)
            except Exception as exc:  # recorded for `handoff log`, then shown as usual
                self.event("error", phase=self.state.phase,
                           message=getattr(exc, "message", None) or repr(exc))
                raise
            finally:
                signal.signal(signal.SIGTERM, old_term)
                signal.signal(signal.SIGHUP, old_hup)
        return self.state

    def setup(self) -> None:
        """Worktrees and the tmux session: created once, found again on resume."""
        state, wt = self.state, self.ws.worktrees
        if not state.worktrees:
            state.worktrees = {"implementer": str(wt.create_implementer(state.base_commit)),
                               "reviewer": str(wt.create_reviewer(state.base_commit))}
            state.branch = self.ws.branch()
            self.save()
            self.event("worktrees", **state.worktrees)
        else:  # each made again if deleted by hand, set up again if its setup had failed
            for role, rev in (("implementer", state.base_commit),
                              ("reviewer", state.last_commit())):
                made = wt.ensure(role, rev, recreate=True)
                if made.changed:
                    self.event("worktree", role, **made.fields())
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
        self.state.after_answer = self.state.phase
        self.transition("needs-human", f"{self.tdir.plan_md} changed after it was approved: "
                        "handoff runs no plan nobody approved. Put the approved plan back, or "
                        f"read the change and 'handoff answer {self.state.ticket} \"approved\"' "
                        "to approve the plan as it is now")
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
        self.state.after_answer = "gating"
        self.event("protected", files=touched, commit=commit)
        shown = ", ".join(touched[:8]) + (f" and {len(touched) - 8} more" if len(touched) > 8
                                          else "")
        self.transition("needs-human", f"round {n}'s commit changes control files, which steer "
                        f"handoff or the peers and which the plan does not list under "
                        f"may_change: {shown}. 'handoff answer {self.state.ticket} allow' lets "
                        "them stand and runs the gate; any other answer goes to the implementer "
                        "as its next round (e.g. \"put CLAUDE.md back\")")
        return False

    def implementing(self) -> None:
        if not self.plan_unchanged():
            return
        self.setup()
        n = self.state.round
        brief = self.tdir.brief("implementer", n)
        self.hand(brief, lambda: self.render_implementer_brief(n))
        self.ensure_briefed("implementer", brief, fresh=False)
        self.pass_on_note("implementer", brief)
        report = self.wait_for_report("implementer", n, brief)
        if report is not None:
            self.accept_implementation(n, report)

    def render_implementer_brief(self, n: int) -> str:
        feedback = self.state.feedback if self.state.feedback.get("round") == n else {}
        findings = [Finding(**f) for f in feedback.get("findings", [])]
        notes = [(str(t), str(x)) for t, x in feedback.get("notes", [])]
        ctx = self.ws.brief_context(self.state, "implementer", n)
        return briefs.implementer(ctx, self.ws.branch(), findings, notes)

    def ensure_briefed(self, role: str, brief: Path, fresh: bool) -> None:
        """Make sure the role's live process is working on brief, without sending it twice.

        fresh: always start a new process (the reviewer); otherwise paste into the running
        CLI and fall back to a fresh start when the paste is not taken.
        """
        peers = self.ws.peers(self.state)
        if peers.working_on(role) == str(brief):
            return
        pane = peers.pane(role)
        round_ = brief_round(brief)
        if fresh or pane is None or pane.dead or round_ is None:
            self.launch(role, brief, "")
            return
        # its seal, from its own environment: the orchestrator that launched it (and knew its
        # seal) may have died since
        seal = environ(pane.pid).get(seals.ENV, "")
        if not seal:
            self.launch(role, brief, "its seal cannot be read, so it could not file its report")
            return
        # the live process may file this round's report: the seal it was started with
        Seals(self.tdir.path).grant(role, round_, seal)
        self.launched_ns[role] = signal_clock()  # its signals count from this message on
        delivery = peers.deliver_brief(self.ws.provider(role), role, brief)
        if delivery:
            self.event("brief", role, brief=str(brief), by="paste")
            self.monitors.pop(role, None)
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
        self.monitors.pop(role, None)
        self.event("launch", role, brief=str(brief), provider=self.ws.config.providers[role],
                   message=first_message(brief), reason=reason,
                   **({"session_id": launch.session_id} if launch.signals else {}))

    def pass_on_note(self, role: str, brief: Path) -> None:
        """A person's answer for the same round goes to the live peer; a peer that cannot take
        it (gone, or still on a dialog) starts afresh on its brief."""
        note, self.state.note_for_peer = self.state.note_for_peer, ""
        if not note:
            return
        self.save()
        since = signal_clock()
        message = (f"A person answered: {' '.join(note.split())[:800]} -- Read and follow "
                   f"{shown(brief)} to the end and file your report with its submit command.")
        delivery = self.ws.peers(self.state).deliver(self.ws.provider(role), role, message)
        self.event("answer-passed-on", role, delivered=delivery.taken, why=delivery.why)
        if delivery:
            self.monitors[role] = self.watching(role, message, since)
        else:
            self.launch(role, brief, "answered")

    def wait_for_report(self, role: str, n: int, brief: Path) -> Report | None:
        """Wait for the round's report, watching the peer meanwhile: a dead one, or one whose
        tmux server is gone, is relaunched (bounded), a stuck one nudged or handed to a person.
        A tmux that does not answer proves no death: it gets Patience, then the TmuxFailure
        ends the run for a later resume. None: the phase changed.

        Waiting runs nothing: a report or a hook's signal wakes it (inotify), so does the
        peer's exit (a pidfd on its process). The peer is looked at (its pane listed, its
        screen read) only when one of those says so, or when `PeerMonitor.next_look` is due."""
        path = self.tdir.report(role, n)
        peers = self.ws.peers(self.state)
        patience = Patience(self.state.ticket)
        look_at = 0.0  # now: every wait starts with a look
        with self.files_watched() if self.watcher is None else nullcontext(self.watcher) \
                as watcher:
            watcher.follow(None)  # the peer of an earlier wait is not this one's
            while True:
                self.intake.serve(self.judge_handed)
                if path.exists() and report_settled(path, role):
                    report = self.take_report(role, n, path)
                    if report is not None or self.state.phase != phase_of(role) \
                            or self.state.round != n:
                        return report
                    continue
                if time.monotonic() >= look_at or watcher.exited or self.signalled(role):
                    looked = self.look(role, n, brief, peers, patience, watcher)
                    if looked is None:
                        return None
                    look_at = time.monotonic() + looked
                watcher.wait(max(look_at - time.monotonic(), 0.0))

    def look(self, role: str, n: int, brief: Path, peers: Peers, patience: Patience,
             watcher: Watcher) -> float | None:
        """Look at the peer once and act on it; seconds until the next look is due, None when
        the wait is over (a person must step in, or the peer could not be revived)."""
        try:
            try:
                pane, lost = peers.look(role), ""
            except ServerGone as gone:
                pane, lost = None, gone.message
            if (pane is None or pane.dead) and self.recycled_by_hand(role):
                watcher.follow(None)
                return TICK  # a person's `handoff recycle` is starting it afresh
            if pane is None or pane.dead:
                watcher.follow(None)
                if not self.revive(role, brief, pane is not None,
                                   peers.exit_status(role) if pane else None, lost):
                    return None
                return TICK
            if not watcher.follow(pane.pid):
                return TICK  # its exit cannot wake us (no pidfd, or tmux has yet to see it)
            if not self.watch(role, n, brief, self.tdir.report(role, n), pane):
                return None
        except TmuxFailure as failure:
            if patience.failed(failure):  # raises once tmux was silent for too long
                self.event("tmux", role, state="failing", message=failure.message,
                           patience=patience.limit)
            return TICK
        except ServerGone:
            return TICK  # it went away in the middle: the next look relaunches on a new one
        silent = patience.answered()
        if silent is not None:
            self.event("tmux", role, state="answering", after=round(silent, 1))
        watching = self.monitors.get(role)
        if watching is None:
            return TICK
        return watching.monitor.next_look(time.monotonic(), self.ws.provider(role).signals)

    def files_watched(self) -> Watcher:
        """A watcher of what the loop waits on: `watched_folders`, and the intake's socket."""
        watcher = Watcher(watched_folders(self.tdir), also=[self.intake.fileno()])
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
        return age < RECYCLE_GRACE and process_alive(pid)

    def signalled(self, role: str) -> bool:
        """A hook of the role's peer wrote a signal not yet judged."""
        watching = self.monitors.get(role)
        return watching is not None and bool(read_signals(self.tdir.signals(role),
                                                          watching.since_ns))

    def watching(self, role: str, message: str, since_ns: int) -> Watching:
        """A fresh judgement of the role's peer, from message (the last one it was sent) on."""
        monitor = PeerMonitor(time.monotonic(), self.ws.timing(),
                              frozenset(self.ws.config.roles[role].answer))
        return Watching(monitor, message, since_ns)

    def watch(self, role: str, n: int, brief: Path, report: Path, pane: Pane) -> bool:
        """Read the screen of the peer's live pane (just looked up) and act on what it shows;
        False: a person must step in."""
        watching = self.monitors.get(role)
        if watching is not None and watching.pid and watching.pid != pane.pid:
            # started afresh by a person (`handoff recycle`): judged afresh, signals from now
            self.launched_ns[role] = signal_clock()
            self.event("peer", role, state="recycled", evidence=f"pid {watching.pid} was "
                       f"replaced by pid {pane.pid} in its pane (handoff recycle)")
            watching = None
        if watching is None:
            watching = self.monitors[role] = self.watching(
                role, first_message(brief), self.launched_ns.get(role, signal_clock()))
            watching.pid = pane.pid
        peers, provider = self.ws.peers(self.state), self.ws.provider(role)
        screen = peers.screen_of(pane)
        signals = read_signals(self.tdir.signals(role), watching.since_ns)
        if signals:
            watching.since_ns = signals[-1].mtime_ns + 1
        reading = provider.read(screen) if screen is not None else None
        submitted = screen is not None and provider.rules.submitted(screen, watching.message)
        for decision in watching.monitor.observe(time.monotonic(), reading, signals, submitted,
                                                 screen or ""):
            if report.exists():
                return True  # the report came in meanwhile: it is judged first
            if not self.act(role, n, brief, decision, watching, screen or ""):
                return False
        return True

    def act(self, role: str, n: int, brief: Path, decision: Decision, watching: Watching,
            screen: str) -> bool:
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
            watching.message, watching.since_ns = message, since
            watching.monitor.after_nudge_or_answer(time.monotonic())
        else:
            return self.escalate(role, decision, screen)
        return True

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

    def escalate(self, role: str, decision: Decision, screen: str) -> bool:
        """Hand the peer to a person: its screen kept, the reason and the fix spelled out."""
        shown = self.tdir.transcript(role, self.state.round)
        self.ws.peers(self.state).capture(role, shown)
        self.ws.keep_session(self.state, role, shown)
        last = [line.rstrip() for line in screen.strip().splitlines()[-8:]]
        self.event("escalate", role, state=decision.state, evidence=decision.evidence,
                   fix=decision.fix, screen=shown.name, last_lines=last)
        self.state.after_answer = phase_of(role)
        self.transition("needs-human", f"the {role} needs a person ({decision.state}): "
                        f"{decision.evidence}. Fix: {decision.fix} (its screen is in "
                        f"transcripts/{shown.name}); then 'handoff answer {self.state.ticket} "
                        "TEXT' to carry on")
        return False

    def revive(self, role: str, brief: Path, existed: bool, status: int | None,
               lost: str = "") -> bool:
        """A peer died before reporting, or (lost: what tmux said) the tmux server went away
        with it: keep its screen, make the session again as resume does, relaunch it on the
        same brief. Both count as relaunches, so a server that keeps dying is bounded too."""
        self.state.relaunches += 1
        self.save()
        if lost:
            self.event("tmux", role, state="server-gone", message=lost,
                       relaunches=self.state.relaunches)
        else:
            self.event("death", role, exit_status=status, existed=existed,
                       relaunches=self.state.relaunches)
        if self.state.relaunches > self.state.max_relaunches:
            if existed:
                self.ws.peers(self.state).capture(role, self.tdir.transcript(role, self.state.round))
            self.state.after_answer = phase_of(role)
            self.transition("needs-human",
                            f"the {role} died {self.state.relaunches} times this round; see "
                            "transcripts/, then 'handoff answer' to carry on")
            return False
        follow = self_argv("log", self.state.ticket, "--repo", str(self.ws.repo.top), "--follow")
        if self.ws.peers(self.state).ensure_session(self.ws.repo.top, follow):
            notify.show_phase(self.state, self.ws.peers(self.state).tmux)
            self.event("session", session=self.state.session, socket=self.state.socket,
                       reason="the tmux server was gone" if lost else "the session was gone")
        self.launch(role, brief, "tmux server gone" if lost else "relaunch")
        return True

    def judge_handed(self, request: Request) -> Verdict:
        """The verdict on a report `handoff submit` handed over: judged here, once."""
        if request.role not in ROLES:
            return Verdict(None, [f"unknown role {request.role!r}"])
        filed, problems = submission.judge(self.ws, self.state, request.role, request.round,
                                           request.report, request.seal)
        if filed is None:
            return Verdict(None, problems)
        self.judged[filed.name] = digest(request.report)
        self.event("submitted", request.role, report=filed.name, pid=request.pid)
        return Verdict(str(filed), [])

    def take_report(self, role: str, n: int, path: Path) -> Report | None:
        """Parse and check a filed report; a bad one is set aside and the peer told why. One
        this orchestrator judged itself (`judge_handed`) and nobody changed since is not
        checked again."""
        try:
            text = read_text(path, REPORT_LIMIT, "the report")
            judged = self.judged.pop(path.name, None) == digest(text)
            forged = "" if judged else provenance(self.tdir, path, text, role, n)
        except UsageError as exc:  # too large or not text: `handoff submit` never filed it
            text, forged, judged = "", exc.message, False
        if forged:
            self.state.rejections += 1
            self.save()
            event = set_aside(self.tdir, path, role, n, forged)
            if event is not None:
                self.say(event)
            if self.state.rejections > MAX_REJECTIONS:
                self.transition("needs-human", f"{self.state.rejections} reports were rejected; "
                                f"the last: {path.name} {forged}")
            return None
        spend(self.tdir, path)
        report, problems = reports.parse(text, role, {"role": role, "round": n,
                                                      "ticket": self.state.ticket})
        if report is not None and not judged:
            if role == "implementer":
                # submit checked the worktree when it filed the report; only the history
                # claims are re-checked here
                problems = check_implementer(report, self.ws.repo, self.ws.worktrees,
                                             self.state.last_commit(), worktree_state=False)
            else:
                problems = check_reviewer(report, self.ws.repo, self.state.commit_of(n))
        if not problems and report is not None and role == "reviewer" and \
                report.verdict == "pass":
            changed = self.changed_checkout(self.state.commit_of(n))
            if changed:  # a pass counts only from the exact commit
                problems = [f"the review passed in a checkout that is not the commit under "
                            f"review any more ({changed}): it is reset, review it again"]
        if not problems and report is not None:
            self.event("submission", role, report=path.name, accepted=True,
                       commit=report.commit, **({"status": report.status} if report.status
                                                else {"verdict": report.verdict}))
            self.record_usage(role)
            return report
        self.state.rejections += 1
        rejected = path.with_name(f"{path.stem}.rejected-{self.state.rejections}.md")
        path.replace(rejected)
        self.save()
        self.event("submission", role, report=rejected.name, accepted=False, problems=problems)
        if self.state.rejections > MAX_REJECTIONS:
            self.transition("needs-human", f"{self.state.rejections} reports were rejected; "
                            "the last problems: " + "; ".join(problems))
        elif role == "implementer":
            self.next_round([], [("Your last report was not accepted",
                                  "".join(f"- {p}\n" for p in problems))])
        else:
            self.point_reviewer(n)
            self.launch(role, self.tdir.brief(role, n), "report rejected")
        return None

    def point_reviewer(self, n: int) -> None:
        """The reviewer's checkout back at round n's commit, whatever was left in it kept."""
        self.ws.worktrees.point_reviewer(self.state.commit_of(n), self.tdir.path /
                                         "transcripts" / f"reviewer-scratch-{n}.patch")

    def changed_checkout(self, commit: str, untracked: bool = False) -> str:
        """Why the reviewer's checkout (where the gate and the review run) is no longer exactly
        commit: its HEAD moved, tracked files changed, or (untracked: for the gate, which starts
        on a checkout cleaned of them) files not ignored appeared, such as a planted
        conftest.py; '' when it is exactly commit."""
        head = self.ws.worktrees.head("reviewer")
        if head != commit:
            return f"its HEAD is {short_sha(head)}, not {short_sha(commit)}"
        entries = self.ws.worktrees.dirty(self.ws.worktrees.path("reviewer"))
        changed = [e[3:] for e in entries if not e.startswith("??")]
        if changed:
            return f"tracked files changed: {', '.join(changed[:5])}"
        new = [e[3:] for e in entries if e.startswith("??")] if untracked else []
        return (f"files appeared that .gitignore does not cover: {', '.join(new[:5])} (a test "
                "that writes files should write them where .gitignore says)") if new else ""

    def record_usage(self, role: str) -> None:
        """What the role's CLI spent on the round just reported, from its own session files
        (handoff.loop.metering); nothing is recorded for a CLI that keeps none (the scripted agent)."""
        worktree = self.state.worktrees.get(role)
        provider = self.ws.config.providers[role]
        if not worktree or not keeps_usage(provider):
            return  # before reading the whole event log: it is on the hand-over's path
        events, _ = self.tdir.events.read()
        fields = metering.measure(provider, role, Path(worktree), events, os.environ)
        if fields is not None:
            self.event("usage", role, **fields)

    def check_budget(self) -> None:
        """After each step: when the peers' usage has passed the budget, a person decides
        whether the ticket goes on; their answer carries it on where it stood."""
        budget = self.ws.config.budget
        if budget is None or self.state.phase in (*FINISHED, "needs-human", "awaiting-approval"):
            return
        events, _ = self.tdir.events.read()
        over = over_budget(events, budget.tokens, budget.cost_usd)
        if over is None:
            return
        self.event("budget", **over)
        spent = f"${over['total']}" if over["over"] == "cost_usd" else f"{over['total']:,} tokens"
        limit = f"${over['limit']}" if over["over"] == "cost_usd" else f"{over['limit']:,} tokens"
        self.state.after_answer = self.state.phase
        self.transition("needs-human", f"over budget: the peers used {spent}, the budget "
                        f"({over['over']}) is {limit}; 'handoff answer {self.state.ticket} TEXT' "
                        "carries it on (raise budget in the config to be asked again later)")

    def accept_implementation(self, n: int, report: Report) -> None:
        if report.status == "blocked":
            question = report.sections.get("open questions", "").strip()
            self.transition("needs-human", f"the implementer is blocked: {question}")
            return
        # judged: the commit exists; a full sha is its own resolution (no git call)
        commit = report.commit
        self.state.commits[str(n)] = commit if FULL_SHA.fullmatch(commit) \
            else self.ws.repo.resolve(commit)
        self.transition("gating")

    def gating(self) -> None:
        if not self.plan_unchanged() or not self.control_files_allowed():
            return
        left = end_left_gate(record_path(self.tdir.path))
        if left is not None:  # a killed orchestrator's gate: ended first, never two at once
            self.event("gate", result="ended", reason="left running by an earlier orchestrator",
                       **left)
        n, plan = self.state.round, self.ws.plan()
        commit = self.state.commit_of(n)
        peers = self.ws.peers(self.state)
        if peers.working_on("reviewer"):
            transcript = self.ws.transcript_for(self.state, "reviewer")
            peers.leave(self.ws.provider("reviewer"), "reviewer")
            self.ws.keep_session(self.state, "reviewer", transcript)
            peers.retire("reviewer", transcript)
            self.event("recycle", "reviewer", stage="stopped", by="orchestrator")
        self.point_reviewer(n)
        if plan.test is None:
            self.state.gates[str(n)] = "skipped"
            self.event("gate", result="skipped", reason="the plan names no test command")
            self.transition("reviewing")
            return
        self.event("gate", result="running", command=list(plan.test), commit=commit)
        result = run_gate(plan.test, self.ws.worktrees.path("reviewer"), self.ws.env("reviewer"),
                          self.ws.config.gate_timeout, self.tdir.gate_log(n),
                          record=record_path(self.tdir.path), fence=self.ws.gate_fence())
        changed = self.changed_checkout(commit, untracked=True) if result.passed else ""
        if changed:  # a pass counts only at the exact commit: someone wrote into the checkout
            self.event("gate", result="void", why=changed, log=self.tdir.gate_log(n).name,
                       commit=commit)
            self.state.after_answer = "gating"
            self.transition("needs-human", f"the gate passed, but its checkout changed while it "
                            f"ran ({changed}): its pass is not taken. Look at the reviewer's "
                            f"worktree (a peer may have written into it), then 'handoff answer "
                            f"{self.state.ticket} \"go\"' runs the gate again on a reset checkout")
            return
        self.state.gates[str(n)] = "pass" if result.passed else "fail"
        self.event("gate", result=self.state.gates[str(n)], summary=result.summary(),
                   log=self.tdir.gate_log(n).name, commit=commit)
        if result.passed:
            self.transition("reviewing")
            return
        self.state.gate_bounces += 1
        if self.state.gate_bounces >= self.state.max_gate_bounces:
            self.transition("escalated", f"the verification gate failed "
                            f"{self.state.gate_bounces} times: {result.summary()}")
            return
        self.next_round([], [gate_note(result.summary(), commit, self.tdir.gate_log(n),
                                       result.output)])

    def reviewing(self) -> None:
        if not self.plan_unchanged():
            return
        self.setup()
        n = self.state.round
        commit = self.state.commit_of(n)
        diff = self.tdir.diff(n)
        self.hand(diff, lambda: self.ws.repo.diff(self.state.base_commit, commit) + "\n")
        if self.ws.worktrees.head("reviewer") != commit:
            self.point_reviewer(n)
        brief = self.tdir.brief("reviewer", n)
        self.hand(brief, lambda: briefs.reviewer(self.ws.brief_context(self.state, "reviewer", n),
                                                 commit, diff))
        self.ensure_briefed("reviewer", brief, fresh=True)
        self.pass_on_note("reviewer", brief)
        report = self.wait_for_report("reviewer", n, brief)
        if report is not None:
            self.judge(n, report)

    def judge(self, n: int, report: Report) -> None:
        self.state.verdicts[str(n)] = report.verdict
        self.state.findings[str(n)] = [f.key() for f in report.must_fix]
        self.save()
        self.event("verdict", "reviewer", verdict=report.verdict, commit=report.commit,
                   must_fix=[f.render() for f in report.must_fix],
                   should_fix=[f.render() for f in report.should_fix])
        if report.verdict == "pass":
            self.transition("passed")
            return
        earlier = {key for r, keys in self.state.findings.items() if r != str(n) for key in keys}
        repeated = [f for f in report.must_fix if f.key() in earlier]
        if repeated:
            self.transition("escalated", "the same must-fix came back: " + repeated[0].render())
        elif self.state.reviews >= self.state.max_rounds:
            self.transition("escalated", f"still failing after {self.state.reviews} review "
                            "round(s) (--max-rounds)")
        else:
            self.next_round(list(report.must_fix), [])

    def needs_human(self) -> None:
        """Wait for `handoff answer`; the answer starts the implementer's next round."""
        number = self.state.answers_used + 1
        path = self.tdir.answer(number)
        with self.files_watched() if self.watcher is None else nullcontext(self.watcher) \
                as watcher:
            while not path.exists():
                watcher.wait(TICK)
        self.state.answers_used = number
        text = path.read_text(encoding="utf-8")
        approved = file_digest(self.tdir.plan_md)
        if approved != self.state.plan_digest:  # the person was told it changed, and answered
            self.state.plan_digest = approved
            self.event("plan-approved", by="answer", digest=approved)
        if self.state.asked_changes:  # the ticket asked about control files its commit changed
            asked, self.state.asked_changes = self.state.asked_changes, []
            if " ".join(text.split()).lower().rstrip(".!") in ALLOW_WORDS:
                self.state.allowed_changes = sorted({*self.state.allowed_changes, *asked})
                self.event("protected-allowed", files=asked)
            else:  # not allowed: the answer goes to the implementer, the gate waits for it
                self.state.after_answer = ""
        same_round, self.state.after_answer = self.state.after_answer, ""
        if same_round:  # the same round: its peer is told the answer (or started afresh if dead)
            self.state.relaunches = 0
            # gating has no peer to tell (a budget stop after a report): the answer only
            # carries the ticket on, it is not for the reviewer that comes next
            self.state.note_for_peer = text if same_round in ("implementing", "reviewing") \
                else ""
            self.monitors.clear()
            self.transition(same_round, "answered: " + " ".join(text.split())[:200])
        else:
            self.next_round([], [("A person answered", text)])

    def finish(self) -> None:
        if self.state.phase == "closed" or self.tdir.final_report.exists():
            return
        atomic_write(self.tdir.final_report, self.render_final())
        self.event("final-report", outcome=self.state.phase, reason=self.state.reason)

    def render_final(self) -> str:
        state, plan = self.state, self.ws.plan()
        commit = state.last_commit()
        verified = []
        last = max((int(r) for r in state.commits), default=0)
        if plan.test and str(last) in state.gates:
            verified.append(f"gate `{' '.join(plan.test)}` {state.gates[str(last)]} "
                            f"(orchestrator)")
        review: Report | None = None
        if str(last) in state.verdicts:
            review, _ = reports.parse(self.tdir.report("reviewer", last).read_text(
                encoding="utf-8"), "reviewer")
            # what the reviewer says it ran, in its own words: the plan only says what it was
            # asked to run
            said = (review.sections.get("tests run") or "").strip().splitlines() if review else []
            ran = clip_words(said[0], 14) if said else "its report names no tests run"
            verified.append(f"reviewer: {ran}; verdict {state.verdicts[str(last)]} at "
                            f"{short_sha(commit)}")
        open_findings = list(review.must_fix) if review and state.phase == "escalated" else []
        changed = self.ws.repo.diffstat(state.base_commit, commit) if commit != state.base_commit \
            else []
        return summary.final_report(
            ticket=state.ticket, outcome=state.phase, reason=state.reason, branch=state.branch,
            commit=commit, rounds=state.round, reviews=state.reviews, bounces=state.gate_bounces,
            changed=changed, verified=verified, open_findings=open_findings,
            usage=per_round(self.tdir.events.read()[0]))


def watched_folders(tdir: TicketDir) -> list[Path]:
    """What an orchestrator waits on: the ticket directory (reports, answers' folder) and both
    roles' signal folders (`handoff doctor` tries the same set)."""
    return [tdir.path, tdir.answer(1).parent, *(tdir.signals(role) for role in ROLES)]


def gate_note(summary: str, commit: str, log: Path, output: str) -> tuple[str, str]:
    """The feedback a failed gate sends the implementer (also when resume --more-rounds
    carries an escalated ticket on from its last failed gate)."""
    tail = excerpt(output)  # bytes, not lines: one line may be 50 MB
    return ("The verification gate failed",
            f"{summary} at {short_sha(commit)}; the full output is in `{log}`. Its end:"
            f"\n\n```\n{tail}\n```")


def report_settled(path: Path, role: str) -> bool:
    """Ready to judge: it parses whole (`handoff submit` renames a checked file into place), or
    nobody has written to it for a while (a peer that wrote it in place has finished)."""
    try:
        if time.time() - path.stat().st_mtime >= SETTLE:
            return True
        report, _ = reports.parse(read_text(path, REPORT_LIMIT, "the report"), role)
    except FileNotFoundError:
        return False
    except UsageError:
        return True  # judged at once: take_report sets it aside
    return report is not None
