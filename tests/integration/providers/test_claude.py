"""handoff.providers.claude: how Claude Code is launched, what it may see, what it is told."""

from __future__ import annotations

from pathlib import Path

from handoff.providers import RoleSpec, get


def test_doctor_finds_a_launch_flag_claudes_help_no_longer_lists(tmp_path: Path) -> None:
    """claude takes an unknown flag silently: its --help is the only witness."""
    cli = tmp_path / "claude"
    every = ("--dangerously-skip-permissions --settings <json> --session-id <id> "
             "--append-system-prompt-file <f> -n --model")
    cli.write_text(f'#!/bin/sh\necho "Usage: claude [options]\n  {every}\n"\n')
    cli.chmod(0o755)
    assert get(RoleSpec(provider="claude", binary=str(cli))).flags_problem() is None
    cli.write_text('#!/bin/sh\necho "Usage: claude [options]\n  --settings <json>, --model"\n')
    problem = get(RoleSpec(provider="claude", binary=str(cli))).flags_problem()
    assert problem is not None and "--dangerously-skip-permissions" in problem
    assert "--settings" not in problem, problem
    assert get(RoleSpec(provider="claude", binary=str(tmp_path / "gone"))).flags_problem() is None
