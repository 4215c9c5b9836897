"""handoff.loop.metering: a round's usage, what each of a role's sessions spent since an earlier
`usage` event last read it."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from handoff.loop import metering
from handoff.providers import RoleSpec, get
from handoff.providers.claude import Claude
from handoff.record.usage import Usage
from tests.unit.providers.test_sessions import SESSION, claude_lines, write_jsonl


def launch_event(role_: str, when: float) -> dict[str, Any]:
    return {"time": datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds"),
            "kind": "launch", "round": 1, "role": role_}


CLAUDE = get(RoleSpec(provider="claude"))


class CountedClaude(Claude):
    """Claude Code's provider, keeping which session files it read."""

    opened: ClassVar[list[Path]] = []

    def usage(self, session: Path) -> Usage | None:
        self.opened.append(session)
        return super().usage(session)


def test_each_round_counts_only_what_its_sessions_spent_since_the_last(tmp_path: Path) -> None:
    home, worktree = tmp_path / "h", tmp_path / "wt"
    env = {"HOME": str(home)}
    folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(worktree))
    log: list[dict[str, Any]] = [launch_event("implementer", time.time() - 10)]
    assert metering.measure(CLAUDE, "implementer", worktree, log, env) is None, "no file yet"

    lines = claude_lines(cost=0.01)
    session = write_jsonl(folder / f"{SESSION}.jsonl", [*lines[:4], lines[-1]])  # round 1
    first = metering.measure(CLAUDE, "implementer", worktree, log, env)
    assert first is not None
    assert (first["tokens"], first["cost_usd"], first["source"]) == (2058, 0.01, str(session))
    assert first["provider"] == "claude"
    log.append({"kind": "usage", "round": 1, "role": "implementer", **first})
    assert metering.measure(CLAUDE, "implementer", worktree, log, env) is None, \
        "read again (a resumed orchestrator): nothing new is counted twice"

    write_jsonl(session, claude_lines(cost=0.03))  # round 2 in the same live session
    second = metering.measure(CLAUDE, "implementer", worktree, log, env)
    assert second is not None
    assert (second["tokens"], second["cost_usd"]) == (4211 - 2058, 0.02)
    assert second["input_tokens"] == 3 and second["cache_read_tokens"] == 2000
    log.append({"kind": "usage", "round": 2, "role": "implementer", **second})

    relaunched = write_jsonl(folder / "second-session.jsonl", claude_lines(cost=None))
    third = metering.measure(CLAUDE, "implementer", worktree, log, env)
    assert third is not None and third["tokens"] == 4211 and "cost_usd" not in third
    assert third["source"] == str(relaunched)
    log.append({"kind": "usage", "round": 3, "role": "implementer", **third})
    # Claude Code writes a session's cost when it ends: counted then, its tokens not again
    write_jsonl(relaunched, claude_lines(cost=0.05))
    late = metering.measure(CLAUDE, "implementer", worktree, log, env)
    assert late is not None and (late["tokens"], late["cost_usd"]) == (0, 0.05)
    assert metering.measure(CLAUDE, "reviewer", worktree, log, env) is None, "never launched"

    counted = CountedClaude(RoleSpec(provider="claude"))
    log.append({"kind": "usage", "round": 3, "role": "implementer", **late})
    assert metering.measure(counted, "implementer", worktree, log, env) is None
    assert counted.opened == [], "a session file unchanged since it was read is not read again"
    scripted = get(RoleSpec(provider="scripted"))
    assert metering.measure(scripted, "implementer", worktree, log, env) is None
