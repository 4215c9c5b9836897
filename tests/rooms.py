"""Fakes of the loop's rooms that would run peers, for testing the others on a real ticket
without one (as pytest-xdist tests its schedulers against fake nodes): `FakeCrew` starts
nobody and records whom it was asked to brief, launch or retire; `FakeWatch` hands back at
once the reports a test gave it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from handoff.loop.context import TicketContext
from handoff.loop.crew import Crew
from handoff.loop.desk import ReportDesk
from handoff.loop.orchestrator import Orchestrator
from handoff.loop.watching import Accepted, Watch
from handoff.loop.workspace import Workspace
from handoff.protocol.reports import Report

#: what a fake peer hands in: its report, or what makes it (work done while it "runs")
Handed = Report | Callable[[], Report]


class FakeCrew(Crew):
    """A crew that starts nobody: it records whom it was asked to brief, launch or retire."""

    def __init__(self, ctx: TicketContext) -> None:
        super().__init__(ctx)
        self.briefed: list[tuple[str, Path, bool]] = []
        self.launched: list[tuple[str, Path | None, str]] = []
        self.left: list[str] = []
        #: the rounds whose reviewers it was asked to warm, and how often to cool them
        self.warmed_rounds: list[int] = []
        self.cooled = 0

    def ensure_briefed(self, role: str, brief: Path, fresh: bool) -> None:
        self.briefed.append((role, brief, fresh))

    def launch(self, role: str, brief: Path | None, reason: str) -> None:
        self.launched.append((role, brief, reason))

    def warm(self, n: int) -> None:
        self.warmed_rounds.append(n)

    def cool(self) -> None:
        self.cooled += 1

    def retire_finished(self) -> None:
        pass

    def leave_finished(self, why: str) -> None:
        self.left.append(why)


class FakeWatch(Watch):
    """A watch whose peers report at once what the test gave (the roles it has none for never
    do): each report is told to `accepted` as the real wait tells it."""

    def __init__(self, ctx: TicketContext, crew: Crew, desk: ReportDesk,
                 reports: Mapping[str, Handed]) -> None:
        super().__init__(ctx, crew, desk)
        self.reports = dict(reports)
        self.waited: list[dict[str, Path]] = []

    def wait_for_reports(self, briefed: Mapping[str, Path],
                         accepted: Accepted | None = None) -> dict[str, Report] | None:
        self.waited.append(dict(briefed))
        got: dict[str, Report] = {}
        for role in briefed:
            handed = self.reports.get(role)
            if handed is None:
                continue
            got[role] = handed if isinstance(handed, Report) else handed()
            if accepted is not None:
                accepted(role, self.ctx.state.round, got[role])
        return got


def fitted(ws: Workspace, reports: Mapping[str, Handed] | None = None,
           ) -> tuple[Orchestrator, FakeCrew, FakeWatch]:
    """An Orchestrator on the ticket whose crew and watch are the fakes (every room that
    holds the crew holds the fake)."""
    orch = Orchestrator(ws)
    crew = FakeCrew(orch.ctx)
    orch.crew = orch.desk.crew = orch.gate.crew = crew
    orch.watch = FakeWatch(orch.ctx, crew, orch.desk, reports or {})
    return orch, crew, orch.watch


