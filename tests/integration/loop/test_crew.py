"""handoff.loop.crew: the ticket's peers launched, briefed, told a person's answer, revived and
asked to leave, on a real ticket with its tmux session and the built-in scripted agent as the
peer (its plan makes it file nothing, so nothing but the crew acts on the ticket)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.loop import handing
from handoff.loop.context import TicketContext
from handoff.loop.crew import Crew
from handoff.protocol import briefs
from handoff.providers.base import first_message
from handoff.providers.scripted import TOOK, WAITING
from handoff.role import IMPLEMENTER
from tests.conftest import wait_until
from tests.harness import plan_text
from tests.loop_tickets import ADD_FIXED, at_round, events, implementer_commit, new_context

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
