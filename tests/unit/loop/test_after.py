"""Tickets that build on each other (handoff.loop.after): a chain A <- B <- C waits, starts from
the work it builds on, and is finished as one train; what cannot be is refused or goes to a
person. Real git, real tmux, the scripted peers, the real CLI; the decisions without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handoff.loop.after import Dependency, cycle, decide
from handoff.protocol.plan import parse
from tests.harness import (
    handoff,
    plan_text,
    write_plan,
)
from tests.unit.operations.test_train import DISCOVER


def start(repo: Path, tmp_path: Path, ticket: str, rounds: dict[int, dict[str, object]],
          *args: str, test: list[str] = DISCOVER, **front: Any) -> tuple[int, str]:
    plan = write_plan(tmp_path, plan_text(rounds, test=test, **front), f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(plan), "--yes", *args, cwd=repo, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_the_decision_and_the_cycle_are_pure() -> None:
    passed, merged = Dependency("A", "passed", "a" * 40), Dependency("B", "closed", "b" * 40, True)
    assert decide([passed, merged]).action == "start"
    waiting = decide([passed, Dependency("C", "reviewing")])
    assert (waiting.action, waiting.reason) == ("wait", "waits for C (reviewing)")
    for broken, said in ((Dependency("D", "escalated"), "D escalated without passing"),
                         (Dependency("E", "closed"), "E was closed without being merged"),
                         (Dependency("G", ""), "G does not exist")):
        decision = decide([passed, Dependency("C", "reviewing"), broken])
        assert decision.action == "ask" and said in decision.reason
    assert cycle("A", {"A": ["B"], "B": ["C"], "C": ["A"]}) == ["A", "B", "C", "A"]
    assert cycle("A", {"A": ["B", "C"], "B": ["C"], "C": []}) == []
    assert parse("---\nafter: [PROJ-11, 12, PROJ-11]\n---\nx\n").after == ("PROJ-11", "12")
    assert parse("---\nafter: PROJ-11\n---\nx\n").after == ("PROJ-11",)
