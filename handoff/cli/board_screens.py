"""The board's dialogs (handoff.cli.board_app): an answer typed, one key picking a choice, and a
long text to read (a ticket's plan, diff or last report) scrolled. Each is a Textual modal
screen that hands its result back to the board."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

#: the dialogs' looks, part of the board's CSS
SCREENS_CSS = """
    #dialog { width: 80%; height: auto; border: round $accent; padding: 0 1; }
    InputScreen, AnswerScreen, ChoiceScreen { align: center middle; }
    #view { width: 100%; height: 1fr; border: round $accent; padding: 0 1; }
    #view-title { height: 1; text-style: bold; }
"""


class InputScreen(ModalScreen[str | None]):
    """Asks for one line of text (question says what for); Enter sends it, Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(f"{self.question} (Enter sends, Escape cancels):")
            yield Input(id="answer")

    def on_input_submitted(self, message: Input.Submitted) -> None:
        self.dismiss(message.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class AnswerScreen(InputScreen):
    """Asks for the text of a person's answer to a ticket."""

    def __init__(self, ticket: str) -> None:
        super().__init__(f"Answer for {ticket}")
        self.ticket = ticket


class ChoiceScreen(ModalScreen[str | None]):
    """One key picks one of a few choices; any other key cancels."""

    def __init__(self, question: str, choices: dict[str, str]) -> None:
        super().__init__()
        self.question, self.choices = question, choices

    def compose(self) -> ComposeResult:
        keys = ", ".join(f"{key}: {what}" for key, what in self.choices.items())
        with Vertical(id="dialog"):
            yield Static(f"{self.question} ({keys}; any other key cancels)")

    def on_key(self, event: events.Key) -> None:
        event.stop()
        self.dismiss(self.choices.get(event.key))


class ViewScreen(ModalScreen[None]):
    """A long text to read (a plan, a diff, a report), scrolled with the arrows and the page
    keys; Escape or q goes back to the board."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "back"),
                                             Binding("q", "close", "back")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        yield Static(f"{self.title_text} (Escape goes back)", id="view-title")
        with VerticalScroll(id="view"):
            yield Static(Text(self.text), id="view-text")

    def action_close(self) -> None:
        self.dismiss(None)
