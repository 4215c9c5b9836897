"""Providers: one small module per coding CLI, describing how to run and talk to it."""

from __future__ import annotations

from pathlib import Path

from handoff.errors import UsageError
from handoff.providers.base import Check, Launch, Provider, RoleSpec, first_message
from handoff.providers.claude import Claude
from handoff.providers.codex import Codex
from handoff.providers.command import Command
from handoff.providers.gemini import Gemini
from handoff.providers.opencode import Opencode
from handoff.providers.scripted import Scripted

REGISTRY: dict[str, type[Provider]] = {
    cls.name: cls for cls in (Claude, Codex, Gemini, Opencode, Command, Scripted)
}
#: the order `handoff init` prefers when it picks providers from what is installed
PREFERENCE = ("claude", "codex", "gemini", "opencode")


def known(name: str) -> type[Provider]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(
            f"unknown provider {name!r}",
            f"known providers: {', '.join(REGISTRY)} (set roles.<role>.provider "
            "in .handoff.yaml)",
        ) from None


def get(spec: RoleSpec, state: Path | None = None) -> Provider:
    """The provider for one role, bound to how that role is set up (state: the role's own
    folder for its CLI's state in a ticket; None: the person's own, as doctor reads it)."""
    return known(spec.provider)(spec, state)


__all__ = ["PREFERENCE", "REGISTRY", "Check", "Launch", "Provider", "RoleSpec",
           "first_message", "get", "known"]
