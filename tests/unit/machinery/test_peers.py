"""handoff.machinery.peers: allowlisted environments, and peers in real tmux windows on the private socket."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from handoff.machinery.peers import allowlisted_env, forget_launches, session_name, with_env
from handoff.machinery.tmux import TERM
from handoff.record.store import repo_key, validate_ticket_id

SECRETS = {"ANTHROPIC_API_KEY": "sk-ant-test-secret", "GITHUB_TOKEN": "ghp_test_secret",
           "OPENAI_API_KEY": "sk-test-openai"}



@pytest.fixture
def secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Tokens in the orchestrator's own environment (and so in its tmux server's)."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


# --- allowlisted_env -------------------------------------------------------------------------

def test_allowlisted_env_drops_secrets_and_keeps_the_basics(secrets: dict[str, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-kitty")
    monkeypatch.setenv("SOME_RANDOM_VARIABLE", "x")

    env = allowlisted_env({})

    for name in secrets:
        assert name not in env
    assert "SOME_RANDOM_VARIABLE" not in env
    assert env["PATH"] == os.environ["PATH"]
    assert env["HOME"] == os.environ["HOME"]
    assert env["HANDOFF_TMUX_SOCKET"] == os.environ["HANDOFF_TMUX_SOCKET"]
    assert env["TERM"] == TERM
    assert env["TERM"] != "xterm-kitty"


def test_allowlisted_env_keeps_only_what_was_allowed(secrets: dict[str, str]) -> None:
    env = allowlisted_env({}, allow=("GITHUB_TOKEN",))

    assert env["GITHUB_TOKEN"] == secrets["GITHUB_TOKEN"]
    assert "ANTHROPIC_API_KEY" not in env
    assert "OPENAI_API_KEY" not in env


def test_allowlisted_env_extra_wins_and_missing_names_are_skipped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TZ", raising=False)
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)

    env = allowlisted_env({"HANDOFF_ROLE": "reviewer", "HOME": "/elsewhere", "TERM": "dumb"},
                          allow=("NOT_SET_ANYWHERE",))

    assert env["HANDOFF_ROLE"] == "reviewer"
    assert env["HOME"] == "/elsewhere"
    assert env["TERM"] == TERM
    assert "TZ" not in env
    assert "NOT_SET_ANYWHERE" not in env


def test_session_name_differs_for_two_repos_with_the_same_ticket(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "repo", tmp_path / "b" / "repo"
    for path in (one, two):
        path.mkdir(parents=True)
    key_one, key_two = repo_key(one / ".git", one), repo_key(two / ".git", two)
    assert key_one != key_two

    assert session_name("PROJ-1", key_one) != session_name("PROJ-1", key_two)
    assert session_name("PROJ-1", key_one) == session_name("PROJ-1", key_one)


def test_session_name_differs_for_two_tickets_of_one_repo() -> None:
    key = "repo-0123456789"
    assert session_name("PROJ-1", key) != session_name("PROJ-2", key)


def test_session_name_keeps_dot_and_underscore_tickets_apart() -> None:
    key = "repo-0123456789"
    dotted, underscored = validate_ticket_id("REL.1"), validate_ticket_id("REL_1")

    assert session_name(dotted, key) != session_name(underscored, key)


def test_a_launch_file_names_its_session_and_goes_when_the_session_is_forgotten(
        tmp_path: Path) -> None:
    """A window ended before its launcher read its file would leave the environment it was
    given (keys included) in home/.launch until the next launch: stop removes its session's."""
    mine = with_env({"SECRET": "k"}, ["true"], tmp_path, owner="T-1-abc123")[-1]
    other = with_env({"SECRET": "k"}, ["true"], tmp_path, owner="T-2-abc123")[-1]
    plain = with_env({}, ["true"], tmp_path, owner="../escape")[-1]
    assert Path(mine).name.startswith("env-T-1-abc123-")
    assert Path(plain).name.startswith("env-") and "escape" not in plain
    assert forget_launches(tmp_path, "T-1-abc123") == 1
    assert not Path(mine).exists() and Path(other).exists() and Path(plain).exists()
    assert forget_launches(tmp_path, "../escape") == 0
    assert forget_launches(tmp_path / "nowhere", "T-2-abc123") == 0
