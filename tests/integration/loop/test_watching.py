"""handoff.loop.watching: what the loop does about a peer it watches, on a real ticket with its
real tmux session. The peer is a small program in the reviewer's pane that echoes what it is
sent the way the scripted agent says it took a message, so what handoff typed into it shows."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from handoff.loop.crew import PeerView, signal_clock
from handoff.loop.desk import ReportDesk
from handoff.loop.monitor import Action, Decision
from handoff.loop.watching import RECYCLE_GRACE, TICK, Awaited, Watch, nudge_message
from handoff.machinery.patience import Patience
from handoff.machinery.peers import Peers
from handoff.machinery.watch import Watcher
from handoff.providers.base import first_message
from handoff.role import IMPLEMENTER
from handoff.signs import TOOK, WAITING
from tests.conftest import PYTHON, wait_until
from tests.loop_tickets import events, new_context
from tests.rooms import FakeCrew

#: the peer: says each line it reads as taken, and that its turn ended on "done"
PEER = f"""\
import sys
print("peer ready", flush=True)
for line in sys.stdin:
    print({TOOK!r}, line.strip(), flush=True)
    if line.strip() == "done":
        print({WAITING!r}, flush=True)
"""
ROLE = "reviewer"


class Watched:
    """A ticket's Watch, and the reviewer's pane with the echoing peer in it."""

    def __init__(self, watch: Watch, crew: FakeCrew, peers: Peers, pane: str) -> None:
        self.watch, self.crew, self.peers, self.pane = watch, crew, peers, pane
        self.ctx = watch.ctx
        self.brief = self.ctx.tdir.brief(ROLE, 1)

    def view(self) -> PeerView:
        view = self.crew.views[ROLE] = self.crew.new_view(ROLE, first_message(self.brief),
                                                          signal_clock())
        return view

    def screen(self) -> str:
        return self.peers.tmux.capture(self.pane)

    def shows(self, text: str) -> str:
        return wait_until(lambda: text if text in self.screen() else None,
                          what=f"the peer's pane to show {text!r}")

    def type(self, text: str) -> None:
        self.peers.tmux.send_key(self.pane, text)
        self.peers.tmux.send_enter(self.pane)

    def end(self) -> None:
        """The peer's process ends (its input closed), its pane kept by tmux."""
        self.peers.tmux.send_key(self.pane, "C-d")
        wait_until(lambda: (p := self.peers.pane(ROLE)) is not None and p.dead,
                   what="the peer to exit")


@pytest.fixture
def watched(repo: Path, handoff_home: Path, tmp_path: Path) -> Watched:
    ctx = new_context(repo, handoff_home)
    ctx.setup()
    crew = FakeCrew(ctx)
    watch = Watch(ctx, crew, ReportDesk(ctx, crew))
    program = tmp_path / "peer.py"
    program.write_text(PEER)
    peers = ctx.ws.peers(ctx.state)
    pane = peers.tmux.new_window(ctx.state.session, ROLE, [PYTHON, str(program)], tmp_path)
    found = Watched(watch, crew, peers, pane)
    found.shows("peer ready")
    return found


# ---- act: each judgement of the peer carried out --------------------------------------------


def test_a_note_is_recorded_and_nothing_is_sent(watched: Watched) -> None:
    held = watched.watch.act(ROLE, 1, watched.brief, Decision(Action.NOTE, "working",
                                                              "spinner: Thinking"),
                             watched.view(), "")
    assert held == ""
    [noted] = events(watched.ctx, "peer")
    assert (noted["role"], noted["state"], noted["evidence"]) == (ROLE, "working",
                                                                  "spinner: Thinking")
    assert TOOK not in watched.screen()


def test_a_dialog_is_answered_with_its_keys(watched: Watched) -> None:
    decision = Decision(Action.ANSWER, "dialog", "trust this folder?", keys=("y", "Enter"),
                        fix="trusted the worktree", dialog="trust")
    assert watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), "") == ""
    watched.shows(f"{TOOK} y")
    [answered] = events(watched.ctx, "dialog")
    assert (answered["keys"], answered["answered"], answered["gone"]) == \
        (["y", "Enter"], "trusted the worktree", True)


def test_an_unrecognised_screen_is_said_with_the_screen_kept(watched: Watched) -> None:
    decision = Decision(Action.UNRECOGNISED, "unrecognised", "nothing on its screen was read",
                        fix="update handoff")
    screen = watched.screen()
    assert watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), screen) == ""
    kept = watched.ctx.tdir.path / "transcripts" / "reviewer-1.unrecognised.log"
    assert "peer ready" in kept.read_text()
    [said] = events(watched.ctx, "screen-unrecognised")
    assert (said["provider"], said["screen"], said["fix"]) == ("scripted", kept.name,
                                                               "update handoff")
    assert said["version"] and "peer ready" in said["last_lines"]


def test_a_nudge_is_pasted_and_judged_from_then_on(watched: Watched) -> None:
    view = watched.view()
    before = view.since_ns
    decision = Decision(Action.NUDGE, "turn-ended", "its turn ended without a report")

    assert watched.watch.act(ROLE, 1, watched.brief, decision, view, "") == ""

    message = nudge_message(1, watched.brief)
    assert f"{TOOK} {message}" in watched.screen()
    assert view.message == message and view.since_ns > before
    [nudged] = events(watched.ctx, "nudge")
    assert (nudged["delivered"], nudged["evidence"]) == (True, "its turn ended without a report")


def test_a_nudge_the_peer_cannot_take_goes_to_a_person(watched: Watched) -> None:
    watched.end()
    decision = Decision(Action.NUDGE, "turn-ended", "its turn ended without a report")
    held = watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), "peer ready")

    assert held.startswith("the reviewer needs a person (turn-ended): its turn ended without "
                           "a report; the nudge was not taken: the peer is not running")
    [nudged] = events(watched.ctx, "nudge")
    assert nudged["delivered"] is False
    [escalated] = events(watched.ctx, "escalate")
    assert escalated["state"] == "turn-ended"
    kept = watched.ctx.tdir.path / "transcripts" / escalated["screen"]
    assert "peer ready" in kept.read_text()


def test_an_escalation_keeps_the_screen_and_says_the_fix(watched: Watched) -> None:
    watched.type("working on it")
    watched.shows(f"{TOOK} working on it")
    screen = watched.screen()
    decision = Decision(Action.ESCALATE, "stalled", "no progress for 30 minutes",
                        fix="attach and look")
    held = watched.watch.act(ROLE, 1, watched.brief, decision, watched.view(), screen)

    assert held == ("the reviewer needs a person (stalled): no progress for 30 minutes. Fix: "
                    "attach and look (its screen is in transcripts/reviewer-1.log); then "
                    "'handoff answer T-1 TEXT' to carry on")
    assert f"{TOOK} working on it" in (watched.ctx.tdir.path / "transcripts" /
                                       "reviewer-1.log").read_text()
    [escalated] = events(watched.ctx, "escalate")
    assert escalated["fix"] == "attach and look"
    assert f"{TOOK} working on it" in escalated["last_lines"]


# ---- turn_over: the screen says the peer's turn is done ---------------------------------------


def test_a_turn_is_over_only_once_the_screen_shows_the_peer_ready(watched: Watched) -> None:
    assert not watched.watch.turn_over(ROLE), "starting: nothing says its turn ended"
    watched.type("running the tests")
    watched.shows(f"{TOOK} running the tests")
    assert not watched.watch.turn_over(ROLE), "busy"
    watched.type("done")
    wait_until(lambda: watched.watch.turn_over(ROLE), what="the turn to be over")


# ---- look: a peer that ended ------------------------------------------------------------------


def awaited(watched: Watched) -> Awaited:
    return Awaited(ROLE, watched.brief, watched.ctx.tdir.report(ROLE, 1),
                   Patience(watched.ctx.state.ticket))


def test_a_peer_that_died_is_relaunched_and_its_unfinished_reports_voided(
        watched: Watched, tmp_path: Path) -> None:
    report = watched.ctx.tdir.report(ROLE, 1)
    report.write_text("---\nverdict: pass\n---\n")  # filed before its session ended
    watched.end()
    with Watcher([tmp_path / "watched"]) as watcher:
        assert watched.watch.look(awaited(watched), 1, watched.peers, watcher) == TICK

    assert watched.crew.launched == [(ROLE, watched.brief, "relaunch")]
    assert watched.ctx.ws.state().relaunched == {ROLE: 1}
    [death] = events(watched.ctx, "death")
    assert (death["role"], death["existed"], death["relaunches"]) == (ROLE, True, 1)
    assert not report.exists()
    assert (watched.ctx.tdir.path / "review-report-1.void-1.md").exists()


def test_a_peer_a_person_is_recycling_is_not_taken_for_dead(watched: Watched,
                                                           tmp_path: Path) -> None:
    watched.ctx.tdir.recycling(ROLE).write_text(str(os.getpid()))
    watched.end()
    with Watcher([tmp_path / "watched"]) as watcher:
        assert watched.watch.look(awaited(watched), 1, watched.peers, watcher) == TICK
    assert watched.crew.launched == [] and events(watched.ctx, "death") == []
    assert watched.ctx.ws.state().relaunched == {}


# ---- recycled_by_hand, void_unfinished: no tmux needed ---------------------------------------


def a_watch(repo: Path, home: Path) -> Watch:
    ctx = new_context(repo, home)
    crew = FakeCrew(ctx)
    return Watch(ctx, crew, ReportDesk(ctx, crew))


def test_a_fresh_marker_of_a_live_recycle_is_a_recycle_by_hand(repo: Path,
                                                               handoff_home: Path) -> None:
    watch = a_watch(repo, handoff_home)
    marker = watch.ctx.tdir.recycling(ROLE)
    assert not watch.recycled_by_hand(ROLE), "no marker"
    marker.write_text(str(os.getpid()))
    assert watch.recycled_by_hand(ROLE)
    assert not watch.recycled_by_hand(IMPLEMENTER), "the marker is the reviewer's"


def test_a_stale_or_dead_or_unreadable_marker_is_no_recycle(repo: Path,
                                                           handoff_home: Path) -> None:
    watch = a_watch(repo, handoff_home)
    marker = watch.ctx.tdir.recycling(ROLE)
    marker.write_text(str(os.getpid()))
    old = time.time() - RECYCLE_GRACE - 5
    os.utime(marker, (old, old))
    assert not watch.recycled_by_hand(ROLE), "the recycle would have finished long ago"

    ended = subprocess.Popen([PYTHON, "-c", "pass"])
    ended.wait(timeout=30)
    marker.write_text(str(ended.pid))
    assert not watch.recycled_by_hand(ROLE), "its process is gone"

    marker.write_text("not a pid")
    assert not watch.recycled_by_hand(ROLE)


def test_only_a_tester_or_reviewers_unfinished_reports_are_voided(repo: Path,
                                                                  handoff_home: Path) -> None:
    watch = a_watch(repo, handoff_home)
    tdir = watch.ctx.tdir
    for role in (IMPLEMENTER, ROLE):
        tdir.report(role, 1).write_text("a report\n")
    (tdir.path / "review-report-1.filed-1.md").write_text("an earlier one\n")

    watch.void_unfinished(IMPLEMENTER, 1, tdir.report(IMPLEMENTER, 1))
    watch.void_unfinished(ROLE, 1, tdir.report(ROLE, 1))

    assert tdir.report(IMPLEMENTER, 1).exists(), "taken when filed: its session may end"
    assert not tdir.report(ROLE, 1).exists()
    assert sorted(p.name for p in tdir.path.glob("*.void-*.md")) == \
        ["review-report-1.filed-1.void-1.md", "review-report-1.void-1.md"]
    assert [e["why"] for e in events(watch.ctx, "voided")] == \
        ["its session ended before its turn was over"] * 2
