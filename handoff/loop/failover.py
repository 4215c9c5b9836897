"""A role whose CLI says its quota or rate limit is spent is taken over by the next CLI of its
`fallback:` list (roles.<role>.fallback), on the same brief, its place in the ticket and the
ledger kept: the team goes on where a fleet would wait hours for a reset.

The failovers a ticket made are kept in its record (`State.failovers`: role → how many), so a
resumed or re-read configuration puts the same CLI back in the role (`applied`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from handoff.config import Config
from handoff.providers import RoleSpec

#: the monitor's judgement of a peer blocked by a spent quota (handoff.loop.monitor)
QUOTA = "blocked (quota)"


def taken_over(spec: RoleSpec) -> RoleSpec | None:
    """Who takes the role over next: its first fallback, as the role is (its kind, focus and
    contract) with the rest of the list behind it; None when none is left."""
    if not spec.fallback:
        return None
    return replace(spec.fallback[0], kind=spec.kind, focus=spec.focus, contract=spec.contract,
                   fallback=spec.fallback[1:])


def applied(config: Config, failovers: Mapping[str, int]) -> Config:
    """config with the ticket's failovers made again: each role on the CLI it was moved to."""
    roles = dict(config.roles)
    for role, count in failovers.items():
        spec = roles.get(role)
        for _ in range(count if spec is not None else 0):
            nxt = taken_over(spec) if spec is not None else None
            if nxt is None:
                break
            spec = nxt
        if spec is not None:
            roles[role] = spec
    return replace(config, roles=roles) if roles != config.roles else config
