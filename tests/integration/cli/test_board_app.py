"""handoff.cli.board_app: the live board's cells and details for a row, its keys' refusals,
and the app itself over a real state folder (Textual's headless pilot, no terminal). Whole
tickets on the board are tests/e2e/test_board.py's; the rows are handoff.operations.board's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable, Static

from handoff.cli.board_app import BoardApp
from handoff.cli.board_screens import ChoiceScreen, ViewScreen
from handoff.phases import Phase
from handoff.record.ticket import State, ticket_dir


def test_the_board_over_a_real_state_folder(handoff_home: Path) -> None:
    """One ticket awaiting approval: the title counts it as needing the person, the details
    show it, a key that does not apply says why on the board, and q ends the app."""
    tdir = ticket_dir(handoff_home, "calc-0123456789", "T-1")
    tdir.path.mkdir(parents=True)
    tdir.save(State(ticket="T-1", repo="/src/calc", repo_key="calc-0123456789"))

    async def drive() -> tuple[str, str, str, bool, int]:
        app = BoardApp(handoff_home, plain=True)
        async with app.run_test(size=(160, 30)) as pilot:
            await pilot.pause()
            title = str(app.query_one("#title", Static).render())
            shown = str(app.query_one("#details", Static).render())
            await pilot.press("n")  # answer: the ticket asks for approval, not an answer
            said = str(app.query_one("#message", Static).render())
            await pilot.press("s")
            chose = isinstance(app.screen, ChoiceScreen)
            await pilot.press("escape")
            rows = app.query_one(DataTable).row_count
            await pilot.press("q")
        return title, shown, said, chose, rows

    title, shown, said, chose, rows = asyncio.run(drive())
    assert title == "handoff watch — 1 ticket(s), 1 need you"
    assert shown.startswith("T-1 in /src/calc: awaiting-approval, round 0")
    assert said and "approv" in said, said
    assert chose, "stop asks first"
    assert rows == 1


def test_an_empty_board_says_how_to_begin(handoff_home: Path) -> None:
    async def drive() -> tuple[str, str]:
        app = BoardApp(handoff_home, plain=True)
        async with app.run_test() as pilot:
            await pilot.pause()
            shown = str(app.query_one("#details", Static).render())
            await pilot.press("y")
            said = str(app.query_one("#message", Static).render())
            await pilot.press("q")
        return shown, said

    shown, said = asyncio.run(drive())
    assert shown.startswith("no tickets yet: handoff start TICKET")
    assert said == "no ticket selected"


def test_the_board_lists_what_needs_you_first_and_hides_the_closed_until_asked(
        handoff_home: Path) -> None:
    """The order and the filter of `handoff status`: a ticket waiting for its person above one
    at work above one passed; the closed ones only after `c`."""
    phases = {"P-1": Phase.PASSED, "W-1": Phase.IMPLEMENTING, "H-1": Phase.NEEDS_HUMAN,
              "C-1": Phase.CLOSED, "C-2": Phase.CLOSED}
    for ticket, phase in phases.items():
        tdir = ticket_dir(handoff_home, "calc-0123456789", ticket)
        tdir.path.mkdir(parents=True)
        tdir.save(State(ticket=ticket, repo="/src/calc", repo_key="calc-0123456789",
                        phase=phase, round=1))

    def order(app: BoardApp) -> list[str]:
        table = app.query_one(DataTable)
        return [str(table.get_row_at(i)[1]) for i in range(table.row_count)]

    async def drive() -> tuple[list[str], str, list[str], list[str]]:
        app = BoardApp(handoff_home, plain=True)
        async with app.run_test(size=(160, 30)) as pilot:
            await pilot.pause()
            first, title = order(app), str(app.query_one("#title", Static).render())
            await pilot.press("c")
            shown = order(app)
            await pilot.press("c")
            hidden = order(app)
            await pilot.press("q")
        return first, title, shown, hidden

    first, title, shown, hidden = asyncio.run(drive())
    assert first == ["H-1", "W-1", "P-1"]
    assert title == "handoff watch — 3 ticket(s), 1 need you (2 closed hidden: c shows them)"
    assert shown[:3] == ["H-1", "W-1", "P-1"] and sorted(shown[3:]) == ["C-1", "C-2"]
    assert hidden == first


def test_the_board_shows_a_tickets_plan_and_last_report_to_read(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "calc-0123456789", "T-1")
    tdir.path.mkdir(parents=True)
    tdir.save(State(ticket="T-1", repo="/src/calc", repo_key="calc-0123456789",
                    phase=Phase.REVIEWING, round=1))
    tdir.plan_md.write_text("# Fix add\n\nadd must add.\n", encoding="utf-8")
    (tdir.path / "impl-report-1.md").write_text("---\nstatus: done\n---\nfixed add\n")
    (tdir.path / "review-report-1.rejected-1.md").write_text("set aside: never shown\n")

    async def drive() -> tuple[str, str, str, str]:
        app = BoardApp(handoff_home, plain=True)
        async with app.run_test(size=(160, 30)) as pilot:
            await pilot.pause()
            shown = []
            for key in ("p", "l"):
                await pilot.press("v", key)
                await pilot.pause()
                assert isinstance(app.screen, ViewScreen)
                shown.append(str(app.screen.query_one("#view-text", Static).render()))
                await pilot.press("escape")
            await pilot.press("v", "d")  # the repository is no real one: said on the board
            await pilot.pause()
            said = str(app.query_one("#message", Static).render())
            back = type(app.screen).__name__
            await pilot.press("q")
        return shown[0], shown[1], said, back

    plan, report, said, back = asyncio.run(drive())
    assert plan == "# Fix add\n\nadd must add.\n"
    assert report == "---\nstatus: done\n---\nfixed add\n", "the newest report taken"
    assert said, "a view that cannot be shown says why"
    assert back == "Screen", "back on the board"


def test_at_100_columns_the_whole_table_fits_and_a_wide_terminal_shows_every_column(
        handoff_home: Path) -> None:
    """Long ids and long evidence are cut to fit; a narrow terminal leaves out REPO and IN
    PHASE, which the details line says."""
    tdir = ticket_dir(handoff_home, "calculator-0123456789", "PROJ-1234-make-the-parser-strict")
    tdir.path.mkdir(parents=True)
    tdir.save(State(ticket=tdir.ticket, repo="/src/calculator", repo_key=tdir.path.parent.name,
                    phase=Phase.ESCALATED, round=3, max_rounds=3,
                    reason="still failing after 3 review round(s) " + "x" * 200))
    tdir.events.append("peer", round=3, role="implementer", state="working",
                       evidence="spinner: " + "Thinking about the parser " * 10)

    async def drive(width: int) -> tuple[list[str], int]:
        app = BoardApp(handoff_home, plain=True)
        async with app.run_test(size=(width, 30)) as pilot:
            await pilot.pause()
            table = app.query_one(DataTable)
            columns = [str(key.value) for key in table.columns]
            used = table.virtual_size.width
            await pilot.press("q")
        return columns, used

    narrow, used = asyncio.run(drive(100))
    assert narrow == ["needs", "ticket", "phase", "round", "implementer", "reviewer", "last"]
    assert used <= 100, used
    wide, used = asyncio.run(drive(160))
    assert "repo" in wide and "in_phase" in wide and used <= 160
