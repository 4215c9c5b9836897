"""A whole ticket with the real Codex as implementer and the real Claude Code as reviewer,
each against its stand-in model server."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    processes_of,
    state,
    ticket_path,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors, trust_codex
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home
from tests.standins.openai import OpenAIStandIn


def test_codex_implements_claude_reviews_fail_then_pass(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str], claude: Path,
        codex: Path, anthropic: AnthropicStandIn, openai: OpenAIStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    trust_codex(openai, repo)
    configure(handoff_home, {"implementer": role("codex", codex),
                             "reviewer": role("claude", claude)})
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    done = handoff("start", "CX-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    final = state(handoff_home, "CX-1")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}

    folder = ticket_path(handoff_home, "CX-1")
    prompts = openai.prompts()
    for n in (1, 2):
        brief = folder / "inbox" / "implementer" / f"brief-{n}.md"
        assert prompts.count(f"Read and follow {brief}") == 1, (n, prompts)
    for n in (1, 2):
        brief = folder / "inbox" / "reviewer" / f"brief-{n}.md"
        assert anthropic.turn_prompts().count(f"Read and follow {brief}") == 1
    log = events(handoff_home, "CX-1")
    assert [e["by"] for e in log if e["kind"] == "brief" and e["role"] == "implementer"] == ["paste"]
    assert [e for e in log if e["kind"] in ("nudge", "escalate", "delivery-failed")] == []
    assert git(repo, "log", "-2", "--format=%s", "handoff/CX-1").splitlines() == \
        ["CX-1: round 2", "CX-1: round 1"]

    # the role contract reached Codex as a developer message, and the brief only points at it
    developer = "\n".join(m for r in openai.turn_records() for m in r.developer)
    assert "# Your role: implementer" in developer and "## How you hand off" in developer
    brief1 = (folder / "inbox" / "implementer" / "brief-1.md").read_text()
    assert "## What you must not do" not in brief1 and "contracts/implementer.md" in brief1

    closed = handoff("close", "CX-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    transcripts = [p.read_text() for p in (folder / "transcripts").glob("implementer-2*.log")]
    assert any("Token usage" in t for t in transcripts), "codex quit by itself and said its usage"
    assert processes_of(handoff_home, "codex", "claude") == []
