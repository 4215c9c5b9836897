"""handoff.providers: how each CLI is launched, what it may see, what it is told."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.providers import REGISTRY, Launch, RoleSpec, get
from handoff.providers.base import Provider
from handoff.providers.signals import script


def launch(tmp_path: Path, contract: bool = True, signals: bool = True) -> Launch:
    path = tmp_path / "contracts" / "implementer.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Your role: implementer\nCONTRACT-SENTINEL \"quoted\"\n")
    return Launch(ticket="T-1", role="implementer", worktree=tmp_path / "wt",
                  brief=tmp_path / "inbox" / "brief-1.md", ticket_dir=tmp_path,
                  contract=path if contract else None,
                  session_id="11111111-2222-4333-8444-555555555555",
                  signals=tmp_path / "signals" / "implementer" if signals else None)


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


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


def test_codex_always_runs_without_its_daemon_and_keeps_its_scrollback(tmp_path: Path) -> None:
    start = launch(tmp_path)
    for mode in ("bypass", "full-auto", "default"):
        argv = get(RoleSpec(provider="codex", permission_mode=mode)).argv(start)
        assert "--no-daemon" in argv and "--no-alt-screen" in argv
        assert flag_value(argv, "-C") == str(start.worktree)
        assert ("--dangerously-bypass-approvals-and-sandbox" in argv) is (mode == "bypass")
        assert argv[-1] == f"Read and follow {start.brief}"
    argv = get(RoleSpec(provider="codex")).argv(start)
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert "allow_login_shell=false" in overrides
    instructions = [o for o in overrides if o.startswith("developer_instructions=")]
    assert start.contract is not None
    assert json.loads(instructions[0].split("=", 1)[1]) == start.contract.read_text()


def test_codex_hooks_are_its_sessions_own_and_signal_the_orchestrator(tmp_path: Path) -> None:
    """As `-c` settings (the person's config.toml and hooks.json are never written), trusted
    for this invocation only; each runs the signal script for its event."""
    import subprocess
    import tomllib

    from handoff.providers.signals import read_signals

    start = launch(tmp_path)
    argv = get(RoleSpec(provider="codex")).argv(start)
    assert "--dangerously-bypass-hook-trust" in argv
    overrides = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert "features.codex_hooks=true" in overrides
    hooks = tomllib.loads("\n".join(o for o in overrides if o.startswith("hooks.")))["hooks"]
    assert set(hooks) == {"UserPromptSubmit", "Stop", "PermissionRequest"}
    for event, name in (("UserPromptSubmit", "prompt"), ("Stop", "stop"),
                        ("PermissionRequest", "permission")):
        [handler] = hooks[event][0]["hooks"]
        assert handler["type"] == "command"
        subprocess.run(handler["command"], shell=True, input=f'{{"hook_event_name": "{event}"}}',
                       text=True, check=True, timeout=10)
        [got] = [s for s in read_signals(start.signals or tmp_path, 0) if s.event == name]
        assert got.data == {"hook_event_name": event}
    quiet = get(RoleSpec(provider="codex")).argv(launch(tmp_path, signals=False))
    assert "--dangerously-bypass-hook-trust" not in quiet, "no hooks of ours, no trust bypass"


def test_every_provider_reads_the_roles_own_markers_instead_of_its_screen_rules() -> None:
    screen = "Claude Code\n>>> \nWORKING hard\n"
    assert get(RoleSpec(provider="claude")).read(screen).state == "starting"
    mended = get(RoleSpec(provider="claude", markers={"composer": ">>>", "busy": "^WORKING"}))
    reading = mended.read(screen)
    assert reading.state == "busy" and reading.draft == ""
    assert [d.name for d in mended.rules.dialogs] == \
        [d.name for d in get(RoleSpec(provider="claude")).rules.dialogs], "its dialogs stay"
    for name in REGISTRY:  # each provider, whatever its own rules depend on
        own = get(RoleSpec(provider=name, markers={"composer": ">>>", "busy": "^WORKING"}))
        assert own.read(screen).state == "busy", name


def test_gemini_and_opencode_launch_lines(tmp_path: Path) -> None:
    start = launch(tmp_path, contract=False)
    gemini = get(RoleSpec(provider="gemini", model="gemini-3-pro")).argv(start)
    assert gemini[1:5] == ["--approval-mode", "yolo", "--skip-trust", "-m"]
    assert gemini[-1] == f"Read and follow {start.brief}"
    opencode = get(RoleSpec(provider="opencode")).argv(start)
    assert opencode[1:3] == [str(start.worktree), "--auto"]
    assert opencode[-2:] == ["--prompt", f"Read and follow {start.brief}"]
    assert get(RoleSpec(provider="opencode")).env(start)["OPENCODE_DISABLE_AUTOUPDATE"] == "1"


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


def test_codex_home_and_claude_config_dir_pass_to_their_own_cli() -> None:
    env = {"CODEX_HOME": "/h/codex", "CLAUDE_CONFIG_DIR": "/h/claude"}
    assert "CODEX_HOME" in get(RoleSpec(provider="codex")).passthrough(env)
    assert "CLAUDE_CONFIG_DIR" in get(RoleSpec(provider="claude")).passthrough(env)
    assert "CODEX_HOME" not in get(RoleSpec(provider="claude")).passthrough(env)


def test_codex_passes_the_key_its_own_model_provider_names(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'model_provider = "corp"\n[model_providers.corp]\nenv_key = "CORP_LLM_KEY"\n')
    names = get(RoleSpec(provider="codex")).passthrough({"CODEX_HOME": str(tmp_path)})
    assert "CORP_LLM_KEY" in names and "OPENAI_API_KEY" in names


def test_every_provider_module_reads_a_screen_and_knows_its_dialogs() -> None:
    for name, cls in REGISTRY.items():
        provider: Provider = cls(RoleSpec(provider=name, command=("x",)))
        assert provider.read("").state == "starting", name
        for dialog in provider.rules.dialogs:
            assert dialog.fix, f"{name}: {dialog.name} needs a fix for a person"
        for blocker in provider.rules.blockers:
            assert blocker.fix, f"{name}: {blocker.name} needs a fix for a person"


def test_the_pinned_test_clis_are_inside_their_providers_proven_range() -> None:
    from tests.standins.install import EXTRA, PINNED

    for command, (_, version) in {**PINNED, **EXTRA}.items():
        assert REGISTRY[command]().unproven(version) is None, (command, version)
    assert REGISTRY["claude"]().unproven("2.2.0") is not None
    assert REGISTRY["codex"]().unproven("0.168.9") is not None


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
