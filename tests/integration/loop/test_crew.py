"""handoff.loop.crew: the ticket's peers launched, briefed, told a person's answer, revived and
asked to leave, on a real ticket with its tmux session and the built-in scripted agent as the
peer (its plan makes it file nothing, so nothing but the crew acts on the ticket)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from handoff.loop import handing
from handoff.loop.context import TicketContext
from handoff.loop.crew import Crew
from handoff.machinery.peers import WARM
from handoff.protocol import briefs
from handoff.providers.base import first_message
from handoff.role import IMPLEMENTER
from handoff.signs import TOOK, WAITING
from tests.conftest import PYTHON, wait_until
from tests.harness import (
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    handoff,
    pane_screen,
    plan_text,
    state,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)
from tests.harness import events as ticket_events
from tests.loop_tickets import (
    ADD_FIXED,
    at_round,
    events,
    implementer_commit,
    new_context,
    repo_config,
)

#: every round: the peers take their brief and file nothing
SILENT = plan_text({n: {"silent": "always", "reviewer": {"silent": "always"}} for n in (1, 2)})


@pytest.fixture
def crewed(repo: Path, handoff_home: Path) -> tuple[TicketContext, Crew]:
    ctx = new_context(repo, handoff_home, SILENT)
    ctx.setup()
    return ctx, Crew(ctx)


def implementer_brief(ctx: TicketContext, n: int) -> Path:
    brief = ctx.tdir.brief(IMPLEMENTER, n)
    ctx.hand(brief, lambda: handing.implementer_brief(ctx, n))
    return brief


def screen(ctx: TicketContext, role: str) -> str:
    pane = ctx.ws.peers(ctx.state).pane(role)
    return ctx.ws.peers(ctx.state).tmux.capture(pane.id) if pane is not None else ""


def took(ctx: TicketContext, role: str, message: str, times: int = 1) -> None:
    """Wait until the role's peer took message (times in all) and finished its turn."""
    def done() -> bool:
        shown = screen(ctx, role)
        return shown.count(f"{TOOK} {message}") == times and \
            shown.rstrip().endswith(WAITING)
    wait_until(done, what=f"the {role} to take {message!r}")


def launches(ctx: TicketContext, role: str = IMPLEMENTER) -> list[str]:
    return [e["reason"] for e in events(ctx, "launch") if e["role"] == role]


def test_a_peer_is_launched_on_its_brief_once(crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    brief = implementer_brief(ctx, 1)
    crew.ensure_briefed(IMPLEMENTER, brief, fresh=False)
    took(ctx, IMPLEMENTER, first_message(brief))
    assert ctx.ws.peers(ctx.state).working_on(IMPLEMENTER) == str(brief)

    crew.ensure_briefed(IMPLEMENTER, brief, fresh=False)
    crew.ensure_briefed(IMPLEMENTER, brief, fresh=True)
    [launch] = events(ctx, "launch")
    assert (launch["brief"], launch["provider"], launch["reason"]) == (str(brief), "scripted", "")
    took(ctx, IMPLEMENTER, first_message(brief), times=1)  # never sent twice


def test_a_live_implementer_is_pasted_its_next_brief(crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    first, second = implementer_brief(ctx, 1), implementer_brief(ctx, 2)
    crew.ensure_briefed(IMPLEMENTER, first, fresh=False)
    took(ctx, IMPLEMENTER, first_message(first))

    crew.ensure_briefed(IMPLEMENTER, second, fresh=False)

    took(ctx, IMPLEMENTER, first_message(second))
    assert f"{TOOK} {first_message(first)}" in screen(ctx, IMPLEMENTER), "the same process"
    assert ctx.ws.peers(ctx.state).working_on(IMPLEMENTER) == str(second)
    assert launches(ctx) == [""]
    [pasted] = events(ctx, "brief")
    assert (pasted["brief"], pasted["by"]) == (str(second), "paste")


def test_a_fresh_brief_starts_a_new_process(crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    first, second = implementer_brief(ctx, 1), implementer_brief(ctx, 2)
    crew.ensure_briefed(IMPLEMENTER, first, fresh=False)
    took(ctx, IMPLEMENTER, first_message(first))
    crew.ensure_briefed(IMPLEMENTER, second, fresh=True)
    took(ctx, IMPLEMENTER, first_message(second))
    assert launches(ctx) == ["", ""]
    assert f"{TOOK} {first_message(first)}" not in screen(ctx, IMPLEMENTER), "a new process"


def test_a_persons_answer_is_passed_to_the_live_peer_once(
        crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    brief = implementer_brief(ctx, 1)
    crew.ensure_briefed(IMPLEMENTER, brief, fresh=False)
    took(ctx, IMPLEMENTER, first_message(brief))
    ctx.state.note_for_peer = "Use the v2 API."

    crew.pass_on_note({IMPLEMENTER: brief})
    crew.pass_on_note({IMPLEMENTER: brief})

    took(ctx, IMPLEMENTER, "A person answered: Use the v2 API.")
    [told] = events(ctx, "answer-passed-on")
    assert (told["role"], told["delivered"]) == (IMPLEMENTER, True)
    assert crew.views[IMPLEMENTER].message.startswith("A person answered: Use the v2 API.")
    assert ctx.ws.state().note_for_peer == "" and launches(ctx) == [""]


def test_an_answer_about_held_peers_goes_to_them_alone(
        crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    brief = implementer_brief(ctx, 1)
    crew.ensure_briefed(IMPLEMENTER, brief, fresh=False)
    took(ctx, IMPLEMENTER, first_message(brief))
    ctx.state.note_for_peer, ctx.state.held = "Logged in.", ["reviewer"]

    crew.pass_on_note({IMPLEMENTER: brief})

    assert events(ctx, "answer-passed-on") == []
    state = ctx.ws.state()
    assert (state.note_for_peer, state.held) == ("", [])


def test_a_dead_peer_is_relaunched_until_its_relaunches_are_spent(
        crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    ctx.state.max_relaunches = 1
    brief = implementer_brief(ctx, 1)

    assert crew.revive(IMPLEMENTER, brief, existed=False, status=None) == ""
    took(ctx, IMPLEMENTER, first_message(brief))
    spent = crew.revive(IMPLEMENTER, brief, existed=True, status=1)

    assert spent.startswith("the implementer died 2 times this round")
    assert launches(ctx) == ["relaunch"], "no launch past the limit"
    assert [e["relaunches"] for e in events(ctx, "death")] == [1, 2]
    assert ctx.ws.state().relaunched == {IMPLEMENTER: 2}
    assert f"{TOOK} {first_message(brief)}" in \
        (ctx.tdir.path / "transcripts" / "implementer-1.log").read_text(), "its screen kept"


def test_a_peer_lost_with_its_tmux_server_is_relaunched_on_a_new_session(
        crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    brief = implementer_brief(ctx, 1)
    ctx.ws.peers(ctx.state).tmux.run("kill-server", check=False)
    assert crew.revive(IMPLEMENTER, brief, existed=False, status=None,
                       lost="no server running") == ""
    took(ctx, IMPLEMENTER, first_message(brief))
    assert launches(ctx) == ["tmux server gone"]
    [lost] = events(ctx, "tmux")
    assert (lost["state"], lost["relaunches"]) == ("server-gone", 1)


def test_a_finished_tickets_peers_leave_and_their_panes_stay(
        crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    brief = implementer_brief(ctx, 1)
    crew.ensure_briefed(IMPLEMENTER, brief, fresh=False)
    took(ctx, IMPLEMENTER, first_message(brief))

    crew.leave_finished("the ticket passed")

    peers = ctx.ws.peers(ctx.state)
    pane = peers.pane(IMPLEMENTER)
    assert pane is not None and pane.dead, "it left by itself; its last screen stays"
    assert "scripted: leaving" in screen(ctx, IMPLEMENTER)
    [left] = events(ctx, "left")
    assert (left["role"], left["reason"], left["pane"]) == \
        (IMPLEMENTER, "the ticket passed", "kept")


def test_the_reviewers_of_an_earlier_stage_are_retired_and_the_implementer_kept(
        crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    implementer = implementer_brief(ctx, 1)
    crew.ensure_briefed(IMPLEMENTER, implementer, fresh=False)
    commit = implementer_commit(ctx, "calc.py", ADD_FIXED)
    at_round(ctx, commit)
    ctx.point("reviewer", 1)
    review = ctx.tdir.brief("reviewer", 1)
    ctx.hand(review, lambda: briefs.reviewer(ctx.ws.brief_context(ctx.state, "reviewer", 1),
                                             handing.review_of(ctx, 1, commit,
                                                               ctx.hand_diff(1))))
    crew.ensure_briefed("reviewer", review, fresh=True)
    took(ctx, "reviewer", first_message(review))

    crew.retire_finished()

    peers = ctx.ws.peers(ctx.state)
    assert peers.pane("reviewer") is None, "its window is gone"
    assert peers.working_on(IMPLEMENTER) == str(implementer)
    [retired] = events(ctx, "recycle")
    assert (retired["role"], retired["stage"], retired["by"]) == \
        ("reviewer", "stopped", "orchestrator")
    assert f"{TOOK} {first_message(review)}" in \
        (ctx.tdir.path / "transcripts" / "reviewer-1.log").read_text()


#: the plan's test command, held in the gate's checkout until the test says go: it connects to
#: the test's port and waits for a byte (the sandbox shares the network), then runs the add
#: tests (the implementer runs it in its own checkout, unheld)
HELD_GATE = ("import os, socket, subprocess, sys\n"
             "if os.path.basename(os.getcwd()) == 'gate':\n"
             "    with socket.create_connection(('127.0.0.1', int(sys.argv[1])), 120) as s:\n"
             "        s.settimeout(120)\n"
             "        s.recv(1)\n"
             "sys.exit(subprocess.call([sys.executable, '-m', 'unittest', '-q', "
             "'tests.test_calc.AddTest']))\n")


def warm_screen(folder: Path, current: dict[str, object]) -> str:
    """The reviewer's screen once its warm CLI waits at its input."""
    def at_input() -> str | None:
        shown = pane_screen(folder, "reviewer", current)
        return shown if WAITING in shown else None
    found: str = wait_until(at_input, what="the warm reviewer at its input")
    return found


def test_a_warmed_reviewer_gets_nothing_before_its_brief_and_is_a_new_session_every_round(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """While each round's gate is held, the reviewer's CLI is already up in its checkout of
    the commit, its screen and its session without a word of the round; the gate passes, the
    brief is pasted into it; round 2 is another process and another session."""
    repo_config(repo, base_tests=False)  # one gate run per round, none at the base
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(90)
        port = server.getsockname()[1]
        plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                         test=[PYTHON, "-c", HELD_GATE, str(port)], review=[ALL_TESTS])
        assert handoff("start", "W-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                       cwd=repo).returncode == 0
        seen: dict[int, tuple[dict[str, Any], str]] = {}
        for n in (1, 2):
            held, _ = server.accept()  # the gate runs, and waits for us
            with held:
                warm = wait_event(handoff_home, "W-1", "launch", role="reviewer", round=n,
                                  reason="warm")
                current = state(handoff_home, "W-1")
                folder = ticket_path(handoff_home, "W-1")
                shown = warm_screen(folder, current)
                assert "Read and follow" not in shown and "brief" not in shown
                assert not (folder / "inbox" / "reviewer" / f"brief-{n}.md").exists()
                assert warm["message"] == "" and warm["brief"] == ""
                session = folder / "transcripts"
                assert not any("Read and follow" in p.read_text(errors="replace")
                               for p in session.glob(f"reviewer-{n}*")), "nothing kept of it yet"
                seen[n] = (warm, shown)
                held.sendall(b"go")
    done = wait_phase(handoff_home, "W-1", "passed", "needs-human", "escalated", timeout=120)
    assert done["phase"] == "passed" and done["verdicts"] == {"1": "fail", "2": "pass"}

    log = ticket_events(handoff_home, "W-1")
    for n in (1, 2):
        mine = [e for e in log if e.get("role") == "reviewer" and e.get("round") == n
                and e["kind"] in ("launch", "brief")]
        assert [(e["kind"], e.get("reason", e.get("by"))) for e in mine] == [
            ("launch", "warm"), ("brief", "paste")], mine
        order = [e["kind"] for e in log if e.get("round") == n and (
            (e["kind"] == "gate" and e.get("result") == "pass") or
            (e["kind"] == "brief" and e.get("role") == "reviewer"))]
        assert order == ["gate", "brief"], "briefed only once the gate passed"
    # round 2's turn-over is off the ticket's path: round 1's reviewer leaves while the
    # implementer works on its brief, and the next one starts while the gate's command runs
    def at(kind: str, **fields: object) -> int:
        return next(i for i, e in enumerate(log) if e["kind"] == kind and e.get("round") == 2
                    and all(e.get(k) == v for k, v in fields.items()))
    assert at("brief", role="implementer") < at("recycle", role="reviewer", stage="stopped") < \
        at("gate", result="running") < at("launch", role="reviewer", reason="warm") < \
        at("gate", result="pass")
    sessions = [seen[n][0]["session_id"] for n in (1, 2)]
    assert sessions[0] and sessions[1] and sessions[0] != sessions[1], "a new session a round"


def test_warm_reviewers_the_gate_did_not_pass_are_asked_to_leave(
        crewed: tuple[TicketContext, Crew]) -> None:
    ctx, crew = crewed
    at_round(ctx, implementer_commit(ctx, "calc.py", ADD_FIXED))
    crew.warm(1)
    peers = ctx.ws.peers(ctx.state)
    assert crew.warmed == {"reviewer": 1} and peers.working_on("reviewer") == WARM
    wait_until(lambda: WAITING in screen(ctx, "reviewer"), what="the warm reviewer's input")
    assert ctx.ws.worktrees.head("reviewer") == ctx.state.commit_of(1), "at the commit"

    crew.cool()

    assert crew.warmed == {} and peers.working_on("reviewer") == ""
    [left] = [e for e in events(ctx, "recycle") if e["role"] == "reviewer"]
    assert "the gate did not reach" in left["why"] and "ended" not in left
