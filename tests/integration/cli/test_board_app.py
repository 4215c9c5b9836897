"""handoff.cli.board_app: the live board's cells and details for a row, its keys' refusals,
and the app itself over a real state folder (Textual's headless pilot, no terminal). Whole
tickets on the board are tests/e2e/test_board.py's; the rows are handoff.operations.board's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable, Static

from handoff.cli.board_app import (
    BoardApp,
    ChoiceScreen,
)
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
