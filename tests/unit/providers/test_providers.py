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
from tests.paths import TESTS


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


# -- opencode: its signals come from handoff's plugin, loaded by OPENCODE_CONFIG_CONTENT -------


def test_opencode_loads_handoffs_plugin_for_the_peers_session_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from handoff.providers.opencode import CONFIG_CONTENT, plugin

    monkeypatch.delenv(CONFIG_CONTENT, raising=False)
    start = launch(tmp_path)
    provider = get(RoleSpec(provider="opencode"))
    assert provider.signals is True
    config = json.loads(provider.env(start)[CONFIG_CONTENT])
    assert config == {"plugin": [[plugin().as_uri(), {"folder": str(start.signals),
                                                      "script": str(script())}]]}
    assert plugin().is_file() and plugin().name == "opencode-signal.js"
    # nothing of it is on the command line (doctor probes the launch flags with --help)
    assert not any(CONFIG_CONTENT in a or "opencode-signal" in a for a in provider.argv(start))
    assert CONFIG_CONTENT not in provider.env(launch(tmp_path, signals=False))


def test_opencode_keeps_the_persons_own_inline_config_when_the_role_passes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from handoff.providers.opencode import CONFIG_CONTENT, plugin

    theirs = {"username": "me", "plugin": ["their-plugin@1.0.0"]}
    monkeypatch.setenv(CONFIG_CONTENT, json.dumps(theirs))
    start = launch(tmp_path)
    # not passed to the peer: theirs never reaches it, so there is nothing to merge
    alone = json.loads(get(RoleSpec(provider="opencode")).env(start)[CONFIG_CONTENT])
    assert [p if isinstance(p, str) else p[0] for p in alone["plugin"]] == [plugin().as_uri()]
    passed = get(RoleSpec(provider="opencode", env=(CONFIG_CONTENT,)))
    merged = json.loads(passed.env(start)[CONFIG_CONTENT])
    assert merged["username"] == "me"
    assert merged["plugin"][0] == "their-plugin@1.0.0" and merged["plugin"][1][0] == \
        plugin().as_uri()
    monkeypatch.setenv(CONFIG_CONTENT, "{ // jsonc handoff cannot merge\n}")
    assert passed.env(start)[CONFIG_CONTENT] == "{ // jsonc handoff cannot merge\n}"


def test_opencode_state_folders_follow_its_xdg_variables(tmp_path: Path) -> None:
    provider = get(RoleSpec(provider="opencode"))
    home = tmp_path / "home"
    assert provider.state_dirs({"HOME": str(home)}) == [
        home / ".config" / "opencode", home / ".local" / "share" / "opencode",
        home / ".local" / "state" / "opencode", home / ".cache" / "opencode"]
    moved = provider.state_dirs({"HOME": str(home), "XDG_DATA_HOME": str(tmp_path / "data")})
    assert moved[1] == tmp_path / "data" / "opencode"


#: opencode 1.18.33's bus events and hook calls, in the order a real session made them (one
#: turn with a subagent, an --auto permission answered at once, one left open), then the
#: signal files the plugin must have left
PLUGIN_RUN = r"""
const [plugin, folder, script] = process.argv.slice(2)
const hooks = await (await import(plugin)).default({}, { folder, script })
const ev = (type, properties) => hooks.event({ event: { id: "e", type, properties } })
const prompt = (sessionID, text) =>
  hooks["chat.message"]({ sessionID }, { parts: [{ type: "text", text },
                                                 { type: "text", text: "hint", synthetic: true }] })
await ev("session.created", { sessionID: "main", info: { id: "main" } })
await prompt("main", "Read and follow /x/brief-1.md")
await ev("session.status", { sessionID: "main", status: { type: "busy" } })
await ev("session.created", { sessionID: "kid", info: { id: "kid", parentID: "main" } })
await prompt("kid", "a subagent's own task")
await ev("session.status", { sessionID: "kid", status: { type: "idle" } })
await ev("session.idle", { sessionID: "kid" })
await ev("permission.asked", { id: "per_1", sessionID: "main", permission: "external_directory",
                               patterns: ["/x/*"] })
await ev("permission.replied", { sessionID: "main", requestID: "per_1", reply: "once" })
await ev("permission.asked", { id: "per_2", sessionID: "main", permission: "bash",
                               patterns: ["rm -r build"] })
await ev("session.status", { sessionID: "main", status: { type: "busy" } })
await ev("session.status", { sessionID: "main", status: { type: "idle" } })
await ev("session.idle", { sessionID: "main" })
const { readdirSync } = await import("node:fs")
const said = () => { try { return readdirSync(folder) } catch { return [] } }
const deadline = Date.now() + 20000  // the open permission is said after its grace
while (!said().some((n) => n.startsWith("permission.")) && Date.now() < deadline)
  await new Promise((r) => setTimeout(r, 50))
"""


def test_opencodes_plugin_says_prompt_stop_and_an_unanswered_permission_once_each(
        tmp_path: Path) -> None:
    import shutil
    import subprocess

    from handoff.providers.opencode import plugin

    node = shutil.which("node")
    assert node is not None, "node (which npm, and so opencode's install, needs) is missing"
    run = tmp_path / "run.mjs"
    run.write_text(PLUGIN_RUN, encoding="utf-8")
    folder = tmp_path / "signals"
    done = subprocess.run([node, str(run), plugin().as_uri(), str(folder), str(script())],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    said = [(p.name.split(".", 1)[0], json.loads(p.read_text())) for p in files]
    assert [name for name, _ in said] == ["prompt", "stop", "permission"], said
    assert said[0][1]["prompt"] == "Read and follow /x/brief-1.md", "typed text only"
    assert said[0][1]["session_id"] == said[1][1]["session_id"] == "main"
    assert said[1][1]["type"] == "session.idle"
    asked = said[2][1]
    assert (asked["type"], asked["tool_name"], asked["message"], asked["request_id"]) == \
        ("permission.asked", "bash", "rm -r build", "per_2")
    assert done.stdout == "", "the plugin prints nothing into the peer's screen"


def test_opencodes_plugin_without_its_options_does_nothing(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from handoff.providers.opencode import plugin

    node = shutil.which("node")
    assert node is not None
    code = ("const hooks = await (await import(process.argv[1])).default({}, undefined);"
            "process.stdout.write(JSON.stringify(Object.keys(hooks)))")
    done = subprocess.run([node, "--input-type=module", "-e", code, plugin().as_uri()],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "[]", done.stderr


SCREENS = TESTS / "fixtures" / "screens" / "opencode"


def test_opencode_reads_its_input_box_beside_a_long_folder_name() -> None:
    """A worktree path too long for the box's agent line wraps onto the input rows (far
    right): it is no draft, and a draft typed beside it is read alone."""
    opencode = get(RoleSpec(provider="opencode"))
    ready = opencode.read((SCREENS / "ready-long-folder.txt").read_text(encoding="utf-8"))
    assert (ready.state, ready.draft) == ("ready", "")
    drafted = opencode.read((SCREENS / "draft-long-folder.txt").read_text(encoding="utf-8"))
    assert (drafted.state, drafted.draft) == ("ready", "a draft of my own")


def test_opencode_finds_a_sent_message_its_bubble_wrapped_inside_a_path() -> None:
    """opencode wraps a long message where the row is full, even within a path, beside its
    sidebar (seen with a queued nudge): it was taken; the same rows in the input box were not."""
    brief = "/tmp/pytest-of-root/pytest-35/test_a_ticket0/state/repo-b047ad5078/OC-2/brief-1.md"
    message = f"You ended your turn without filing your report. Read and follow {brief} now."
    side = " " * 20 + "Context"
    wrapped = [f"  ┃  You ended your turn without filing your report. Read and follow "
               f"/tmp/pytest-of-root/pytest-35/test_a_ticket0/state/repo-{side}",
               f"  ┃  b047ad5078/OC-2/brief-1.md now.{side}"]
    box = ["  ┃", "  ┃  Build auto · Claude Sonnet 4.6 Anthropic", "  ╹▀▀▀▀▀▀▀▀",
           "   ⬝■■■■■■⬝  esc interrupt"]
    sent = "\n".join(["  ┃", *wrapped, "  ┃   QUEUED", "", "  ┃", "  ┃", *box])
    from tests.e2e.test_setups import BLIND

    for spec in (RoleSpec(provider="opencode"), RoleSpec(provider="opencode", markers=BLIND)):
        assert get(spec).taken(sent, message), spec
        assert not get(spec).taken(sent, message.replace("OC-2", "OC-3")), spec
    drafted = "\n".join(["", "  ┃", *wrapped, *box])
    assert not get(RoleSpec(provider="opencode")).taken(drafted, message)


def test_a_role_whose_markers_replace_opencodes_box_is_read_by_them_alone() -> None:
    from tests.e2e.test_setups import BLIND

    blind = get(RoleSpec(provider="opencode", markers=BLIND))
    for name in ("ready", "ready-in-session", "draft", "busy"):
        reading = blind.read((SCREENS / f"{name}.txt").read_text(encoding="utf-8"))
        assert (reading.state, reading.draft) == ("starting", None), name


def test_doctor_warns_when_opencode_would_install_its_plugin_api_at_each_start(
        tmp_path: Path) -> None:
    provider = get(RoleSpec(provider="opencode"))
    env = {"HOME": str(tmp_path)}
    [warned] = provider.checks(tmp_path, env)
    assert warned.level == "WARN" and "@opencode-ai/plugin" in warned.detail
    (tmp_path / ".config" / "opencode" / "node_modules").mkdir(parents=True)
    assert provider.checks(tmp_path, env) == []


# -- Gemini CLI: its hooks through a settings layer of handoff's own ---------------------------


def gemini_launch(folder: Path, role: str = "implementer") -> Launch:
    return Launch(ticket="T-1", role=role, worktree=folder / "wt",
                  brief=folder / "inbox" / role / "brief-1.md", ticket_dir=folder,
                  signals=folder / "signals" / role)


@pytest.fixture
def root_only_folder(request: pytest.FixtureRequest) -> Path:
    """A 700 folder outside /tmp, in a tree root owns and only root may write (the test cache):
    where gemini takes a settings layer from, when the tests run as root. Removed after."""
    import shutil
    import uuid

    from tests.standins import install

    runs = install.CACHE / "run"
    runs.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder = runs / uuid.uuid4().hex[:12]
    folder.mkdir(mode=0o700)
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


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


def test_gemini_layer_keeps_the_machines_defaults_and_drops_another_handoffs_hooks(
        tmp_path: Path) -> None:
    from handoff.providers.gemini import layered, strip_comments
    from handoff.providers.signals import signal_command

    machine = ('// the administrator\'s defaults\n{"ui": {"theme": "a//b /* c */"}, /* x */\n'
               '"hooks": {"BeforeAgent": [{"hooks": [{"type": "command", "command": "audit"}]},'
               ' {"hooks": [{"type": "command", "name": "handoff-prompt", "command": "old"}]}],'
               ' "AfterTool": [{"matcher": "write_.*", "hooks": [{"type": "command", '
               '"command": "scan \\"x\\""}]}]}}')
    base = json.loads(strip_comments(machine))
    assert base["ui"] == {"theme": "a//b /* c */"}, "comments go, strings stay whole"
    folder = tmp_path / "signals" / "implementer"
    merged = layered(base, folder)
    assert merged["ui"] == base["ui"]
    wired = merged["hooks"]
    assert isinstance(wired, dict)
    before = [h["command"] for d in wired["BeforeAgent"] for h in d["hooks"]]
    assert before == ["audit", signal_command(folder, "prompt")], \
        "the machine's hook first; the outer handoff's (its name handoff-*) is gone"
    assert wired["AfterTool"] == base["hooks"]["AfterTool"]
    assert [d["hooks"][0]["name"] for d in wired["AfterAgent"]] == ["handoff-stop"]


def test_gemini_takes_a_settings_layer_only_where_root_owns_every_folder_and_none_is_open(
        root_only_folder: Path) -> None:
    """Measured in 0.61: "Parent directory '/tmp' is insecure", "is not owned by root"."""
    from handoff.providers.gemini import skipped_because

    under_tmp = skipped_because(Path("/tmp") / "handoff-state" / "layer.json")
    layer = root_only_folder / "state" / "layer.json"
    if os.geteuid() != 0:
        assert under_tmp is not None and "uid" in under_tmp
        assert "root owns" in (skipped_because(layer) or "")
        return
    assert under_tmp == "'/tmp' is writable by group or others (mode 1777)"
    assert skipped_because(layer) is None
    opened = root_only_folder / "opened"
    opened.mkdir()
    opened.chmod(0o775)
    assert skipped_because(opened / "layer.json") == \
        f"'{opened}' is writable by group or others (mode 775)"
    linked = root_only_folder / "linked"
    linked.symlink_to(Path("/tmp"))
    assert skipped_because(linked / "layer.json") == \
        f"'{linked}' is writable by group or others (mode 1777)", "a symlink counts as its target"


def test_gemini_env_writes_each_roles_layer_where_gemini_reads_it_and_nowhere_else(
        tmp_path: Path, root_only_folder: Path) -> None:
    import stat

    from handoff.providers.gemini import DEFAULTS_VARIABLE, hooks_layer

    machine = root_only_folder / "machine-defaults.json"
    machine.write_text('{"ui": {"hideTips": true}} // the machine\'s\n')
    environ = {DEFAULTS_VARIABLE: str(machine)}
    ticket = root_only_folder / "ticket"
    env = hooks_layer(gemini_launch(ticket, "reviewer"), environ)
    if os.geteuid() != 0:
        assert env == {} and not ticket.exists(), "gemini would skip it: nothing is written"
        return
    path = ticket / "gemini" / "reviewer-system-defaults.json"
    assert env == {DEFAULTS_VARIABLE: str(path)}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    data = json.loads(path.read_text())
    assert data["ui"] == {"hideTips": True}
    assert shlex.split(data["hooks"]["AfterAgent"][0]["hooks"][0]["command"])[-2:] == \
        [str(ticket / "signals" / "reviewer"), "stop"]
    # where gemini would not read it, or what it would carry is broken, or there is nothing to
    # signal: the variable is left alone and nothing is written
    assert hooks_layer(gemini_launch(tmp_path), environ) == {}
    assert not (tmp_path / "gemini").exists()
    machine.write_text("{broken")
    assert hooks_layer(gemini_launch(root_only_folder / "other"), environ) == {}
    quiet = Launch(ticket="T-1", role="implementer", worktree=ticket, brief=ticket / "b.md",
                   ticket_dir=root_only_folder / "third")
    assert hooks_layer(quiet, environ) == {}, "no signal folder, no hooks"
    assert not (root_only_folder / "third").exists()
    assert DEFAULTS_VARIABLE in get(RoleSpec(provider="gemini")).passthrough({}), \
        "the person's own defaults file reaches the orchestrator, which carries it over"


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


def test_doctor_warns_when_gemini_would_skip_handoffs_settings_layer(
        tmp_path: Path, root_only_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = get(RoleSpec(provider="gemini"))
    account = tmp_path / "account"
    settings = account / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"security": {"auth": {"selectedType": "gemini-api-key"}}}')
    env = {"HOME": str(tmp_path / "elsewhere"), "GEMINI_CLI_HOME": str(account),
           "GEMINI_API_KEY": "k"}
    assert provider.state_dirs(env) == [account / ".gemini"], "GEMINI_CLI_HOME is its home"
    monkeypatch.setenv("HANDOFF_HOME", str(tmp_path / "state"))
    [warned] = provider.checks(tmp_path, env)
    assert (warned.level, warned.what) == ("WARN", "gemini hooks")
    assert "screen alone" in warned.detail
    if os.geteuid() != 0:
        assert "root" in warned.detail
        return
    assert "'/tmp' is writable by group or others" in warned.detail
    assert "HANDOFF_HOME" in warned.fix
    monkeypatch.setenv("HANDOFF_HOME", str(root_only_folder / "state"))
    assert provider.checks(tmp_path, env) == []
    settings.write_text('{"security": {"auth": {"selectedType": "gemini-api-key"}}, '
                        '"hooksConfig": {"enabled": false}}')
    [off] = provider.checks(tmp_path, env)
    assert off.level == "WARN" and "hooksConfig.enabled: false" in off.detail


def test_gemini_reads_its_tool_approval_as_a_dialog_it_never_answers() -> None:
    """Outside yolo mode (measured on 0.61, the Notification hook fires with it)."""
    screen = "\n".join([
        " > run it", "╭" + "─" * 60 + "╮",
        "│ │ cd /work && echo needs-approval" + " " * 20 + "│ │",
        "│ Allow execution of [Shell]?" + " " * 30 + "│", "│" + " " * 60 + "│",
        "│ ● 1. Allow once" + " " * 40 + "│", "│   2. Allow for this session" + " " * 30 + "│",
        "│   3. No, suggest changes (esc)" + " " * 27 + "│", "╰" + "─" * 60 + "╯"])
    reading = get(RoleSpec(provider="gemini", permission_mode="default")).read(screen)
    assert reading.state == "dialog" and reading.dialog is not None
    assert (reading.dialog.name, reading.dialog.keys) == ("approval", ())
    assert "bypass" in reading.dialog.fix
