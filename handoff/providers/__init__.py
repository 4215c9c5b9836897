"""Providers: one small module per coding CLI, describing how to run and talk to it."""

from __future__ import annotations

from handoff.errors import UsageError
from handoff.providers.base import Launch, Provider
from handoff.providers.scripted import Scripted

REGISTRY: dict[str, Provider] = {"scripted": Scripted()}


def get(name: str) -> Provider:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(
            f"unknown provider {name!r}",
            f"known providers: {', '.join(sorted(REGISTRY))} (set roles.<role>.provider "
            "in .handoff.yaml)",
        ) from None


__all__ = ["REGISTRY", "Launch", "Provider", "get"]
