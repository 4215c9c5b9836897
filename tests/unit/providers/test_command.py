"""handoff.providers.command: a person's own agent command, its placeholders filled."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.providers import RoleSpec, get
from tests.unit.providers.test_base import launch


def test_the_command_provider_fills_its_template_and_names_a_bad_placeholder(
        tmp_path: Path) -> None:
    start = launch(tmp_path)
    spec = RoleSpec(provider="command", command=(
        "agent", "--task", "{message}", "--brief={brief}", "{role}", "{worktree}",
        "{ticket_dir}", "{{literal}}"))
    assert get(spec).argv(start) == [
        "agent", "--task", f"Read and follow {start.brief}", f"--brief={start.brief}",
        "implementer", str(start.worktree), str(tmp_path), "{literal}"]
    with pytest.raises(UsageError) as caught:
        get(RoleSpec(provider="command", command=("agent", "{nope}"))).argv(start)
    assert "{nope}" in caught.value.message and "{message}" in (caught.value.hint or "")


def test_the_command_provider_needs_a_command_that_is_on_path(tmp_path: Path) -> None:
    empty = get(RoleSpec(provider="command"))
    assert empty.executable() is None and "roles.<role>.command" in (empty.missing() or "")
    gone = get(RoleSpec(provider="command", command=("no-such-agent-here", "{message}")))
    assert gone.missing() == "no-such-agent-here is not installed or not on PATH"
    there = get(RoleSpec(provider="command", command=("sh", "-c", "{message}")))
    assert there.missing() is None and there.executable() == shutil.which("sh")
    assert there.version() is None, "a person's own agent has no version handoff compares"
    own = tmp_path / "my-agent"
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    named = get(RoleSpec(provider="command", command=("agent", "{message}"), binary=str(own)))
    assert named.missing() is None and named.executable() == str(own)
