"""handoff.loop.crew, on a ticket on paper (tests/paper.py): a person's answer for the same
round, passed on to the peers it was asked about, and kept in their briefs so that a peer
started afresh later in the round still has it. The launches themselves, in real panes, are in
tests/integration/loop/test_crew.py."""

from __future__ import annotations

from pathlib import Path

from handoff.loop.context import TicketContext
from handoff.phases import Phase
from tests.paper import PaperWorkspace, paper_ticket
from tests.rooms import FakeCrew

ROLE = "reviewer"


def answered(home: Path, refuse: str = "") -> tuple[TicketContext, FakeCrew, Path]:
    """A ticket in review whose person answered for the reviewer, its brief handed."""
    ws = paper_ticket(home, Phase.REVIEWING)
    assert isinstance(ws, PaperWorkspace) and ws.paper is not None
    ctx = TicketContext(ws)
    brief = ctx.tdir.brief(ROLE, 1)
    brief.parent.mkdir(parents=True, exist_ok=True)
    ctx.hand(brief, lambda: "# Review round 1\n\nReview the change.\n")
    ctx.state.note_for_peer, ctx.state.held = "Use the second API.", [ROLE]
    ws.paper.show(ROLE, "scripted: waiting for the next message\n")
    ws.paper.refuse = refuse
    return ctx, FakeCrew(ctx), brief


def test_an_answer_is_passed_on_and_kept_in_the_brief(handoff_home: Path) -> None:
    ctx, crew, brief = answered(handoff_home)
    crew.pass_on_note({ROLE: brief})
    paper = ctx.ws.peers(ctx.state)
    assert [(role, m.split(" -- ")[0]) for role, m in paper.delivered] == [  # type: ignore[attr-defined]
        (ROLE, "A person answered: Use the second API.")]
    assert brief.read_text(encoding="utf-8").endswith(
        "## A person's answer, this round\n\nUse the second API.\n")
    assert crew.launched == [] and ctx.state.note_for_peer == "" and ctx.state.held == []


def test_a_peer_that_could_not_take_it_starts_afresh_on_a_brief_that_holds_it(
        handoff_home: Path) -> None:
    ctx, crew, brief = answered(handoff_home, refuse="a draft sits in its input line")
    crew.pass_on_note({ROLE: brief})
    assert crew.launched == [(ROLE, brief, "answered")]
    assert "Use the second API." in brief.read_text(encoding="utf-8"), \
        "the answer is not lost with the message"
    ctx.hand(brief, lambda: "never rendered again")  # the brief is still handoff's own
    assert "Use the second API." in brief.read_text(encoding="utf-8")
