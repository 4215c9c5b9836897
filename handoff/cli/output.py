"""How every command speaks besides its own output: notes and a ticket's failure in a batch go
to stderr (stdout stays what the command answers, for a script to read), and NO_COLOR."""

from __future__ import annotations

import os
from collections.abc import Sequence

import typer

from handoff.errors import HandoffError


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
