"""The built-in scripted agent as a provider: a real program in the pane, no model, no network."""

from __future__ import annotations

import sys

from handoff.providers.base import Launch, Provider
from handoff.providers.screen import Blocker, ScreenRules
from handoff.signs import EXIT, QUOTA, SIGNALS_VARIABLE, TOOK, WAITING

RULES = ScreenRules(composer="\0", busy=(r"^scripted: took",), turn_ended=(f"^{WAITING}",),
                    blockers=(Blocker("quota", f"^{QUOTA}",
                                      "its quota is spent: wait for it, or give the role a "
                                      "fallback"),))


class Scripted(Provider):
    name = "scripted"
    enter_delay = 0.0
    rules = RULES
    exit_keys = (EXIT, "Enter")
    exit_pause = 0.0  # it reads lines: no menu to wait for
    signals = True
    warms = True

    def executable(self) -> str | None:
        return sys.executable

    def missing(self) -> str | None:
        return None

    def version(self) -> str | None:
        from handoff import __version__

        return __version__

    def argv(self, launch: Launch) -> list[str]:
        return [sys.executable, "-m", "handoff.peer.scripted_agent", launch.role, *launch.prompt]

    def env(self, launch: Launch) -> dict[str, str]:
        return {SIGNALS_VARIABLE: str(launch.signals)} if launch.signals is not None else {}

    def taken(self, screen: str, message: str) -> bool:
        return any(line.startswith(TOOK) and message in line for line in screen.splitlines())
