"""handoff.providers.claude: how Claude Code is launched, what it may see, what it is told."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from handoff.providers import RoleSpec, get
from handoff.providers.signals import script
from tests.unit.providers.test_base import flag_value, launch


def test_claude_starts_in_bypass_mode_with_its_brief_as_the_prompt(tmp_path: Path) -> None:
    start = launch(tmp_path)
    argv = get(RoleSpec(provider="claude", model="opus", args=("--verbose",))).argv(start)
    assert argv[-1] == f"Read and follow {start.brief}"
    assert "--dangerously-skip-permissions" in argv
    assert flag_value(argv, "--append-system-prompt-file") == str(start.contract)
    assert flag_value(argv, "--session-id") == start.session_id
    assert flag_value(argv, "-n") == "T-1 implementer"
    assert flag_value(argv, "--model") == "opus" and "--verbose" in argv


def test_claude_settings_skip_the_bypass_screen_and_wire_the_hooks(tmp_path: Path) -> None:
    start = launch(tmp_path)
    settings = json.loads(flag_value(get(RoleSpec(provider="claude")).argv(start), "--settings"))
    assert settings["skipDangerousModePermissionPrompt"] is True
    hooks = settings["hooks"]
    for event, name in (("UserPromptSubmit", "prompt"), ("Stop", "stop"),
                        ("Notification", "notification")):
        command = hooks[event][0]["hooks"][0]["command"]
        assert shlex.split(command) == ["sh", str(script()), str(start.signals), name]
    compact = hooks["SessionStart"][0]
    assert compact["matcher"] == "compact", "the contract comes back after a compaction"
    assert shlex.split(compact["hooks"][0]["command"]) == ["cat", str(start.contract)]


def test_claude_in_another_permission_mode_and_its_environment(tmp_path: Path) -> None:
    claude = get(RoleSpec(provider="claude", permission_mode="acceptEdits"))
    argv = claude.argv(launch(tmp_path))
    assert flag_value(argv, "--permission-mode") == "acceptEdits"
    assert "--dangerously-skip-permissions" not in argv
    env = claude.env(launch(tmp_path))
    assert env["CLAUDE_CODE_DISABLE_ALTERNATE_SCREEN"] == "1", "history stays in the pane"
    assert env["CLAUDE_CODE_TMPDIR"] == os.environ["TMPDIR"], "its scratch follows TMPDIR"


def test_claude_passes_its_back_ends_variables_and_no_other_back_ends() -> None:
    vertex = {"CLAUDE_CODE_USE_VERTEX": "1", "ANTHROPIC_VERTEX_PROJECT_ID": "p",
              "CLOUD_ML_REGION": "r", "VERTEX_REGION_CLAUDE_4_5_SONNET": "eu",
              "AWS_SECRET_ACCESS_KEY": "s", "ANTHROPIC_API_KEY": "k"}
    names = get(RoleSpec(provider="claude")).passthrough(vertex)
    assert {"CLAUDE_CODE_USE_VERTEX", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION",
            "VERTEX_REGION_CLAUDE_4_5_SONNET", "CLAUDE_CONFIG_DIR"} <= set(names)
    assert not {"AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY"} & set(names)
    chosen = get(RoleSpec(provider="claude", backend="anthropic")).passthrough(vertex)
    assert "ANTHROPIC_API_KEY" in chosen and "CLAUDE_CODE_USE_VERTEX" not in chosen
    off = get(RoleSpec(provider="claude")).passthrough({"CLAUDE_CODE_USE_VERTEX": "0"})
    assert "CLAUDE_CODE_USE_VERTEX" not in off and "ANTHROPIC_AUTH_TOKEN" in off


def test_claude_reads_its_state_and_sessions_from_claude_config_dir(tmp_path: Path) -> None:
    from handoff.providers.claude import config_dir, state_file

    plain = {"HOME": str(tmp_path / "home")}
    second = {**plain, "CLAUDE_CONFIG_DIR": str(tmp_path / "work")}
    assert state_file(plain) == tmp_path / "home" / ".claude.json"
    assert config_dir(plain) == tmp_path / "home" / ".claude"
    assert state_file(second) == tmp_path / "work" / ".claude.json"
    log = get(RoleSpec(provider="claude")).session_log(Path("/r/.worktrees/T/implementer"),
                                                        "abc", second)
    assert log == tmp_path / "work" / "projects" / "-r--worktrees-T-implementer" / "abc.jsonl"


def test_claude_as_root_in_handoffs_sandbox_is_told_it_is_sandboxed(tmp_path: Path) -> None:
    from dataclasses import replace

    from handoff.providers.base import is_root

    claude = get(RoleSpec(provider="claude"))
    assert "IS_SANDBOX" not in claude.env(launch(tmp_path))
    fenced = claude.env(replace(launch(tmp_path), sandboxed=True))
    assert ("IS_SANDBOX" in fenced) is is_root(), "only root needs it for bypass mode"
