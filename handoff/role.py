"""The two roles of a ticket: their names, and the phase in which each one's report is awaited.

Stdlib only: `handoff submit` (handoff.cli.filing) imports it in every peer's short process.
"""

from __future__ import annotations

from handoff.errors import UsageError

ROLES = ("implementer", "reviewer")


def check_role(role: str) -> str:
    if role not in ROLES:
        raise UsageError(f"unknown role {role!r}", f"roles are: {', '.join(ROLES)}")
    return role


def phase_of(role: str) -> str:
    """The phase in which the ticket waits for role's report."""
    return "implementing" if role == "implementer" else "reviewing"
