"""A ticket on paper: its directory and record written as `create` writes them, with no git
repository and no tmux session behind it, for the unit tests of the loop's stages and of its
peer watching. A stage that judges (the reviews, an answer, a slot, the tickets it starts
after) reads and writes the record only, so it runs here without a process; its peers are
`PaperPeers`, panes and screens a test sets, that record what handoff typed into them. What
moves a branch, reads a diff or drives a real pane is tested in tests/integration/loop/."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff import config
from handoff.loop.orchestrator import Orchestrator
from handoff.loop.workspace import Workspace
from handoff.machinery.peers import Delivery, Peers
from handoff.machinery.repo import Repo
from handoff.machinery.tmux import Pane, Tmux
from handoff.phases import Phase
from handoff.protocol.reports import Finding, Report
from handoff.providers.base import Provider
from handoff.record.store import file_digest
from handoff.record.ticket import State, TicketDir
from handoff.role import Kind, Role, Team
from handoff.verdicts import Verdict
from tests.rooms import FakeCrew, FakeWatch, fitted

#: the paper ticket's base and the commit of each of its rounds: one, as if it changed
#: nothing, so that even its final report asks git nothing (nothing here resolves it)
COMMIT = "c" * 40
KEY = "repo-0123456789"


def paper_ticket(home: Path, phase: Phase = Phase.IMPLEMENTING, round_: int = 1,
                 reviewers: tuple[str, ...] = ("reviewer",), ticket: str = "T-1",
                 max_rounds: int = 3, after: tuple[str, ...] = ()) -> Workspace:
    """Ticket T-1 at phase of round_, its plan approved, its team the implementer and the
    given reviewers; a Workspace whose repository is only a path (no git call may be made)."""
    top = home.parent / "no-repo"
    tdir = TicketDir(home / KEY / ticket)
    tdir.path.mkdir(parents=True)
    tdir.plan_md.write_text("# Fix add\n\nadd adds.\n", encoding="utf-8")
    team = Team((Role("implementer", Kind.IMPLEMENTER),
                 *(Role(name, Kind.REVIEWER) for name in reviewers)))
    state = State(ticket=ticket, repo=str(top), repo_key=KEY, phase=phase, round=round_,
                  base_commit=COMMIT, branch=f"handoff/{ticket}", session=f"handoff-{ticket}",
                  max_rounds=max_rounds, team=team.records(),
                  commits={str(n): COMMIT for n in range(1, round_ + 1)},
                  plan_digest=file_digest(tdir.plan_md), after=list(after))
    tdir.save(state)
    # the scripted agent's screen rules read the screens a test writes (after what the test
    # configured itself)
    personal = home / "config.yaml"
    personal.write_text((personal.read_text(encoding="utf-8") if personal.exists() else "")
                        + "roles:\n" + "".join(
                            f"  {role.name}: {{provider: scripted, kind: {role.kind}}}\n"
                            for role in team.roles), encoding="utf-8")
    return PaperWorkspace(home=home, tdir=tdir, repo=Repo(top=top, common_dir=top / ".git"),
                          config=config.load(home, None),
                          paper=PaperPeers(Tmux(state.socket, home), state.session, tdir.path))


class PaperPeers(Peers):
    """The ticket's panes as a test sets them (`panes`: role → Pane; `screens`: role → what it
    shows), and what handoff did to them, recorded: keys typed, messages delivered, screens
    kept. `refuse` set: a delivery is not taken, for that reason."""

    panes: dict[str, Pane]
    screens: dict[str, str]
    typed: list[tuple[str, tuple[str, ...]]]
    delivered: list[tuple[str, str]]
    refuse: str

    def __init__(self, tmux: Tmux, session: str, ticket_dir: Path) -> None:
        super().__init__(tmux, session, ticket_dir)
        for name, value in (("panes", {}), ("screens", {}), ("typed", []), ("delivered", []),
                            ("refuse", "")):
            object.__setattr__(self, name, value)  # Peers is frozen; these are the test's

    def show(self, role: str, screen: str, pid: int = 4242, dead: bool = False,
             status: int | None = None) -> None:
        """The role's pane, its process pid, showing screen (dead: its process ended, with
        status)."""
        self.panes[role] = Pane(id=f"%{len(self.panes) + 1}", window=role, dead=dead,
                                status=status, pid=pid)
        self.screens[role] = screen

    def _role(self, pane: Pane) -> str:
        return pane.window

    def look(self, role: str) -> Pane | None:
        return self.panes.get(role)

    def pane(self, role: str) -> Pane | None:
        return self.panes.get(role)

    def screen(self, role: str) -> str | None:
        return self.screens.get(role)

    def screen_of(self, pane: Pane | None) -> str | None:
        return None if pane is None or pane.dead else self.screens.get(self._role(pane))

    def keys(self, role: str, keys: Sequence[str], pause: float = 0.15) -> bool:
        self.typed.append((role, tuple(keys)))
        return True

    def steady(self, role: str, quiet: float = 0.2, wait: float = 3.0) -> bool:
        return True

    def dialog_gone(self, provider: Provider, role: str, name: str, wait: float = 5.0) -> bool:
        return True

    def deliver(self, provider: Provider, role: str, message: str, tries: int = 3,
                wait: float = 5.0) -> Delivery:
        self.delivered.append((role, message))
        return Delivery(not self.refuse, self.refuse)

    def exit_status(self, role: str, wait: float = 2.0) -> int | None:
        pane = self.panes.get(role)
        return pane.status if pane is not None else None

    def capture(self, role: str, path: Path) -> bool:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.screens.get(role, ""), encoding="utf-8")
        return True


@dataclass(frozen=True)
class PaperWorkspace(Workspace):
    """A Workspace whose peers are the paper ones (one set for the ticket, as its one tmux
    session is)."""

    paper: PaperPeers | None = None

    def peers(self, state: State) -> Peers:
        assert self.paper is not None
        return self.paper

    def keep_session(self, state: State, role: str, transcript: Path) -> Path | None:
        return None  # a CLI's own session log: the scripted agent keeps none


def review(role: str, verdict: Verdict, *must_fix: str) -> Report:
    """A reviewer's accepted report of the round's commit, its must-fix findings by reason
    (each on calc.py)."""
    return Report(role=role, commit=COMMIT, verdict=verdict,
                  must_fix=tuple(Finding("calc.py", 2, reason) for reason in must_fix))


def on_paper(ws: Workspace) -> tuple[Orchestrator, FakeCrew, FakeWatch, list[Phase]]:
    """An Orchestrator on a paper ticket with the fake crew and watch (tests/rooms.py), whose
    phase changes are recorded (the phases the person would be shown) instead of set on a tmux
    status line that is not there."""
    orch, crew, watch = fitted(ws)
    told: list[Phase] = []
    orch.ctx.tell = lambda state: told.append(Phase(state.phase))
    return orch, crew, watch, told
