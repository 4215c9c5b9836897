"""Paths handoff hands a peer survive spaces and quotes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.catalog import fault
from tests.harness import (
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    ticket_path,
    write_plan,
)


@fault("8", "HANDOFF_HOME holds a space and a quote; a peer ends its turn without a report "
            "and must be nudged; round 2's brief is pasted into the live peer",
       "every message names its brief shell-quoted, so the peer finds it; the nudge files the "
       "report and the ticket passes",
       "the whole record under the spaced path; the branch's commits")
def test_a_state_dir_with_spaces_and_quotes_runs_a_whole_ticket(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "it's a state dir"
    home.mkdir()
    (home / "config.yaml").write_text("turn_grace: 1\n", encoding="utf-8")
    monkeypatch.setenv("HANDOFF_HOME", str(home))
    plan = plan_text({1: {"edits": [FIX_ADD], "silent": "once"},
                      2: {"edits": [FIX_MUL, FIX_NEG], "silent": "once"}}, review=[ALL_TESTS])
    done = handoff("start", "P-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    log = events(home, "P-1")
    nudges = [e for e in log if e["kind"] == "nudge"]
    assert [(e["round"], e["delivered"]) for e in nudges] == [(1, True), (2, True)]
    assert [e["by"] for e in log if e["kind"] == "brief" and e["role"] == "implementer"] == ["paste"]
    assert [e["accepted"] for e in log if e["kind"] == "submission"] == [True] * 4
    assert ticket_path(home, "P-1").is_relative_to(home)
