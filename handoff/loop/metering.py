"""A round's usage: what each of a role's sessions spent since an earlier `usage` event last
read it (the session files: handoff.providers.sessions; the totals: handoff.record.usage)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from handoff.providers import Provider
from handoff.record.usage import Usage


def first_launch(events: Iterable[Mapping[str, Any]], role: str) -> float | None:
    """When the role's peer was first launched in this ticket (epoch seconds)."""
    for event in events:
        if event.get("kind") == "launch" and event.get("role") == role:
            try:
                return datetime.fromisoformat(str(event.get("time"))).timestamp()
            except (ValueError, OverflowError, OSError):  # a torn or hand-edited event
                return None
    return None


def measure(provider: Provider, role: str, worktree: Path, events: Sequence[Mapping[str, Any]],
            env: Mapping[str, str]) -> dict[str, object] | None:
    """The fields of a `usage` event for the role's round just reported: what each of its
    sessions spent since an earlier usage event last read it. Each session's running total is
    kept in `sessions` so the next round (or a resumed orchestrator reading the same round
    again) counts only what came after. None: nothing was read, or nothing was spent."""
    since = first_launch(events, role)
    if not provider.keeps_usage or since is None:
        return None
    known: dict[str, Mapping[str, Any]] = {}
    for event in events:
        if event.get("kind") == "usage" and event.get("role") == role:
            for session in event.get("sessions") or []:
                if isinstance(session, dict) and isinstance(session.get("file"), str):
                    known[session["file"]] = session
    spent: Usage | None = None
    sessions: list[dict[str, object]] = []
    for path in provider.sessions(worktree, since, env):
        before = known.get(str(path))
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if before is not None and before.get("bytes") == size:
            continue  # nothing written since it was read
        now = provider.usage(path)
        if now is None:
            continue
        delta = now.since(Usage.of(before) if before is not None else None)
        if not delta.tokens and (delta.cost_usd or 0.0) == 0.0:
            continue
        spent = delta if spent is None else spent.plus(delta)
        sessions.append({"file": str(path), "bytes": size, **now.fields()})
    if spent is None:
        return None
    return {**spent.fields(), "provider": provider.name, "source": sessions[-1]["file"],
            "sessions": sessions}


