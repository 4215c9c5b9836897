"""What handoff needs to know about a coding CLI to run it as a peer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class Launch:
    """One start of a peer: who it is, where it works, and the brief it starts on."""

    ticket: str
    role: str
    worktree: Path
    brief: Path

    @property
    def message(self) -> str:
        return first_message(self.brief)


def first_message(brief: Path) -> str:
    """The one-line nudge; the brief file holds the substance."""
    return f"Read and follow {brief}"


class Provider(Protocol):
    """A coding CLI. Providers are stateless descriptions; peers.py does the tmux work."""

    name: str
    #: environment variables the CLI needs beyond the base allowlist (e.g. its API key)
    env_allow: tuple[str, ...]

    def missing(self) -> str | None:
        """Why this CLI cannot run here (not installed, …), or None when it can."""

    def argv(self, launch: Launch) -> list[str]:
        """The command line that starts the CLI with the first brief as its own prompt."""

    def taken(self, screen: str, message: str) -> bool:
        """Whether the visible screen shows the pasted message was submitted, not left in a draft."""
