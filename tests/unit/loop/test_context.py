"""handoff.loop.context: the only writer of a running ticket's State, on a ticket on paper
(tests/paper.py). A Move applied is a phase change on disk, an event, and the person told; the
next round resets what each round counts. What it does to worktrees, checkouts and the session
is in tests/integration/loop/test_context.py."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from handoff.loop import rules
from handoff.loop.context import TicketContext
from handoff.loop.rules import Move
from handoff.phases import Phase
from handoff.protocol.ledger import Ledger
from handoff.record.ticket import State
from handoff.verdicts import Verdict
from tests.paper import paper_ticket, review


def context(home: Path, phase: Phase = Phase.IMPLEMENTING, round_: int = 1,
            ) -> tuple[TicketContext, list[Mapping[str, object]], list[str]]:
    """A paper ticket's context; what it said (its events as they happened) and what the
    person was shown (the phases)."""
    said: list[Mapping[str, object]] = []
    ctx = TicketContext(paper_ticket(home, phase, round_), said.append)
    told: list[str] = []
    ctx.tell = lambda state: told.append(state.phase)
    return ctx, said, told


def on_disk(ctx: TicketContext) -> State:
    return ctx.ws.state()


def test_a_move_changes_the_phase_on_disk_says_it_and_tells_the_person(
        handoff_home: Path) -> None:
    ctx, said, told = context(handoff_home)
    ctx.apply(Move(Phase.GATING, "the implementer is done"))
    state = on_disk(ctx)
    assert (state.phase, state.reason) == (Phase.GATING, "the implementer is done")
    assert [(e["kind"], e["from"], e["to"]) for e in said] == [("phase", "implementing",
                                                                "gating")]
    assert told == [Phase.GATING]


def test_asking_a_person_keeps_where_the_answer_leads(handoff_home: Path) -> None:
    ctx, _, told = context(handoff_home, Phase.REVIEWING)
    ctx.apply(rules.ask("the reviewer is stuck", after_answer=Phase.REVIEWING))
    state = on_disk(ctx)
    assert (state.phase, state.after_answer) == (Phase.NEEDS_HUMAN, "reviewing")
    assert told == [Phase.NEEDS_HUMAN]


def test_queueing_keeps_the_phase_to_go_back_to(handoff_home: Path) -> None:
    ctx, _, _ = context(handoff_home, Phase.TESTING)
    ctx.apply(rules.no_slot(Phase.TESTING, "1 of 1 tickets at work"))
    state = on_disk(ctx)
    assert (state.phase, state.queued_for) == (Phase.QUEUED, "testing")


def test_the_next_round_resets_what_a_round_counts_and_carries_the_open_findings(
        handoff_home: Path) -> None:
    ctx, said, told = context(handoff_home, Phase.REVIEWING)
    ledger = Ledger.of([]).merged(1, [("reviewer", review("reviewer", Verdict.FAIL,
                                                          "adds wrong"))])
    ctx.state.ledger = ledger.records()
    ctx.state.relaunched, ctx.state.held = {"reviewer": 2}, ["reviewer"]
    ctx.apply(rules.next_round([("the gate failed", "3 tests fail")]))
    state = on_disk(ctx)
    assert (state.phase, state.round) == (Phase.IMPLEMENTING, 2)
    assert (state.relaunched, state.held) == ({}, [])
    assert state.feedback["round"] == 2
    assert [f["reason"] for f in state.feedback["findings"]] == ["adds wrong"]
    assert state.feedback["notes"] == [["the gate failed", "3 tests fail"]]
    assert said[-1]["round"] == 2, "the phase change is the new round's"
    assert told == [Phase.IMPLEMENTING]


def test_a_finished_ticket_gets_its_final_report_once_and_a_closed_one_none(
        handoff_home: Path) -> None:
    ctx, said, _ = context(handoff_home, Phase.REVIEWING)
    ctx.apply(Move(Phase.PASSED, "every reviewer passed it"))
    report = ctx.tdir.final_report
    first = report.read_text(encoding="utf-8")
    assert "T-1" in first and "passed" in first
    assert [e["kind"] for e in said] == ["phase", "final-report"]
    ctx.finish()
    assert report.read_text(encoding="utf-8") == first
    assert [e["kind"] for e in said].count("final-report") == 1

    closed, _, _ = context(handoff_home / "other", Phase.REVIEWING)
    closed.apply(Move(Phase.CLOSED, "closed by a person"))
    assert not closed.tdir.final_report.exists()


def test_a_plan_changed_since_its_approval_sends_the_ticket_to_a_person(
        handoff_home: Path) -> None:
    ctx, said, _ = context(handoff_home, Phase.TESTING)
    assert ctx.plan_unchanged()
    ctx.tdir.plan_md.write_text("# Fix add\n\nand rewrite everything\n", encoding="utf-8")
    assert not ctx.plan_unchanged()
    state = on_disk(ctx)
    assert state.phase == Phase.NEEDS_HUMAN and str(ctx.tdir.plan_md) in state.reason
    changed = [e for e in said if e["kind"] == "plan-changed"]
    assert len(changed) == 1 and changed[0]["approved"] != changed[0]["now"]


def test_a_budget_spent_sends_a_working_ticket_to_a_person_once(
        handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("budget:\n  tokens: 1000\n", encoding="utf-8")
    ctx, _, _ = context(handoff_home, Phase.REVIEWING)
    ctx.event("usage", "reviewer", input_tokens=900, output_tokens=200)
    ctx.check_budget()
    state = on_disk(ctx)
    assert state.phase == Phase.NEEDS_HUMAN, state.reason
    assert "1,100 tokens" in state.reason and "1,000 tokens" in state.reason
    ctx.check_budget()
    assert [e["kind"] for e in ctx.tdir.events.read()[0]].count("budget") == 1, "asked once"
