"""handoff.cli.board_screens: the board's dialogs, each in a small app of its own (Textual's
headless pilot, no terminal): what each hands back for the keys a person presses."""

from __future__ import annotations

import asyncio

from textual.app import App
from textual.widgets import Static

from handoff.cli.board_screens import AnswerScreen, ChoiceScreen, ViewScreen


class Host(App[None]):
    """An app that shows one dialog and keeps what it handed back."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[str | None] = []


def answers(screen: AnswerScreen | ChoiceScreen | ViewScreen, *keys: str) -> list[str | None]:
    async def drive() -> list[str | None]:
        app = Host()
        async with app.run_test() as pilot:
            app.push_screen(screen, app.got.append)
            await pilot.pause()
            await pilot.press(*keys)
            await pilot.pause()
        return app.got

    return asyncio.run(drive())


def test_a_choice_is_one_key_and_any_other_cancels() -> None:
    assert answers(ChoiceScreen("Stop T-1?", {"y": "stop it"}), "y") == ["stop it"]
    assert answers(ChoiceScreen("Read what?", {"p": "plan", "d": "diff"}), "d") == ["diff"]
    assert answers(ChoiceScreen("Stop T-1?", {"y": "stop it"}), "x") == [None]


def test_an_answer_is_what_was_typed_and_escape_sends_nothing() -> None:
    assert answers(AnswerScreen("T-1"), *"go on", "enter") == ["go on"]
    assert answers(AnswerScreen("T-1"), "g", "escape") == [None]


def test_a_text_is_shown_whole_until_escape_or_q() -> None:
    text = "\n".join(f"line {n}" for n in range(200))

    async def drive() -> tuple[str, list[str | None]]:
        app = Host()
        async with app.run_test(size=(80, 20)) as pilot:
            app.push_screen(ViewScreen("T-1: its plan", text), app.got.append)
            await pilot.pause()
            shown = str(app.screen.query_one("#view-text", Static).render())
            await pilot.press("pagedown", "q")
            await pilot.pause()
        return shown, app.got

    shown, got = asyncio.run(drive())
    assert shown == text and got == [None]
