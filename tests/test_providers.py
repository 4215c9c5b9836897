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


def launch(tmp_path: Path, contract: bool = True) -> Launch:
    path = tmp_path / "contracts" / "implementer.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Your role: implementer\nCONTRACT-SENTINEL \"quoted\"\n")
    return Launch(ticket="T-1", role="implementer", worktree=tmp_path / "wt",
                  brief=tmp_path / "inbox" / "brief-1.md", ticket_dir=tmp_path,
                  contract=path if contract else None,
                  session_id="11111111-2222-4333-8444-555555555555",
                  signals=tmp_path / "signals" / "implementer")


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


@pytest.mark.parametrize("name", ["CLAUDECODE", "CLAUDE_CODE_SESSION_ID", "CLAUDE_PID",
                                  "CODEX_THREAD_ID", "CODEX_CI", "AI_AGENT"])
def test_a_coding_clis_session_markers_never_pass(name: str) -> None:
    for cls in REGISTRY.values():
        assert not cls().allowed(name), (cls.name, name)


def test_codex_home_is_configuration_and_passes_to_codex() -> None:
    assert get(RoleSpec(provider="codex")).allowed("CODEX_HOME")
    assert not get(RoleSpec(provider="claude")).allowed("CODEX_HOME")


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
