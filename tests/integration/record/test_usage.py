"""What the peers spent: a round's usage measured from the CLIs' session files
(handoff.loop.metering), the ticket's totals and budget (handoff.record.usage), shown by
`status`, `log` and the final report; a `budget` stops the ticket for a person. The session
files themselves: tests/unit/providers/test_sessions.py. The end-to-end tests run the real `claude` and
`codex` against the stand-in servers, which report token usage in their responses.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    spawn,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors, trust_codex
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home
from tests.standins.openai import OpenAIStandIn

# ---- a whole ticket with the real Claude Code -----------------------------------------------

def test_claude_usage_is_recorded_shown_and_its_budget_stops_the_ticket_once(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)}, budget={"tokens": 1})
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    runner = spawn("start", "CU-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orch.log")
    try:
        waiting = wait_phase(handoff_home, "CU-1", "needs-human", "passed", "escalated",
                             timeout=150)
        assert waiting["phase"] == "needs-human", (tmp_path / "orch.log").read_text() + \
            stand_in_errors(anthropic)
        log = events(handoff_home, "CU-1")
        spent = [e for e in log if e["kind"] == "usage"]
        assert [(e["round"], e["role"]) for e in spent] == [(1, "implementer")]
        first = spent[0]
        assert first["tokens"] > 1 and first["output_tokens"] > 0 and first["input_tokens"] > 0
        assert first["provider"] == "claude" and first["source"].endswith(".jsonl")
        # read from the implementer's own CLI folder, not the person's ~/.claude
        own = ticket_path(handoff_home, "CU-1") / "cli" / "implementer" / "claude" / "projects"
        assert Path(first["source"]).is_relative_to(own) and Path(first["source"]).is_file()
        assert not (Path(isolated["HOME"]) / ".claude" / "projects").exists()
        assert f"over budget: the peers used {first['tokens']:,} tokens" in waiting["reason"]
        assert waiting["after_answer"] == "gating"

        shown = handoff("status", "CU-1", "--json", cwd=repo)
        row = json.loads(shown.stdout)[0]
        assert row["usage"]["tokens"] == first["tokens"] and row["phase"] == "needs-human"
        text = handoff("status", "CU-1", cwd=repo).stdout
        assert f"usage: {first['tokens']:,} tokens (in " in text
        logged = handoff("log", "CU-1", cwd=repo).stdout
        assert f"implementer used {first['tokens']:,} tokens" in logged
        assert "over budget:" in logged

        assert handoff("answer", "CU-1", "go on", cwd=repo).returncode == 0
        assert runner.wait(timeout=180) == 0, (tmp_path / "orch.log").read_text()
    finally:
        runner.kill()
        runner.wait()
    final = state(handoff_home, "CU-1")
    assert final["phase"] == "passed", final["reason"]
    log = events(handoff_home, "CU-1")
    spent = [e for e in log if e["kind"] == "usage"]
    assert [(e["round"], e["role"]) for e in spent] == [(1, "implementer"), (1, "reviewer")]
    assert len([e for e in log if e["kind"] == "budget"]) == 1, "asked once for one budget"
    assert not [e for e in anthropic.main_loop() if "A person answered" in (e.prompt or "")], \
        "the answer to a budget stop at the gate carries the ticket on; no peer is told it"
    report = (ticket_path(handoff_home, "CU-1") / "final-report.md").read_text()
    total = sum(e["tokens"] for e in spent)
    assert f"**Usage:** {total:,} tokens" in report
    assert f"| 1 | implementer | {spent[0]['tokens']:,} |" in report
    assert f"| 1 | reviewer | {spent[1]['tokens']:,} |" in report
    closed = handoff("close", "CU-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr


def test_codex_usage_is_read_from_its_rollout_in_the_implementers_worktree(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str], claude: Path,
        codex: Path, anthropic: AnthropicStandIn, openai: OpenAIStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    trust_codex(openai, repo)
    configure(handoff_home, {"implementer": role("codex", codex),
                             "reviewer": role("claude", claude)})
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", "CXU-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    spent = {e["role"]: e for e in events(handoff_home, "CXU-1") if e["kind"] == "usage"}
    assert set(spent) == {"implementer", "reviewer"}
    codex_usage = spent["implementer"]
    assert codex_usage["provider"] == "codex" and "cost_usd" not in codex_usage
    # the implementer's own $CODEX_HOME, seeded from the person's (which gets no rollout)
    sessions = ticket_path(handoff_home, "CXU-1") / "cli" / "implementer" / "codex" / "sessions"
    assert Path(codex_usage["source"]).is_relative_to(sessions)
    assert not (Path(os.environ["CODEX_HOME"]) / "sessions").exists()
    assert Path(codex_usage["source"]).name.startswith("rollout-")
    assert codex_usage["input_tokens"] > 0 and codex_usage["output_tokens"] > 0
    assert spent["reviewer"]["provider"] == "claude"
    row = json.loads(handoff("status", "CXU-1", "--json", cwd=repo).stdout)[0]
    assert row["usage"]["tokens"] == codex_usage["tokens"] + spent["reviewer"]["tokens"]
    assert handoff("close", "CXU-1", cwd=repo).returncode == 0
