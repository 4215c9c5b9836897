"""A team of real CLIs against their stand-in model servers: Claude Code implements and reviews
for quality, Codex reviews for security, side by side, and the ledger carries the finding."""

from __future__ import annotations

from pathlib import Path

from tests.harness import (
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    LOGGED,
    MEND,
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


def test_claude_implements_and_reviews_codex_reviews_security_side_by_side(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str], claude: Path,
        codex: Path, anthropic: AnthropicStandIn, openai: OpenAIStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    trust_codex(openai, repo)
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude),
                             "security": role("codex", codex, kind="reviewer",
                                              focus="security")})
    plan = plan_text({1: {"edits": [FIX_ADD, FIX_MUL, FIX_NEG],
                          "security": {"must_fix": [LOGGED]}},
                      2: {"edits": [MEND]}}, test=ALL_TESTS)
    done = handoff("start", "CT-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    final = state(handoff_home, "CT-1")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    assert final["reviewed"]["1"] == {"reviewer": "pass", "security": "fail"}

    log = events(handoff_home, "CT-1")
    launched = [i for i, e in enumerate(log) if e["kind"] == "launch" and e["round"] == 1
                and e["role"] in ("reviewer", "security")]
    reported = [i for i, e in enumerate(log) if e["kind"] == "submission" and e["round"] == 1
                and e["role"] in ("reviewer", "security") and e["accepted"]]
    assert len(launched) == 2 and max(launched) < min(reported), "both at work at once"
    assert {e["provider"] for i, e in enumerate(log) if i in launched} == {"claude", "codex"}
    # both CLIs were started while each round's gate ran, and took their briefs as a paste
    for n in (1, 2):
        assert sorted((e["role"], e["kind"], e.get("reason", e.get("by")))
                      for e in log if e["round"] == n and e.get("role") in ("reviewer", "security")
                      and e["kind"] in ("launch", "brief", "delivery-failed")) == [
            ("reviewer", "brief", "paste"), ("reviewer", "launch", "warm"),
            ("security", "brief", "paste"), ("security", "launch", "warm")]

    folder = ticket_path(handoff_home, "CT-1")
    brief = (folder / "inbox" / "implementer" / "brief-2.md").read_text()
    assert "F1" in brief and LOGGED["reason"] in brief and "raised by security" in brief
    # Codex got its security contract as its developer message, and answered the ledger
    developer = "\n".join(m for r in openai.turn_records() for m in r.developer)
    assert "# Your focus: security" in developer and "You are **security**, a reviewer," in \
        developer
    second = (folder / "security-report-2.md").read_text()
    assert "F1" in second and "fixed" in second
    answers = {e["role"]: e.get("ledger") for e in log if e["kind"] == "verdict"
               and e["round"] == 2}
    assert answers == {"reviewer": ["F1 fixed"], "security": ["F1 fixed"]}

    closed = handoff("close", "CT-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert processes_of(handoff_home, "codex", "claude") == []
