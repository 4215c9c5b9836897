"""Every blocking start-up screen of the real Claude Code and Codex, met through handoff: it is
answered when the config allows it, or the ticket waits for a person with the fix spelled out.
Nothing is left running after close."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    as_peer,
    events,
    handoff,
    plan_text,
    processes_of,
    spawn,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, trust_codex
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home
from tests.standins.openai import OpenAIStandIn

PLAN = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])


def run_to(repo: Path, tmp_path: Path, home: Path, ticket: str,
           *phases: str) -> tuple[dict[str, object], subprocess.Popen[bytes]]:
    runner = spawn("start", ticket, "--plan", str(write_plan(tmp_path, PLAN)), "--yes",
                   "--foreground", "--max-rounds", "1", cwd=repo, log=tmp_path / "orch.log")
    return wait_phase(home, ticket, *phases, timeout=120), runner


def close_leaves_nothing(repo: Path, home: Path, ticket: str,
                         runner: subprocess.Popen[bytes]) -> None:
    closed = handoff("close", ticket, "--force", cwd=repo)
    runner.kill()
    runner.wait()
    assert closed.returncode == 0, closed.stderr
    assert processes_of(home, "claude", "codex") == []


def escalation(home: Path, ticket: str) -> dict[str, object]:
    found = [e for e in events(home, ticket) if e["kind"] == "escalate"]
    assert len(found) == 1, found
    return found[0]


def claude_json(isolated: dict[str, str]) -> dict[str, object]:
    data = json.loads((Path(isolated["HOME"]) / ".claude.json").read_text())
    assert isinstance(data, dict)
    return data


# ---- Claude Code ---------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_claude_trust_screen_answered_when_the_config_allows(
        sandbox: str, repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [])  # set up, but the repo is not trusted
    before = (Path(isolated["HOME"]) / ".claude.json").read_bytes()
    configure(handoff_home, {"implementer": role("claude", claude, answer=["trust"]),
                             "reviewer": role("claude", claude, answer=["trust"])},
              sandbox=sandbox)
    final, runner = run_to(repo, tmp_path, handoff_home, "TR-1", "passed", "needs-human")
    try:
        assert final["phase"] == "passed", final["reason"]
        answered = [e for e in events(handoff_home, "TR-1") if e["kind"] == "dialog"]
        assert "trust this folder" in answered[0]["evidence"]
        # sandboxed or not, each peer's Claude Code saves the trust in its own folder, seeded
        # afresh from the person's at every launch: each launch is asked and answered, and
        # the person's ~/.claude.json stays as it was
        assert {(e["role"], tuple(e["keys"])) for e in answered} == {
            ("implementer", ("Down", "Enter")), ("reviewer", ("Down", "Enter"))}
        # the reviewer, started while the gate ran, had its trust screen answered then, and
        # took its brief as a paste (a warm CLI on a dialog waited 20 s, then started afresh)
        log = events(handoff_home, "TR-1")
        assert [e.get("warm") for e in answered if e["role"] == "reviewer"] == [True]
        assert [(e["kind"], e.get("warm")) for e in log if e["role"] == "reviewer" and
                e["kind"] in ("brief", "delivery-failed")] == [("brief", True)]
        assert (Path(isolated["HOME"]) / ".claude.json").read_bytes() == before
        saved = json.loads((ticket_path(handoff_home, "TR-1") / "cli" / "implementer" /
                            "claude" / ".claude.json").read_text())
        assert saved["projects"][str(repo)]["hasTrustDialogAccepted"] is True
    finally:
        close_leaves_nothing(repo, handoff_home, "TR-1", runner)


def test_claude_trust_screen_not_allowed_waits_for_a_person_with_the_fix(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [])
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)})
    final, runner = run_to(repo, tmp_path, handoff_home, "TR-2", "needs-human", "passed")
    try:
        assert final["phase"] == "needs-human"
        reason = str(final["reason"])
        assert "dialog (trust)" in reason and "answer: [trust]" in reason
        shown = escalation(handoff_home, "TR-2")
        assert "Yes, I trust this folder" in str(shown["evidence"])
        screen = ticket_path(handoff_home, "TR-2") / "transcripts" / str(shown["screen"])
        assert "Quick safety check" in screen.read_text()
        assert anthropic.turn_prompts() == [], "no prompt reached the model"
        assert "projects" not in claude_json(isolated) or not claude_json(isolated)["projects"]
    finally:
        close_leaves_nothing(repo, handoff_home, "TR-2", runner)


@pytest.mark.parametrize("allowed", [True, False])
def test_claude_api_key_screen_answered_or_escalated(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn, monkeypatch: pytest.MonkeyPatch,
        allowed: bool) -> None:
    """With the sandbox off: Claude Code remembers an approval in the peer's own folder, never
    in the person's ~/.claude.json."""
    claude_home(Path(isolated["HOME"]), [repo])
    before = (Path(isolated["HOME"]) / ".claude.json").read_bytes()
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-standin-0123456789abcdefghijklmnop")
    answer = ["api-key"] if allowed else []
    configure(handoff_home, {"implementer": role("claude", claude, answer=answer),
                             "reviewer": role("claude", claude, answer=answer)}, sandbox="off")
    final, runner = run_to(repo, tmp_path, handoff_home, "AK-1", "needs-human", "passed")
    try:
        answered = [e for e in events(handoff_home, "AK-1") if e["kind"] == "dialog"]
        if allowed:
            assert final["phase"] == "passed", final["reason"]
            # the approval is saved in each peer's own folder: each peer is asked once
            assert {(e["role"], tuple(e["keys"])) for e in answered} == {
                ("implementer", ("Up", "Enter")), ("reviewer", ("Up", "Enter"))}
            saved = json.loads((ticket_path(handoff_home, "AK-1") / "cli" / "implementer" /
                                "claude" / ".claude.json").read_text())
            approved = saved["customApiKeyResponses"]
            assert isinstance(approved, dict) and approved["approved"] == ["0123456789abcdefghijklmnop"[-20:]]
            assert (Path(isolated["HOME"]) / ".claude.json").read_bytes() == before
        else:
            assert final["phase"] == "needs-human" and answered == []
            shown = escalation(handoff_home, "AK-1")
            assert shown["role"] == "implementer" and shown["state"] == "dialog (api-key)"
            assert "ANTHROPIC_AUTH_TOKEN" in str(final["reason"])
    finally:
        close_leaves_nothing(repo, handoff_home, "AK-1", runner)


def test_claude_mcp_screen_answered_by_going_on_without_the_server(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    (repo / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"demo": {"command": "/bin/true", "args": []}}}))
    git(repo, "add", ".mcp.json")
    git(repo, "commit", "-q", "-m", "an MCP server")
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, {"implementer": role("claude", claude, answer=["mcp"]),
                             "reviewer": role("claude", claude, args=["--strict-mcp-config"])})
    final, runner = run_to(repo, tmp_path, handoff_home, "MC-1", "passed", "needs-human")
    try:
        assert final["phase"] == "passed", final["reason"]
        answered = [e for e in events(handoff_home, "MC-1") if e["kind"] == "dialog"]
        assert [(e["role"], e["state"]) for e in answered] == [("implementer", "dialog (mcp)")]
    finally:
        close_leaves_nothing(repo, handoff_home, "MC-1", runner)


def test_claude_asking_permission_waits_for_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, {"implementer": role("claude", claude,
                                                 permission_mode="acceptEdits"),
                             "reviewer": role("claude", claude)})
    final, runner = run_to(repo, tmp_path, handoff_home, "PM-1", "needs-human", "passed")
    try:
        shown = escalation(handoff_home, "PM-1")
        assert shown["state"] == "dialog (permission)", shown
        assert "Do you want to proceed?" in str(shown["evidence"])
        assert "permission_mode: bypass" in str(final["reason"])
    finally:
        close_leaves_nothing(repo, handoff_home, "PM-1", runner)


def test_claude_broken_user_settings_are_never_answered(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    home = Path(isolated["HOME"])
    claude_home(home, [repo])
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text('{"model": 5}')
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)})
    final, runner = run_to(repo, tmp_path, handoff_home, "SE-1", "needs-human", "passed")
    try:
        shown = escalation(handoff_home, "SE-1")
        assert shown["state"] == "dialog (settings-error)"
        assert "settings file named on the screen" in str(final["reason"])
    finally:
        close_leaves_nothing(repo, handoff_home, "SE-1", runner)


def test_claude_not_logged_in_goes_to_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN")
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)})
    final, runner = run_to(repo, tmp_path, handoff_home, "NL-1", "needs-human", "passed")
    try:
        shown = escalation(handoff_home, "NL-1")
        assert shown["state"] == "blocked (not-logged-in)"
        assert "Not logged in" in str(shown["evidence"])
        assert "ANTHROPIC_API_KEY" in str(final["reason"])
    finally:
        close_leaves_nothing(repo, handoff_home, "NL-1", runner)


def test_claude_unreachable_api_goes_to_a_person_after_its_retries(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    with AnthropicStandIn() as gone:
        closed_port = gone.base_url
    monkeypatch.setenv("ANTHROPIC_BASE_URL", closed_port)
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)}, api_patience=3)
    _, runner = run_to(repo, tmp_path, handoff_home, "UR-1", "needs-human", "passed")
    try:
        shown = escalation(handoff_home, "UR-1")
        assert shown["state"] == "blocked (unreachable)"
        assert "ECONNREFUSED" in str(shown["evidence"])
    finally:
        close_leaves_nothing(repo, handoff_home, "UR-1", runner)


def test_claude_set_up_never_finished_or_root_without_sandbox_refuses_to_start(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)})
    plan = str(write_plan(tmp_path, PLAN))
    refused = handoff("start", "ON-1", "--plan", plan, "--yes", cwd=repo)
    assert refused.returncode == 6, refused.stderr
    assert "first-run set-up was never finished" in refused.stderr
    assert "run `claude` once" in refused.stderr
    assert not list(handoff_home.glob("*/ON-1")), "nothing was created"

    claude_home(Path(isolated["HOME"]), [repo])
    monkeypatch.delenv("IS_SANDBOX")
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)}, sandbox="off")
    done = handoff("start", "ON-2", "--plan", plan, "--yes", cwd=repo)
    if os.getuid() == 0:
        assert done.returncode == 6 and "IS_SANDBOX=1" in done.stderr, done.stderr
    else:
        assert done.returncode == 0, done.stderr
        handoff("close", "ON-2", "--force", cwd=repo)
    # in handoff's sandbox the same start works as root: Claude Code is told it is in one
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)}, sandbox="on")
    fenced = handoff("start", "ON-3", "--plan", plan, "--yes", cwd=repo)
    assert fenced.returncode == 0, fenced.stderr
    wait_event(handoff_home, "ON-3", "peer", role="implementer", state="working")
    assert as_peer(handoff_home, "ON-3", "implementer").get("IS_SANDBOX") == (
        "1" if os.getuid() == 0 else None)
    assert handoff("stop", "ON-3", cwd=repo).returncode == 0
    assert handoff("close", "ON-3", "--force", cwd=repo).returncode == 0


# ---- Codex ---------------------------------------------------------------------------------


def test_codex_trust_screen_answered_when_allowed_and_escalated_when_not(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        codex: Path, claude: Path, anthropic: AnthropicStandIn, openai: OpenAIStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, {"implementer": role("codex", codex),
                             "reviewer": role("claude", claude)})
    final, runner = run_to(repo, tmp_path, handoff_home, "CT-1", "needs-human", "passed")
    try:
        shown = escalation(handoff_home, "CT-1")
        assert shown["state"] == "dialog (trust)" and "Trust and continue" in str(
            shown["evidence"])
        assert "trust_level" in str(final["reason"])
    finally:
        close_leaves_nothing(repo, handoff_home, "CT-1", runner)

    configure(handoff_home, {"implementer": role("codex", codex, answer=["trust"]),
                             "reviewer": role("claude", claude)})
    final, runner = run_to(repo, tmp_path, handoff_home, "CT-2", "passed", "needs-human")
    try:
        assert final["phase"] == "passed", final["reason"]
        answered = [e for e in events(handoff_home, "CT-2") if e["kind"] == "dialog"]
        assert [(e["role"], e["keys"]) for e in answered] == [("implementer", ["Enter"])]
        # codex itself saved the answer, in the implementer's own CODEX_HOME alone
        own = ticket_path(handoff_home, "CT-2") / "cli" / "implementer" / "codex"
        assert "trusted" in (own / "config.toml").read_text()
        assert "trusted" not in (Path(os.environ["CODEX_HOME"]) / "config.toml").read_text()
    finally:
        close_leaves_nothing(repo, handoff_home, "CT-2", runner)


def test_codex_without_a_login_refuses_to_start_with_the_fix(
        repo: Path, tmp_path: Path, handoff_home: Path, codex: Path, claude: Path,
        openai: OpenAIStandIn) -> None:
    codex_home = Path(os.environ["CODEX_HOME"])
    (codex_home / "config.toml").write_text(f'[projects."{repo}"]\ntrust_level = "trusted"\n')
    configure(handoff_home, {"implementer": role("codex", codex),
                             "reviewer": role("claude", claude)})
    refused = handoff("start", "SI-1", "--plan", str(write_plan(tmp_path, PLAN)), "--yes",
                      cwd=repo)
    assert refused.returncode == 6, refused.stderr
    assert "codex login --with-api-key" in refused.stderr


def test_codex_out_of_quota_goes_to_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str], codex: Path,
        claude: Path, anthropic: AnthropicStandIn, openai: OpenAIStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    trust_codex(openai, repo)
    openai.fail(429, {"error": {"type": "insufficient_quota", "code": "insufficient_quota",
                                "message": "You exceeded your current quota."}})
    configure(handoff_home, {"implementer": role("codex", codex),
                             "reviewer": role("claude", claude)}, api_patience=2)
    _, runner = run_to(repo, tmp_path, handoff_home, "QU-1", "needs-human", "passed")
    try:
        shown = escalation(handoff_home, "QU-1")
        assert shown["state"] == "blocked (quota)"
        assert "Quota exceeded" in str(shown["evidence"])
    finally:
        close_leaves_nothing(repo, handoff_home, "QU-1", runner)
