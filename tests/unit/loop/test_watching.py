"""handoff.loop.watching: what the loop makes of a peer it watches and what it does about it,
on a ticket on paper whose panes are `PaperPeers` (tests/paper.py): a test sets what a pane
shows, and reads back what handoff typed, delivered or kept. `PeerMonitor` decides (its own
cases are in test_monitor.py); the Watch reads the screen and the signals for it and acts. The
same acts on a real pane with a real program in it are in tests/integration/loop/."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from handoff.loop.context import TicketContext
from handoff.loop.crew import PeerView, signal_clock
from handoff.loop.desk import ReportDesk
from handoff.loop.monitor import Action, Decision
from handoff.loop.watching import RECYCLE_GRACE, TICK, Awaited, Watch, nudge_message
from handoff.machinery.patience import Patience
from handoff.machinery.watch import Watcher
from handoff.phases import Phase
from handoff.providers.base import first_message
from handoff.record.store import atomic_write
from handoff.signs import TOOK, WAITING
from tests.paper import PaperPeers, PaperWorkspace, paper_ticket
from tests.rooms import FakeCrew

ROLE = "reviewer"


class PaperCrew(FakeCrew):
    """A crew that also only records whom it would revive (a revive makes the ticket's tmux
    session again: the integration tests run the real one)."""

    def __init__(self, ctx: TicketContext) -> None:
        super().__init__(ctx)
        self.revived: list[tuple[str, bool, int | None, str]] = []

    def revive(self, role: str, brief: Path, existed: bool, status: int | None,
               lost: str = "") -> str:
        self.revived.append((role, existed, status, lost))
        return ""


class Watched:
    """A paper ticket in review, its Watch, and the reviewer's paper pane."""

    def __init__(self, home: Path) -> None:
        ws = paper_ticket(home, Phase.REVIEWING)
        assert isinstance(ws, PaperWorkspace) and ws.paper is not None
        self.ws, self.peers = ws, ws.paper
        self.ctx = TicketContext(ws)
        self.told: list[str] = []
        self.ctx.tell = lambda state: self.told.append(state.phase)
        self.crew = PaperCrew(self.ctx)
        self.watch = Watch(self.ctx, self.crew, ReportDesk(self.ctx, self.crew))
        self.brief = self.ctx.tdir.brief(ROLE, 1)
        atomic_write(self.brief, "review round 1\n")
        self.peers.show(ROLE, "scripted: ready\n")

    def view(self) -> PeerView:
        view = self.crew.views[ROLE] = self.crew.new_view(ROLE, first_message(self.brief),
                                                          signal_clock())
        return view

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.ctx.tdir.events.read()[0] if e["kind"] == kind]

    def awaited(self) -> Awaited:
        return Awaited(ROLE, self.brief, self.ctx.tdir.report(ROLE, 1),
                       Patience(self.ctx.state.ticket))


@pytest.fixture
def watched(handoff_home: Path) -> Watched:
    return Watched(handoff_home)


def paper(watched: Watched) -> PaperPeers:
    return watched.peers


# ---- act: each judgement of the peer carried out --------------------------------------------


def test_a_note_is_recorded_and_nothing_is_sent(watched: Watched) -> None:
    decision = Decision(Action.NOTE, "working", "spinner: Thinking")
    assert watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), "") == ""
    [noted] = watched.events("peer")
    assert (noted["role"], noted["state"], noted["evidence"]) == (ROLE, "working",
                                                                  "spinner: Thinking")
    assert paper(watched).typed == [] and paper(watched).delivered == []


def test_a_dialog_is_answered_with_its_keys(watched: Watched) -> None:
    decision = Decision(Action.ANSWER, "dialog", "trust this folder?", keys=("y", "Enter"),
                        fix="trusted the worktree", dialog="trust")
    assert watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), "") == ""
    assert paper(watched).typed == [(ROLE, ("y", "Enter"))]
    [answered] = watched.events("dialog")
    assert (answered["keys"], answered["answered"], answered["gone"]) == \
        (["y", "Enter"], "trusted the worktree", True)


def test_a_nudge_is_delivered_and_the_peer_judged_from_then_on(watched: Watched) -> None:
    view = watched.view()
    before = view.since_ns
    decision = Decision(Action.NUDGE, "turn-ended", "its turn ended without a report")
    assert watched.watch.act(ROLE, 1, watched.brief, decision, view, "") == ""
    message = nudge_message(1, watched.brief)
    assert paper(watched).delivered == [(ROLE, message)]
    assert view.message == message and view.since_ns > before
    [nudged] = watched.events("nudge")
    assert (nudged["delivered"], nudged["evidence"]) == (True, "its turn ended without a report")


def test_a_nudge_the_peer_cannot_take_goes_to_a_person_with_its_screen(
        watched: Watched) -> None:
    paper(watched).refuse = "its input line holds other text"
    paper(watched).show(ROLE, f"{WAITING}\n> half a message")
    decision = Decision(Action.NUDGE, "turn-ended", "its turn ended without a report")
    held = watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), "")
    assert held.startswith("the reviewer needs a person (turn-ended): its turn ended without "
                           "a report; the nudge was not taken: its input line holds other text")
    assert "'handoff answer T-1 TEXT' to carry on" in held
    [escalated] = watched.events("escalate")
    kept = watched.ctx.tdir.path / "transcripts" / escalated["screen"]
    assert kept.read_text(encoding="utf-8") == f"{WAITING}\n> half a message"


def test_an_escalation_says_the_fix_and_where_its_screen_is(watched: Watched) -> None:
    screen = f"{TOOK} working on it\n"
    paper(watched).show(ROLE, screen)
    decision = Decision(Action.ESCALATE, "stalled", "no progress for 30 minutes",
                        fix="attach and look")
    held = watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), screen)
    assert held == ("the reviewer needs a person (stalled): no progress for 30 minutes. Fix: "
                    "attach and look (its screen is in transcripts/reviewer-1.log); then "
                    "'handoff answer T-1 TEXT' to carry on")
    [escalated] = watched.events("escalate")
    assert (escalated["fix"], escalated["state"]) == ("attach and look", "stalled")
    assert f"{TOOK} working on it" in escalated["last_lines"]
    assert watched.ws.state().phase == Phase.REVIEWING, "a person is asked once all reported"


def test_an_unrecognised_screen_is_said_with_the_screen_and_the_clis_version(
        watched: Watched) -> None:
    paper(watched).show(ROLE, "????\n")
    decision = Decision(Action.UNRECOGNISED, "unrecognised", "nothing on its screen was read",
                        fix="update handoff")
    assert watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), "????\n") == ""
    [said] = watched.events("screen-unrecognised")
    kept = watched.ctx.tdir.path / "transcripts" / said["screen"]
    assert kept.read_text(encoding="utf-8") == "????\n"
    assert (said["provider"], said["fix"]) == ("scripted", "update handoff")
    assert said["version"] and said["last_lines"] == ["????"]


# ---- assess: the screen read, the monitor asked -------------------------------------------


def test_a_peer_replaced_in_its_pane_is_judged_afresh(watched: Watched) -> None:
    view = watched.view()
    view.pid = 1111
    paper(watched).show(ROLE, f"{TOOK} looking at calc.py\n", pid=2222)
    pane = paper(watched).look(ROLE)
    assert pane is not None
    assert watched.watch.assess(ROLE, 1, watched.brief, watched.ctx.tdir.report(ROLE, 1),
                                pane) == ""
    [recycled] = [e for e in watched.events("peer") if e["state"] == "recycled"]
    assert recycled["evidence"] == "pid 1111 was replaced by pid 2222 in its pane " \
                                   "(handoff recycle)"
    assert watched.crew.views[ROLE].pid == 2222


def test_a_busy_peer_is_left_to_work(watched: Watched) -> None:
    paper(watched).show(ROLE, f"{TOOK} running the tests\n")
    pane = paper(watched).look(ROLE)
    assert pane is not None
    assert watched.watch.assess(ROLE, 1, watched.brief, watched.ctx.tdir.report(ROLE, 1),
                                pane) == ""
    assert paper(watched).delivered == [] and paper(watched).typed == []
    assert watched.events("escalate") == []


# ---- turn_over, signalled: when a look is due --------------------------------------------


def test_a_turn_is_over_only_when_the_screen_shows_the_peer_ready(watched: Watched) -> None:
    paper(watched).show(ROLE, f"{TOOK} running the tests\n")
    assert not watched.watch.turn_over(ROLE), "busy"
    paper(watched).show(ROLE, f"{TOOK} done\n{WAITING}\n")
    assert watched.watch.turn_over(ROLE)
    del paper(watched).panes[ROLE]
    assert not watched.watch.turn_over(ROLE), "no pane: nothing says its turn is over"


def test_a_hooks_signal_since_the_view_began_is_seen_once(watched: Watched) -> None:
    view = watched.view()
    assert not watched.watch.signalled(ROLE)
    signals = watched.ctx.tdir.signals(ROLE)
    signals.mkdir(parents=True, exist_ok=True)
    (signals / "1-stop.json").write_text('{"event": "stop"}', encoding="utf-8")
    assert watched.watch.signalled(ROLE)
    view.since_ns = time.time_ns() + 10**9
    assert not watched.watch.signalled(ROLE), "judged already"


# ---- look: a peer that ended, a person recycling one -------------------------------------


def test_a_dead_peer_is_revived_and_its_unfinished_review_voided(watched: Watched,
                                                                tmp_path: Path) -> None:
    report = watched.ctx.tdir.report(ROLE, 1)
    report.write_text("---\nverdict: pass\n---\n", encoding="utf-8")
    paper(watched).show(ROLE, "", dead=True, status=137)
    with Watcher([tmp_path / "watched"]) as watcher:
        assert watched.watch.look(watched.awaited(), 1, paper(watched), watcher) == TICK
    assert watched.crew.revived == [(ROLE, True, 137, "")], "with how it ended"
    assert not report.exists(), "a review filed by a session that ended before its turn did"
    assert (watched.ctx.tdir.path / "review-report-1.void-1.md").exists(), "kept beside"
    [voided] = watched.events("voided")
    assert voided["why"] == "its session ended before its turn was over"


def test_a_peer_a_person_is_recycling_is_not_taken_for_dead(watched: Watched,
                                                            tmp_path: Path) -> None:
    atomic_write(watched.ctx.tdir.recycling(ROLE), str(os.getpid()))
    del paper(watched).panes[ROLE]
    with Watcher([tmp_path / "watched"]) as watcher:
        assert watched.watch.look(watched.awaited(), 1, paper(watched), watcher) == TICK
    assert watched.crew.revived == []


def test_a_stale_or_unreadable_recycle_marker_is_no_recycle(watched: Watched) -> None:
    marker = watched.ctx.tdir.recycling(ROLE)
    atomic_write(marker, str(os.getpid()))
    assert watched.watch.recycled_by_hand(ROLE)
    old = time.time() - RECYCLE_GRACE - 5
    os.utime(marker, (old, old))
    assert not watched.watch.recycled_by_hand(ROLE)
    atomic_write(marker, "not a pid")
    assert not watched.watch.recycled_by_hand(ROLE)


def test_the_held_peers_go_to_a_person_in_the_same_round(watched: Watched) -> None:
    wait = watched.awaited()
    wait.held = "the reviewer needs a person (stalled): no progress"
    watched.watch.hand_to_person([wait])
    state = watched.ws.state()
    assert (state.phase, state.after_answer, state.held) == (Phase.NEEDS_HUMAN, "reviewing",
                                                             [ROLE])
    assert state.reason == "the reviewer needs a person (stalled): no progress"
    assert watched.told == [Phase.NEEDS_HUMAN]


def test_an_escalation_says_why_the_last_submit_was_refused(watched: Watched) -> None:
    watched.watch.desk.refused[ROLE] = ["verdict must be pass or fail, not maybe"]
    decision = Decision(Action.ESCALATE, "turn-ended", "its turn ended without a report",
                        fix="attach and look")
    held = watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), "")
    assert "its turn ended without a report; its last handoff submit was refused: verdict " \
           "must be pass or fail, not maybe. Fix: attach and look" in held
    [escalated] = watched.events("escalate")
    assert escalated["evidence"].endswith("refused: verdict must be pass or fail, not maybe")
