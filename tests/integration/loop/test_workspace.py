"""handoff.loop.workspace: a ticket's workspace (its record, repository, configuration and
worktrees), what each peer and the gate are given, and what a closed ticket keeps. On real
tickets, with no peer running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handoff.errors import NotFound, UsageError
from handoff.loop.workspace import Workspace, booked_ticket_alive
from tests.loop_tickets import repo_config
from tests.tickets import moved, new_ticket
from tests.unit.providers.test_clistate import person_claude


def test_a_tickets_workspace_needs_its_repository_but_stop_and_close_do_without(
        repo: Path, handoff_home: Path, tmp_path: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    again = Workspace.open(handoff_home, ws.tdir)
    assert again.repo.top == repo.resolve() and not again.repo_gone
    moved_away = tmp_path / "moved"
    repo.rename(moved_away)
    with pytest.raises(NotFound) as caught:
        Workspace.open(handoff_home, ws.tdir)
    assert "the repository of T-1 is gone" in caught.value.message
    assert "'handoff close T-1'" in (caught.value.hint or "")
    gone = Workspace.open(handoff_home, ws.tdir, repo_may_be_gone=True)
    assert gone.repo_gone and gone.repo.top == repo.resolve()


def test_a_role_the_configuration_no_longer_names_is_a_clear_error(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    assert ws.spec("reviewer").provider == "scripted"
    with pytest.raises(UsageError) as caught:
        ws.spec("designer")
    assert "has a role 'designer' that the configuration no longer names" in \
        caught.value.message


def test_a_peer_gets_its_own_variables_and_the_allowed_ones_the_gate_no_providers(
        repo: Path, handoff_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROJECT_FLAG", "on")
    monkeypatch.setenv("NOT_ALLOWED_ANYWHERE", "secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant")
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text("#!/bin/sh\necho 2.1.300 '(Claude Code)'\n")
    claude.chmod(0o755)
    person_claude(Path(os.environ["HOME"]), repo)
    repo_config(repo, env_allow=["PROJECT_FLAG"],
                roles={"implementer": {"provider": "claude", "binary": str(claude)},
                       "reviewer": {"provider": "scripted"}})
    ws = new_ticket(handoff_home, repo)
    env = ws.env("implementer")
    assert (env["HANDOFF_ROLE"], env["HANDOFF_TICKET"], env["HANDOFF_TICKET_DIR"]) == \
        ("implementer", "T-1", str(ws.tdir.path))
    assert env["PROJECT_FLAG"] == "on" and "NOT_ALLOWED_ANYWHERE" not in env
    assert env["ANTHROPIC_API_KEY"] == "sk-ant", "its provider's key"
    assert env["CLAUDE_CONFIG_DIR"].startswith(str(ws.tdir.cli("implementer"))), \
        "its CLI's state in its own folder"
    assert "ANTHROPIC_API_KEY" not in ws.env("reviewer"), "another provider's key"
    gate = ws.gate_env()
    assert gate["PROJECT_FLAG"] == "on" and "ANTHROPIC_API_KEY" not in gate
    assert "HANDOFF_ROLE" not in gate and gate["HANDOFF_TICKET"] == "T-1"
    orchestrator = ws.orchestrator_env()
    assert orchestrator["ANTHROPIC_API_KEY"] == "sk-ant", "it hands its peers their key"
    assert "NOT_ALLOWED_ANYWHERE" not in orchestrator
    # the bounds a person set for git and tmux calls hold in its window too
    for bound in ("HANDOFF_GIT_TIMEOUT", "HANDOFF_TMUX_TIMEOUT"):
        monkeypatch.delenv(bound, raising=False)
        assert bound not in ws.orchestrator_env()
        monkeypatch.setenv(bound, "45")
        assert ws.orchestrator_env()[bound] == "45"


def test_each_worktree_gets_its_own_ports_while_its_ticket_lives(
        repo: Path, handoff_home: Path) -> None:
    repo_config(repo, ports=2)
    ws = new_ticket(handoff_home, repo)
    implementer, gate = ws.port_env("implementer"), ws.port_env("gate")
    assert set(implementer) == {"HANDOFF_PORT_1", "HANDOFF_PORT_2", "PORT"}
    assert implementer["PORT"] == implementer["HANDOFF_PORT_1"]
    assert not {implementer["HANDOFF_PORT_1"], implementer["HANDOFF_PORT_2"]} & \
        {gate["HANDOFF_PORT_1"], gate["HANDOFF_PORT_2"]}
    assert ws.port_env("implementer") == implementer, "booked once, kept"
    owner = f"{ws.tdir.path}#implementer"
    assert booked_ticket_alive(owner)
    moved(ws, "closed")
    assert not booked_ticket_alive(owner), "a closed ticket's ports are free again"
    ws.tdir.state_file.write_text("{torn")
    assert booked_ticket_alive(owner), "a record that cannot be read keeps its ports"
    assert not booked_ticket_alive(f"{handoff_home}/repo-x/GONE#gate")


def test_a_launch_names_the_peers_brief_worktree_and_signals(
        repo: Path, handoff_home: Path) -> None:
    ws = new_ticket(handoff_home, repo)
    brief = ws.tdir.path / "inbox" / "reviewer" / "brief-1.md"
    launch = ws.launch_of(ws.state(), "reviewer", brief)
    assert (launch.ticket, launch.role, launch.brief) == ("T-1", "reviewer", brief)
    assert launch.worktree == ws.worktrees.path("reviewer")
    assert launch.signals == ws.tdir.signals("reviewer"), "the scripted agent signals"
    assert launch.contract is None, "the scripted agent reads its contract in the brief"
    assert launch.session_id != ws.launch_of(ws.state(), "reviewer", brief).session_id
    assert ws.branch() == "handoff/T-1"
    assert ws.latest_brief("reviewer") is None
