"""handoff.providers.gemini: how Gemini CLI is launched, and its hooks through a settings
layer of handoff's own."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from handoff.providers import Launch, RoleSpec, get
from handoff.providers.signals import script
from tests.unit.providers.test_gemini import gemini_launch


def test_gemini_hooks_signal_a_prompt_a_turns_end_and_a_permission_and_print_nothing(
        tmp_path: Path) -> None:
    """Each runs the signal script on the JSON gemini gives it on stdin; gemini parses a hook's
    stdout as its answer, so the script must say nothing."""
    import subprocess

    from handoff.providers.gemini import hooks
    from handoff.providers.signals import read_signals

    folder = tmp_path / "signals" / "implementer"
    wired = hooks(folder)
    assert list(wired) == ["BeforeAgent", "AfterAgent", "Notification"]
    for event, name in (("BeforeAgent", "prompt"), ("AfterAgent", "stop"),
                        ("Notification", "permission")):
        [definition] = wired[event]
        [hook] = definition["hooks"]
        assert hook["type"] == "command" and hook["name"] == f"handoff-{name}"
        assert shlex.split(hook["command"]) == ["sh", str(script()), str(folder), name]
        payload = {"hook_event_name": event, "notification_type": "ToolPermission"}
        done = subprocess.run(hook["command"], shell=True, input=json.dumps(payload),
                              capture_output=True, text=True, timeout=10)
        assert (done.returncode, done.stdout) == (0, "")
        [got] = [s for s in read_signals(folder, 0) if s.event == name]
        assert got.data == payload


def test_gemini_gets_the_git_identity_its_shell_tool_hides_from_git(
        tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gemini 0.61 runs each shell command with GIT_CONFIG_GLOBAL=/dev/null: without these the
    implementer's commit fails for want of user.name and user.email."""
    from tests.conftest import git

    env = get(RoleSpec(provider="gemini")).env(gemini_launch(tmp_path))
    assert not any(name.startswith("GIT_") for name in env), "no worktree, no identity"
    start = Launch(ticket="T-1", role="implementer", worktree=repo, brief=tmp_path / "b.md")
    env = get(RoleSpec(provider="gemini")).env(start)
    assert env["GIT_AUTHOR_NAME"] == env["GIT_COMMITTER_NAME"] == "handoff tests"
    assert env["GIT_AUTHOR_EMAIL"] == env["GIT_COMMITTER_EMAIL"] == "tests@handoff.invalid"
    git(repo, "config", "user.email", "own@repo.invalid")
    assert get(RoleSpec(provider="gemini")).env(start)["GIT_AUTHOR_EMAIL"] == \
        "own@repo.invalid", "the repository's own identity, as git itself would choose"
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Person Who Commits")
    env = get(RoleSpec(provider="gemini")).env(start)
    assert env["GIT_COMMITTER_NAME"] == "Person Who Commits", "the person's own variable first"
    assert env["GIT_AUTHOR_NAME"] == "handoff tests"
