"""How every command speaks: a typed result (`operations.results.Told`) shown one way by the
command line and one way by the board; notes and a ticket's failure in a batch go to stderr
(stdout stays what the command answers, for a script to read); NO_COLOR."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from handoff.errors import HandoffError

if TYPE_CHECKING:
    from handoff.operations.results import Told


def show(result: Told) -> None:
    """A result on the command line: its notes on stderr first, then its lines on stdout."""
    notes(result.notes)
    if result.said:
        typer.echo("\n".join(result.said))


def line(result: Told) -> str:
    """A result in the board's one status line: its lines, then its notes. An indented line is
    a terminal's detail (where to watch it, its record): the board shows those in its panes."""
    return "; ".join(part.strip() for part in [*result.said, *result.notes]
                     if part.strip() and not part.startswith(" "))


def page(result: Told) -> str:
    """A result as the board's reading screen shows it: its lines, whole (`v`)."""
    return "\n".join([*result.said, *(f"note: {note}" for note in result.notes)])


def notes(said: Sequence[str]) -> None:
    """What handoff mended or worked around, said out loud (stderr: the output stays clean)."""
    for note in said:
        typer.echo(f"note: {note}", err=True)


def failed(ticket: str, exc: HandoffError) -> None:
    """One ticket of several (`start --plans`, `resume --all`) that failed: said as the error
    of a command is, with the ticket's id first, while the others go on."""
    typer.echo(f"handoff: error: {ticket}: {exc.message}"
               + (f"\n  hint: {exc.hint}" if exc.hint else ""), err=True)


def plain() -> bool:
    """NO_COLOR set to anything but empty: no escape codes at all (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))
