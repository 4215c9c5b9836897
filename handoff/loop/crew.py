"""The ticket's peers as the loop drives them: launched in their checkouts, briefed once (a
paste into a live CLI, or a fresh start), handed a person's answer, relaunched after a death
(bounded), and asked to leave when their stage or the ticket is over.

What each peer is judged by since its last message (its `PeerView`) lives here too: a launch, a
paste or a nudge starts a new one; handoff.loop.watching reads and advances it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from handoff.loop import failover, fences, filer, rules
from handoff.loop.context import TicketContext
from handoff.loop.monitor import Action, PeerMonitor
from handoff.machinery import limits, reaper
from handoff.machinery.peers import WARM, Peers
from handoff.providers.base import Provider, first_message, shown
from handoff.providers.screen import DIALOG
from handoff.record.grants import Grants
from handoff.record.store import private_dir
from handoff.record.ticket import brief_round
from handoff.role import IMPLEMENTER, Kind

#: seconds a warm reviewer is given to reach its input line once its brief exists (a CLI that
#: is not there by then is started afresh on the brief instead)
WARM_READY = 20.0
#: seconds the peers of a finished ticket are given to leave when asked, all together: a CLI
#: that saves its session on the way out (Claude Code) took over 3 s on a loaded machine, and
#: nothing waits on a finished ticket but its own orchestrator's exit
LEAVE_FINISHED = 10.0


def signal_clock() -> int:
    """Now, for comparing with signal files' mtimes. File times come from a coarse clock that
    may lag a few milliseconds: a little slack keeps a hook that fired just after us."""
    return time.time_ns() - 20_000_000


@dataclass
class PeerView:
    """The loop's view of one running peer: its monitor and the last message sent."""

    monitor: PeerMonitor
    message: str
    since_ns: int
    #: the process it judges: another one in the pane was started by a `handoff recycle`
    pid: int = 0


class Crew:
    def __init__(self, ctx: TicketContext) -> None:
        self.ctx = ctx
        self.views: dict[str, PeerView] = {}
        #: when this orchestrator launched each peer: its hooks' signals count from then
        self.launched_ns: dict[str, int] = {}
        #: reviewer → the round whose commit it was started at, warm, with no brief yet (what
        #: another orchestrator warmed is not known here, and is started afresh)
        self.warmed: dict[str, int] = {}
        #: what of the ticket's folder each warm reviewer's fence was made with
        self.warm_view: dict[str, frozenset[Path]] = {}

    def new_view(self, role: str, message: str, since_ns: int) -> PeerView:
        """A fresh judgement of the role's peer, from message (the last one it was sent) on."""
        ws = self.ctx.ws
        monitor = PeerMonitor(time.monotonic(), ws.timing(), frozenset(ws.spec(role).answer))
        return PeerView(monitor, message, since_ns)

    def ensure_briefed(self, role: str, brief: Path, fresh: bool) -> None:
        """Make sure the role's live process is working on brief, without sending it twice.

        fresh: always start a new process (testers, reviewers); otherwise paste into the
        running CLI and fall back to a fresh start when the paste is not taken.
        """
        ctx = self.ctx
        peers = ctx.ws.peers(ctx.state)
        if peers.working_on(role) == str(brief):
            return
        pane = peers.pane(role)
        round_ = brief_round(brief)
        warm = self.warmed.pop(role, None)
        if fresh and warm is not None and warm == round_ and pane is not None and \
                not pane.dead and peers.working_on(role) == WARM:
            unseen = self._unseen(role, brief)
            if not unseen:
                self._brief_warm(role, brief, round_)
                return
            self.launch(role, brief, f"its warm start cannot see {', '.join(unseen)}")
            return
        if fresh or pane is None or pane.dead or round_ is None:
            self.launch(role, brief, "")
            return
        # the live process may file this round's report too (handoff.loop.filer)
        found = filer.identity(pane.pid)
        if not found:
            self.launch(role, brief, "its process is gone")
            return
        Grants(ctx.tdir.path).grant(role, round_, found)
        self.launched_ns[role] = signal_clock()  # its signals count from this message on
        delivery = peers.deliver_brief(ctx.ws.provider(role), role, brief)
        if delivery:
            ctx.event("brief", role, brief=str(brief), by="paste")
            self.views.pop(role, None)
            return
        ctx.event("delivery-failed", role, brief=str(brief), why=delivery.why)
        self.launch(role, brief, "")

    def _brief_warm(self, role: str, brief: Path, round_: int) -> None:
        """A reviewer started warm this round, at the commit, takes its brief as its first
        message: a fresh session all the same. One not at its input line in time, or that does
        not take the paste, is started afresh on the brief."""
        ctx = self.ctx
        peers = ctx.ws.peers(ctx.state)
        provider = ctx.ws.provider(role)
        shows = self._at_input(role, provider, peers)
        pane = peers.pane(role)
        found = filer.identity(pane.pid) if pane is not None and not shows else None
        if not found:
            ctx.event("delivery-failed", role, brief=str(brief),
                      why=f"the warm CLI is not at its input line: {shows or 'it is gone'}")
            self.launch(role, brief, "warm start not ready")
            return
        Grants(ctx.tdir.path).grant(role, round_, found)
        self.launched_ns[role] = signal_clock()
        delivery = peers.deliver_brief(provider, role, brief)
        if delivery:
            ctx.event("brief", role, brief=str(brief), by="paste", warm=True)
            self.views.pop(role, None)
            return
        ctx.event("delivery-failed", role, brief=str(brief), why=delivery.why)
        self.launch(role, brief, "")

    def _at_input(self, role: str, provider: Provider, peers: Peers) -> str:
        """Until the warm CLI is at its input line, its start-up dialogs answered as they are
        for a CLI started on its brief (the same PeerMonitor judges them: the role's `answer`
        list, each dialog at most twice; a trust screen waited out the whole WARM_READY
        before); '' when it is there, else what it shows instead."""
        ctx = self.ctx
        judge = PeerMonitor(time.monotonic(), ctx.ws.timing(), frozenset(ctx.ws.spec(role).answer))
        deadline = time.monotonic() + WARM_READY
        while True:
            seen = peers.ready(provider, role, max(0.0, deadline - time.monotonic()))
            if seen is None:
                return ""
            answer = next((d for d in judge.observe(time.monotonic(), seen)
                           if d.action == Action.ANSWER), None) if seen.state == DIALOG else None
            if answer is None or time.monotonic() >= deadline:
                return seen.says()
            gone = peers.answer(provider, role, answer.keys, answer.dialog)
            ctx.event("dialog", role, state=answer.state, evidence=answer.evidence,
                      keys=list(answer.keys), answered=answer.fix, gone=gone, warm=True)

    def _view(self, role: str) -> frozenset[Path]:
        """The files of the ticket's folder the role's fence shows, as they are now."""
        ctx = self.ctx
        return frozenset(path for path in fences.ticket_view(ctx.tdir, role, ctx.team.kind(role))
                         if path.exists())

    def _unseen(self, role: str, brief: Path) -> list[str]:
        """The files the brief names that came after the warm reviewer's fence was made (an
        advisory scanner's log): it could not open them, so it is started afresh."""
        text = brief.read_text(encoding="utf-8", errors="replace")
        then = self.warm_view.pop(role, frozenset())
        return sorted(path.name for path in self._view(role) - then if str(path) in text)

    def warm(self, n: int) -> None:
        """Every reviewer whose CLI takes a pasted brief is started now, with none, in its
        checkout of round n's commit (while the gate runs): its start-up is over by the time
        its brief exists. It sees nothing of the round but the code until then. Only into the
        ticket's live session: where it is gone (a resume into the gate) the reviewers start
        afresh on their briefs, as without warming."""
        ctx = self.ctx
        peers = ctx.ws.peers(ctx.state)
        if not ctx.ws.config.warm_reviewers or \
                not any(ctx.ws.provider(role).warms for role in ctx.team.reviewers) or \
                not peers.tmux.has_session(peers.session):
            return
        for role in ctx.team.reviewers:
            # a person's own screen markers may not show its input line: it is started on its
            # brief, which needs no reading of its screen
            if not ctx.ws.provider(role).warms or ctx.ws.spec(role).markers or \
                    peers.working_on(role):
                continue
            ctx.point(role, n)
            private_dir(ctx.tdir.brief(role, n).parent)  # in its fence before its brief is
            self.launch(role, None, "warm")
            # what its fence was made with (its contract is written by the launch itself)
            self.warm_view[role] = self._view(role)
            self.warmed[role] = n

    def cool(self) -> None:
        """The warm reviewers, asked to leave: the round goes back to the implementer."""
        if not self.warmed:
            return
        ctx = self.ctx
        peers = ctx.ws.peers(ctx.state)
        roles = [role for role in self.warmed if peers.working_on(role) == WARM]
        self.warmed.clear()
        self.warm_view.clear()
        left = peers.leave_all({role: ctx.ws.provider(role) for role in roles})
        for role in roles:
            transcript = ctx.ws.transcript_for(ctx.state, role)
            peers.retire(role, transcript)
            ctx.event("recycle", role, stage="stopped", by="orchestrator",
                      why="warm for a review the gate did not reach",
                      **({} if role in left else {"ended": True}))

    def launch(self, role: str, brief: Path | None, reason: str) -> None:
        ctx = self.ctx
        # never start a peer in a folder that is no longer its worktree (deleted by hand)
        made = ctx.ws.ensure_worktree(ctx.state, role)
        if made:
            ctx.event("worktree", role, **made)
        self.launched_ns[role] = signal_clock()
        launch = ctx.ws.launch(ctx.state, role, brief)
        self.views.pop(role, None)
        ctx.event("launch", role, brief=str(brief) if brief is not None else "",
                  provider=ctx.ws.spec(role).provider,
                  message=first_message(brief) if brief is not None else "", reason=reason,
                  limits=limits.said(ctx.ws.config.sandbox.limits, launch.sandboxed),
                  **({"session_id": launch.session_id} if launch.signals else {}))

    def fail_over(self, role: str, brief: Path, evidence: str) -> bool:
        """The role's CLI spent its quota: its next fallback takes it over on the same brief
        (False when it has none left: a person is asked, as for any blocker). A reviewer moved
        onto the implementer's CLI is said so: its review is no longer independent."""
        ctx = self.ctx
        spec = ctx.ws.spec(role)
        nxt = failover.taken_over(spec)
        if nxt is None:
            return False
        ctx.state.failovers[role] = ctx.state.failovers.get(role, 0) + 1
        ctx.save()
        ctx.ws = replace(ctx.ws, config=replace(ctx.ws.config,
                                                roles={**ctx.ws.config.roles, role: nxt}))
        same = ctx.team.kind(role) is Kind.REVIEWER and \
            nxt.provider == ctx.ws.spec(IMPLEMENTER).provider
        ctx.event("failover", role, **{"from": spec.provider}, to=nxt.provider,
                  evidence=evidence, left=len(nxt.fallback),
                  **({"independence": "the reviewer now runs on the implementer's CLI: its "
                      "review is not independent"} if same else {}))
        self.launch(role, brief, "failover")
        return True

    def pass_on_note(self, briefed: Mapping[str, Path]) -> None:
        """A person's answer for the same round goes to the live peers it was asked about (all
        of the phase's when it was about none: a budget stop), and into their briefs; a peer
        that cannot take it (gone, or still on a dialog) starts afresh on its brief, which
        holds it, as does every later restart of the round."""
        ctx = self.ctx
        note, ctx.state.note_for_peer = ctx.state.note_for_peer, ""
        held, ctx.state.held = ctx.state.held, []
        if not note:
            if held:
                ctx.save()
            return
        ctx.save()
        for role, brief in briefed.items():
            if held and role not in held:
                continue
            # in the brief too: a peer started afresh on it this round is told it there
            ctx.add_to_brief(brief, "A person's answer, this round", note.strip())
            since = signal_clock()
            message = (f"A person answered: {' '.join(note.split())[:800]} -- Read and follow "
                       f"{shown(brief)} to the end and file your report with its submit "
                       "command.")
            delivery = ctx.ws.peers(ctx.state).deliver(ctx.ws.provider(role), role, message)
            ctx.event("answer-passed-on", role, delivered=delivery.taken, why=delivery.why)
            if delivery:
                self.views[role] = self.new_view(role, message, since)
            else:
                self.launch(role, brief, "answered")

    def revive(self, role: str, brief: Path, existed: bool, status: int | None,
               lost: str = "") -> str:
        """A peer died before reporting, or (lost: what tmux said) the tmux server went away
        with it: keep its screen, make the session again as resume does, relaunch it on the
        same brief. Both count as relaunches, so a server that keeps dying is bounded too.
        Why a person must step in ('' : it was relaunched)."""
        ctx, state = self.ctx, self.ctx.state
        state.relaunched[role] = state.relaunched.get(role, 0) + 1
        count = state.relaunched[role]
        ctx.save()
        if lost:
            ctx.event("tmux", role, state="server-gone", message=lost, relaunches=count)
        else:
            ctx.event("death", role, exit_status=status, existed=existed, relaunches=count,
                      **limits.death(ctx.ws.home, reaper.marker(ctx.tdir.path, role)))
        spent = rules.relaunches_spent(role, count, state.max_relaunches)
        if spent:
            if existed:
                ctx.ws.peers(state).capture(role, ctx.tdir.transcript(role, state.round))
            return spent
        ctx.ensure_session("the tmux server was gone" if lost else "the session was gone")
        self.launch(role, brief, "tmux server gone" if lost else "relaunch")
        return ""

    def retire_finished(self) -> None:
        """The testers and reviewers of an earlier stage still in their panes are asked to
        leave (their sessions kept), so each works fresh next time."""
        ctx = self.ctx
        peers = ctx.ws.peers(ctx.state)
        working = [role for role in ctx.team.names[1:] if peers.working_on(role)]
        transcripts = {role: ctx.ws.transcript_for(ctx.state, role) for role in working}
        peers.leave_all({role: ctx.ws.provider(role) for role in working})
        for role in working:
            ctx.ws.keep_session(ctx.state, role, transcripts[role])
            peers.retire(role, transcripts[role])
            ctx.event("recycle", role, stage="stopped", by="orchestrator")

    def leave_finished(self, why: str) -> None:
        """A finished ticket holds no slot, so it runs no CLI either (ten passed tickets' idle
        peers were gigabytes of node): each peer is asked to leave, and its pane stays with
        its last screen for `handoff attach`; one that does not go is ended. The pane histories
        and sessions are kept. A resume after a crash here finishes the job."""
        ctx = self.ctx
        peers = ctx.ws.peers(ctx.state)
        working = [role for role in ctx.team.names if peers.working_on(role)]
        transcripts = {role: ctx.ws.transcript_for(ctx.state, role) for role in working}
        left = peers.leave_all({role: ctx.ws.provider(role) for role in working},
                               wait=LEAVE_FINISHED)
        for role in working:
            ctx.ws.keep_session(ctx.state, role, transcripts[role])
            if role in left:
                peers.capture(role, transcripts[role])
                peers.reap(role)
            else:
                peers.retire(role, transcripts[role])
            ctx.event("left", role, reason=why, pane="kept" if role in left else "ended")
