"""Waiting for the peers' reports while watching them work.

Like a test runner's worker controller, this waits and reports: what a peer's screen, hooks and
pane say is read here, `PeerMonitor` decides what it means, and the decision is carried out here
(a dialog answered, a nudge, a relaunch, a person asked). A wait runs nothing: a report or a
hook's signal wakes it (inotify), so does a peer's exit (a pidfd on its process).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from handoff.loop import failover, rules, submission
from handoff.loop.context import TicketContext
from handoff.loop.crew import Crew, PeerView, signal_clock
from handoff.loop.desk import ReportDesk
from handoff.loop.monitor import Action, Decision
from handoff.loop.submission import set_aside
from handoff.loop.summary import clip_words
from handoff.machinery.patience import Patience
from handoff.machinery.peers import Peers
from handoff.machinery.tmux import Pane, ServerGone, TmuxFailure
from handoff.machinery.watch import POLL_INTERVAL, Watcher
from handoff.processes import alive
from handoff.protocol.reports import Report
from handoff.providers.base import first_message, shown
from handoff.providers.screen import READY, STARTING
from handoff.providers.signals import read_signals
from handoff.record.ticket import TicketDir
from handoff.role import DEFAULT
from handoff.signs import STOP

TICK = 0.5
#: seconds a `handoff recycle` may take to start a peer afresh before its marker is stale
RECYCLE_GRACE = 60.0
#: seconds between looks at a tester or reviewer that filed its report but is still in its turn
TURN_LOOK = 0.2

#: told of each report as a wait takes it: (role, round, report)
Accepted = Callable[[str, int, Report], None]


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


def nudge_message(n: int, brief: Path) -> str:
    return (f"You ended your turn without filing your report for round {n}. Read and follow "
            f"{shown(brief)} to the end: file your report with the submit command it gives.")


def watched_folders(tdir: TicketDir, roles: Sequence[str] = DEFAULT.names) -> list[Path]:
    """What an orchestrator waits on: the ticket directory (reports, answers' folder) and each
    role's signal folder (`handoff doctor` tries the same set)."""
    return [tdir.path, tdir.answer(1).parent, *(tdir.signals(role) for role in roles)]


class Watch:
    def __init__(self, ctx: TicketContext, crew: Crew, desk: ReportDesk) -> None:
        self.ctx = ctx
        self.crew = crew
        self.desk = desk
        #: what wakes the waits of a run (`Orchestrator.run` keeps it open)
        self.watcher: Watcher | None = None

    def file_watcher(self) -> Watcher:
        """A watcher of what the loop waits on: `watched_folders`, and the intake's socket."""
        watcher = Watcher(watched_folders(self.ctx.tdir, self.ctx.team.names),
                          also=[self.desk.intake.fileno()])
        if watcher.polling:  # it still works, at a look every POLL_INTERVAL: say why
            self.ctx.event("watch", state="polling", every=POLL_INTERVAL,
                           reason=watcher.polling)
        return watcher

    @contextmanager
    def watching(self) -> Iterator[Watcher]:
        """The run's watcher, or (a step called outside a run) one of its own."""
        if self.watcher is not None:
            yield self.watcher
            return
        with self.file_watcher() as watcher:
            yield watcher

    def wait_for_answer(self, path: Path) -> None:
        """Until a person's answer is at path."""
        with self.watching() as watcher:
            while not path.exists():
                watcher.wait(TICK)

    def wait_for_reports(self, briefed: Mapping[str, Path],
                         accepted: Accepted | None = None) -> dict[str, Report] | None:
        """Wait for the reports of the briefed peers (role → brief), watching each one
        meanwhile: a dead one, or one whose tmux server is gone, is relaunched (bounded), a
        stuck one nudged or held for a person while the others go on. A tmux that does not
        answer proves no death: it gets Patience, then the TmuxFailure ends the run for a
        later resume. accepted: told of each report as it is taken. None: the phase changed
        (a person must step in, or the round went on).

        A peer is looked at (its pane listed, its screen read) only when a report, a signal or
        its exit says so, or when `PeerMonitor.next_look` is due."""
        ctx = self.ctx
        n, phase = ctx.state.round, ctx.state.phase
        peers = ctx.ws.peers(ctx.state)
        waits = [Awaited(role, brief, ctx.tdir.report(role, n), Patience(ctx.state.ticket))
                 for role, brief in briefed.items()]
        got: dict[str, Report] = {}

        def moved() -> bool:  # a filing a person must look at, or the round went on
            return ctx.state.phase != phase or ctx.state.round != n

        with self.watching() as watcher:
            for wait in waits:
                watcher.follow(None, wait.role)  # the peer of an earlier wait is not this one's
            while True:
                self.desk.intake.serve(self.desk.judge_handed)
                for cut in self.desk.intake.cut():  # a client too slow to send its request
                    ctx.event("intake", pid=cut.pid, why=cut.why)
                if moved() or not self._take_filed(waits, got, n, accepted, moved):
                    return None
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
                        if ctx.state.phase != phase:
                            return None
                        wait.look_at = time.monotonic() + (looked or 0.0)
                working = [w for w in waits if w.role not in got and not w.held]
                if working:
                    due = min(w.look_at for w in working)
                    watcher.wait(max(due - time.monotonic(), 0.0))

    def _take_filed(self, waits: Sequence[Awaited], got: dict[str, Report], n: int,
                    accepted: Accepted | None, moved: Callable[[], bool]) -> bool:
        """Take every report filed and whole; False when taking one moved the ticket on. A
        held peer's report counts too: a person may have mended it meanwhile."""
        for wait in (w for w in waits if w.role not in got):
            if not self.desk.whole(wait.report, wait.role):
                continue
            if submission.taken_at_turn_end(self.ctx.team.kind(wait.role)) and \
                    not self.turn_over(wait.role):
                # a tester or reviewer ran the code under review, which may file in its
                # name: what it files itself, last, counts (handoff.loop.filer)
                wait.look_at = min(wait.look_at, time.monotonic() + TURN_LOOK)
                continue
            report = self.desk.take_report(wait.role, n, wait.report)
            if moved():
                return False
            if report is not None:
                got[wait.role], wait.held = report, ""
                if accepted is not None:
                    accepted(wait.role, n, report)
        return True

    def hand_to_person(self, held: Sequence[Awaited]) -> None:
        """The peers that need a person, once every other peer of the phase has reported."""
        self.ctx.state.held = [w.role for w in held]
        self.ctx.apply(rules.ask("; ".join(w.held for w in held),
                                 after_answer=self.ctx.state.phase))

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
                wait.held = self.crew.revive(role, brief, pane is not None,
                                             peers.exit_status(role) if pane else None, lost)
                return None if wait.held else TICK
            if not watcher.follow(pane.pid, role):
                return TICK  # its exit cannot wake us (no pidfd, or tmux has yet to see it)
            wait.held = self.assess(role, n, brief, wait.report, pane)
            if wait.held:
                return None
        except TmuxFailure as failure:
            if wait.patience.failed(failure):  # raises once tmux was silent for too long
                self.ctx.event("tmux", role, state="failing", message=failure.message,
                               patience=wait.patience.limit)
            return TICK
        except ServerGone:
            return TICK  # it went away in the middle: the next look relaunches on a new one
        silent = wait.patience.answered()
        if silent is not None:
            self.ctx.event("tmux", role, state="answering", after=round(silent, 1))
        view = self.crew.views.get(role)
        if view is None:
            return TICK
        return view.monitor.next_look(time.monotonic(), self.ctx.ws.provider(role).signals)

    def recycled_by_hand(self, role: str) -> bool:
        """A `handoff recycle` of the role is under way (its marker is fresh and its process
        alive): the peer's end is its doing, not a death to count and relaunch."""
        marker = self.ctx.tdir.recycling(role)
        try:
            pid, age = int(marker.read_text(encoding="utf-8")), time.time() - marker.stat().st_mtime
        except (OSError, ValueError):
            return False
        return age < RECYCLE_GRACE and alive(pid)

    def turn_over(self, role: str) -> bool:
        """The role's CLI has finished its turn: its screen, read from outside the sandbox, shows
        it ready for a message (a hook's signal file, which the peer can write, only says when
        to look)."""
        peers = self.ctx.ws.peers(self.ctx.state)
        try:
            pane = peers.look(role)
        except (ServerGone, TmuxFailure):
            return False
        screen = peers.screen_of(pane)
        if screen is None:
            return False
        state = self.ctx.ws.provider(role).read(screen).state
        if state == READY:
            return True
        # a screen none of its rules read (a CLI release handoff does not know yet, or a
        # role's own markers that miss): its hooks are all there is, and a Stop after the
        # filing is taken, as the rest of the loop takes them then (a weaker word: the peer
        # can write its signals folder; said in docs/reliability.md)
        filed = self.desk.filed_ns.get(role, 0)
        return state == STARTING and filed > 0 and any(
            signal.event == STOP for signal in read_signals(self.ctx.tdir.signals(role), filed))

    def void_unfinished(self, role: str, n: int, report: Path) -> None:
        """A tester's or reviewer's reports of this round, filed by a session that ended before
        its turn did, are not taken: the code under review could have filed one and then ended
        the session before the peer filed its own. Kept beside the record; the relaunched peer
        files afresh."""
        ctx = self.ctx
        if not submission.taken_at_turn_end(ctx.team.kind(role)):
            return
        for path in [*submission.filed_before(ctx.tdir, report), report]:
            if path.exists():
                self.desk.forget(path.name)
                event = set_aside(ctx.tdir, path, role, n,
                                  "its session ended before its turn was over", kind="void")
                if event is not None:
                    ctx.say(event)

    def signalled(self, role: str) -> bool:
        """A hook of the role's peer wrote a signal not yet judged."""
        view = self.crew.views.get(role)
        return view is not None and bool(read_signals(self.ctx.tdir.signals(role),
                                                      view.since_ns))

    def assess(self, role: str, n: int, brief: Path, report: Path, pane: Pane) -> str:
        """Read the screen of the peer's live pane (just looked up) and act on what it shows;
        why a person must step in ('' while it need not)."""
        ctx, crew = self.ctx, self.crew
        view = crew.views.get(role)
        if view is not None and view.pid and view.pid != pane.pid:
            # started afresh by a person (`handoff recycle`): judged afresh, signals from now
            crew.launched_ns[role] = signal_clock()
            ctx.event("peer", role, state="recycled", evidence=f"pid {view.pid} was "
                      f"replaced by pid {pane.pid} in its pane (handoff recycle)")
            view = None
        if view is None:
            view = crew.views[role] = crew.new_view(
                role, first_message(brief), crew.launched_ns.get(role, signal_clock()))
            view.pid = pane.pid
        peers, provider = ctx.ws.peers(ctx.state), ctx.ws.provider(role)
        screen = peers.screen_of(pane)
        signals = read_signals(ctx.tdir.signals(role), view.since_ns)
        if signals:
            view.since_ns = signals[-1].mtime_ns + 1
        reading = provider.read(screen) if screen is not None else None
        submitted = screen is not None and provider.rules.submitted(screen, view.message)
        for decision in view.monitor.observe(time.monotonic(), reading, signals, submitted,
                                             screen or ""):
            if report.exists() and (decision.action == Action.NUDGE or not submission.
                                    taken_at_turn_end(ctx.team.kind(role))):
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
        ctx = self.ctx
        peers, provider = ctx.ws.peers(ctx.state), ctx.ws.provider(role)
        if decision.action == Action.NOTE:
            ctx.event("peer", role, state=decision.state, evidence=decision.evidence)
        elif decision.action == Action.ANSWER:
            gone = peers.answer(provider, role, decision.keys, decision.dialog)
            ctx.event("dialog", role, state=decision.state, evidence=decision.evidence,
                      keys=list(decision.keys), answered=decision.fix, gone=gone)
        elif decision.action == Action.UNRECOGNISED:
            self.unrecognised(role, decision, screen)
        elif decision.action == Action.NUDGE:
            message = nudge_message(n, brief)
            since = signal_clock()
            delivery = peers.deliver(provider, role, message)
            ctx.event("nudge", role, evidence=decision.evidence, delivered=delivery.taken,
                      why=delivery.why)
            if not delivery:
                return self.escalate(role, Decision(
                    Action.ESCALATE, "turn-ended",
                    f"{decision.evidence}; the nudge was not taken: {delivery.why}",
                    fix="attach to see what holds its input line; 'handoff answer' passes your "
                        "answer on"), screen)
            view.message, view.since_ns = message, since
            view.monitor.after_nudge_or_answer(time.monotonic())
        elif decision.state == failover.QUOTA and self.crew.fail_over(role, brief,
                                                                       decision.evidence):
            return ""  # its next fallback took the role over, on the same brief
        else:
            return self.escalate(role, decision, screen)
        return ""

    def unrecognised(self, role: str, decision: Decision, screen: str) -> None:
        """Nothing of the peer could be read: said with its screen kept and its CLI's version
        (the likeliest cause is a release whose screen handoff does not know yet)."""
        ctx = self.ctx
        provider = ctx.ws.provider(role)
        kept = ctx.tdir.transcript(role, ctx.state.round, "unrecognised")
        ctx.ws.peers(ctx.state).capture(role, kept)
        ctx.event("screen-unrecognised", role, evidence=decision.evidence, fix=decision.fix,
                  provider=provider.name, version=provider.version() or "unknown",
                  screen=kept.name, last_lines=_last_lines(screen))

    def escalate(self, role: str, decision: Decision, screen: str) -> str:
        """The peer needs a person: its screen kept, the reason and the fix spelled out (the
        ticket goes to one once the phase's other peers have reported)."""
        ctx = self.ctx
        refused = self.desk.refused.get(role)
        if refused:  # what handoff knows of why no report came: the peer tried, and was told
            decision = replace(decision, evidence=f"{decision.evidence}; its last handoff submit "
                               f"was refused: {clip_words('; '.join(refused), 60)}")
        shown_as = ctx.tdir.transcript(role, ctx.state.round)
        ctx.ws.peers(ctx.state).capture(role, shown_as)
        ctx.ws.keep_session(ctx.state, role, shown_as)
        ctx.event("escalate", role, state=decision.state, evidence=decision.evidence,
                  fix=decision.fix, screen=shown_as.name, last_lines=_last_lines(screen))
        return (f"the {role} needs a person ({decision.state}): {decision.evidence}. Fix: "
                f"{decision.fix} (its screen is in transcripts/{shown_as.name}); then 'handoff "
                f"answer {ctx.state.ticket} TEXT' to carry on")


def _last_lines(screen: str) -> list[str]:
    return [line.rstrip() for line in screen.strip().splitlines()[-8:]]
