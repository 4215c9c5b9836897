"""Real set-ups: Claude Code on a cloud back-end with a second account's folder, and handoff
started from inside a running Claude Code session, with the real binary against the stand-in.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from handoff.providers.markers import marker
from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    as_peer,
    events,
    handoff,
    plan_text,
    state,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors, trust_codex
from tests.standins import install
from tests.standins.anthropic import VERTEX, AnthropicStandIn, Mind
from tests.standins.brain import Action, Say, Shell
from tests.standins.homes import CLAUDE_TOKEN, claude_home
from tests.standins.openai import OpenAIStandIn


def test_claude_on_vertex_with_a_second_accounts_config_dir_passes_as_both_peers(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    """The person's environment is a Vertex user's (no Anthropic URL or token at all), and
    their Claude Code state lives in CLAUDE_CONFIG_DIR, not in HOME: nothing is listed in
    env_allow, and doctor, start, the peers, usage and transcripts all follow it."""
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CODE_USE_VERTEX", "1")
    monkeypatch.setenv("CLAUDE_CODE_SKIP_VERTEX_AUTH", "1")
    monkeypatch.setenv("ANTHROPIC_VERTEX_BASE_URL", f"{anthropic.base_url}/v1")
    monkeypatch.setenv("ANTHROPIC_VERTEX_PROJECT_ID", "proj-7")
    monkeypatch.setenv("CLOUD_ML_REGION", "us-east5")
    account = tmp_path / "second-account"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(account))
    home = Path(isolated["HOME"])
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)})

    # HOME has no Claude Code state; the config dir does not either yet: start refuses
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                                          test=ADD_ONLY, review=[ALL_TESTS]))
    refused = handoff("start", "VX-0", "--plan", str(plan), "--yes", cwd=repo)
    assert refused.returncode != 0 and f"{account / '.claude.json'}" in refused.stderr, \
        refused.stderr
    claude_home(account, [repo])  # the second account: onboarded, the repository trusted
    seeded = (account / ".claude.json").read_bytes()
    doctor = handoff("doctor", cwd=repo)
    assert doctor.returncode == 0, doctor.stdout
    assert "back-end vertex (CLAUDE_CODE_USE_VERTEX=1 in the environment)" in doctor.stdout
    assert "ANTHROPIC_VERTEX_PROJECT_ID" in doctor.stdout
    # the set-up warns of nothing (one CLI as both peers is said: a choice, not a fault)
    assert [line for line in doctor.stdout.splitlines()
            if line.startswith("WARN") and not line.startswith("WARN  team: ")] == []

    done = handoff("start", "VX-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    final = state(handoff_home, "VX-1")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    assert "return a * b" in git(repo, "show", "handoff/VX-1:calc.py")

    # every turn went to Vertex's endpoint of the person's project and region
    paths = [e.path for e in anthropic.main_loop()]
    assert len(paths) >= 8 and all(VERTEX.fullmatch(p.split("?")[0]) for p in paths), paths
    assert all("/projects/proj-7/locations/us-east5/" in p for p in paths)
    # usage and the transcript copy came from each role's own folder, seeded from the second
    # account's, which was only read
    folder = ticket_path(handoff_home, "VX-1")
    used = [e for e in events(handoff_home, "VX-1") if e["kind"] == "usage"]
    assert {e["role"] for e in used} == {"implementer", "reviewer"}
    assert all(e["source"].startswith(f"{folder}/cli/{e['role']}/claude/projects/")
               for e in used), used
    session = (folder / "transcripts" / "reviewer-1.session.jsonl").read_text()
    assert f"Read and follow {folder / 'inbox' / 'reviewer' / 'brief-1.md'}" in session
    assert not (home / ".claude").exists() and not (home / ".claude.json").exists()
    assert sorted(p.name for p in account.iterdir()) == [".claude.json"]
    assert (account / ".claude.json").read_bytes() == seeded
    assert handoff("close", "VX-1", cwd=repo).returncode == 0


def env_recorder(out: Path) -> Mind:
    """A stand-in mind that has Claude Code run `env` once, as a person's Bash call would."""
    def mind(prompt: str, results: Sequence[str]) -> Action:
        if not results:
            return Shell(f"env -0 > {out}; echo handoff-exit=$?", str(out.parent))
        return Say("Recorded.")
    return mind


def claude_session_env(tmp_path: Path, isolated: dict[str, str]) -> dict[str, str]:
    """The environment a command run by a real Claude Code session gets (its session markers
    among it): measured, not written down."""
    out = tmp_path / "inside-claude.env"
    with AnthropicStandIn(mind=env_recorder(out)) as api:
        claude_home(Path(isolated["HOME"]), [tmp_path])
        env = {**os.environ, "ANTHROPIC_BASE_URL": api.base_url,
               "ANTHROPIC_AUTH_TOKEN": CLAUDE_TOKEN, "IS_SANDBOX": "1"}
        done = subprocess.run([str(install.binary("claude")), "-p", "--dangerously-skip-permissions",
                               "record the environment"], cwd=tmp_path, env=env, timeout=120,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        assert out.exists(), done.stdout + done.stderr + "; ".join(api.errors)
    entries = out.read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in entries if b"=" in e)


def environ(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode(errors="replace").split("=", 1) for e in entries if b"=" in e)


def test_no_marker_of_the_session_that_started_handoff_reaches_a_peer_or_the_tmux_server(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """handoff started from a Bash call of a real Claude Code session: the peers, the
    orchestrator's pane and the tmux server hold none of that session's markers, while the
    configuration the person listed still arrives."""
    inside = claude_session_env(tmp_path, isolated)
    found = {name for name in inside if marker(name)}
    assert {"CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_ENTRYPOINT"} <= found, \
        sorted(inside)  # what the measurement says a session sets: the test can fail
    for name, value in inside.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "4096")  # configuration, listed below
    (repo / ".handoff.yaml").write_text("env_allow: [CLAUDE_CODE_MAX_OUTPUT_TOKENS]\n")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "config")
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD],
                                               "pause_before_report": "go"}}, test=ADD_ONLY))
    started = handoff("start", "MK-1", "--plan", str(plan), "--yes", cwd=repo)
    assert started.returncode == 0, started.stderr
    go = ticket_path(handoff_home, "MK-1") / "go"
    wait_event(handoff_home, "MK-1", "launch", role="implementer")
    st = state(handoff_home, "MK-1")
    server = int(subprocess.run(["tmux", "-L", st["socket"], "display-message", "-p", "#{pid}"],
                                capture_output=True, text=True, timeout=15, check=True).stdout)
    panes = subprocess.run(["tmux", "-L", st["socket"], "list-panes", "-s", "-t",
                            f"={st['session']}", "-F", "#{window_name} #{pane_pid}"],
                           capture_output=True, text=True, timeout=15, check=True).stdout
    pids = {line.split()[0]: int(line.split()[1]) for line in panes.splitlines()}
    peer = as_peer(handoff_home, "MK-1", "implementer")
    seen = {"tmux server": environ(server), "orchestrator": environ(pids["orchestrator"]),
            "implementer": peer}
    for who, env in seen.items():
        leaked = sorted(n for n in env if marker(n) or n in found)
        assert leaked == [], (who, leaked)
    assert peer["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "4096", "listed configuration arrives"
    shown = subprocess.run(["tmux", "-L", st["socket"], "show-environment", "-g"],
                           capture_output=True, text=True, timeout=15).stdout
    assert not [n for n in found if re.search(rf"^-?{n}=", shown, re.M)], shown
    go.write_text("")
    wait_phase(handoff_home, "MK-1", "passed", timeout=90)
    assert handoff("close", "MK-1", cwd=repo).returncode == 0


#: screen rules that read nothing: an input line, work and a turn's end none of which any
#: screen shows, as after a release that changed the CLI's whole screen
BLIND = {"composer": "\u2603\u2603", "busy": "^never-busy-\u2603$", "turn_ended": "^never-ended-\u2603$"}


@pytest.mark.parametrize("implementer", ["claude", "codex"])
def test_a_ticket_passes_on_hook_signals_alone_when_no_screen_rule_matches(
        implementer: str, repo: Path, tmp_path: Path, handoff_home: Path,
        isolated: dict[str, str], claude: Path, codex: Path, anthropic: AnthropicStandIn,
        openai: OpenAIStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    trust_codex(openai, repo)
    binaries = {"claude": claude, "codex": codex}
    reviewer = "codex" if implementer == "claude" else "claude"
    configure(handoff_home, {"implementer": role(implementer, binaries[implementer],
                                                 markers=BLIND),
                             "reviewer": role(reviewer, binaries[reviewer], markers=BLIND)})
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    ticket = f"SIG-{implementer}"
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    final = state(handoff_home, ticket)
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    log = events(handoff_home, ticket)
    judged = [e for e in log if e["kind"] == "peer"]
    for who in ("implementer", "reviewer"):
        mine = [e for e in judged if e["role"] == who]
        assert any(e["state"] == "working" and "hook UserPromptSubmit" in e["evidence"]
                   for e in mine), (who, mine)
        # no judgement of this peer came from its screen: the rules matched nothing
        assert all(e["evidence"].startswith("hook ") for e in mine
                   if e["state"] in ("working", "turn-ended")), (who, mine)
    assert [e for e in log if e["kind"] in ("escalate", "delivery-failed")] == []
    assert handoff("close", ticket, cwd=repo).returncode == 0


def test_a_live_peer_nothing_can_be_read_of_is_said_with_its_screen_and_the_ticket_goes_on(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """A CLI whose screen no rule matches and which sends no hook signal: said once as a
    `screen-unrecognised` event with the screen kept, well before stall_timeout; not a stall,
    not a person's turn."""
    configure(handoff_home, {"implementer": {
        "provider": "command",
        "command": ["sh", "-c", "echo 'a screen of its own'; exec sleep 600", "{message}"]}},
        unrecognised_timeout=2, start_timeout=600)
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "UN-1", "--plan", str(plan), "--yes", cwd=repo).returncode == 0
    said = wait_event(handoff_home, "UN-1", "screen-unrecognised", timeout=60, role="implementer")
    assert "no hook signal and no screen rule matched" in said["evidence"]
    assert said["provider"] == "command" and said["version"] == "unknown"
    kept = ticket_path(handoff_home, "UN-1") / "transcripts" / said["screen"]
    assert said["screen"] == "implementer-1.unrecognised.log"
    assert "a screen of its own" in kept.read_text()
    assert "a screen of its own" in said["last_lines"]
    assert state(handoff_home, "UN-1")["phase"] == "implementing", "the ticket goes on"
    assert [e for e in events(handoff_home, "UN-1") if e["kind"] == "escalate"] == []
    shown = handoff("log", "UN-1", cwd=repo).stdout
    assert "cannot be read (command unknown): no hook signal" in shown
    assert "screen: transcripts/implementer-1.unrecognised.log" in shown
    assert handoff("stop", "UN-1", cwd=repo).returncode == 0
    assert handoff("close", "UN-1", cwd=repo).returncode == 0
