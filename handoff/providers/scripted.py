"""The built-in scripted agent as a provider: a real program in the pane, no model, no network."""

from __future__ import annotations

import sys

from handoff.providers.base import Launch

TOOK = "scripted: took"


class Scripted:
    name = "scripted"
    env_allow: tuple[str, ...] = ()

    def missing(self) -> str | None:
        return None

    def argv(self, launch: Launch) -> list[str]:
        return [sys.executable, "-m", "handoff.scripted_agent", launch.role, launch.message]

    def taken(self, screen: str, message: str) -> bool:
        return any(line.startswith(TOOK) and message in line for line in screen.splitlines())
