"""handoff.providers.opencode: how opencode is launched, and its signals from handoff's plugin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from handoff.providers import RoleSpec, get
from handoff.providers.signals import script
from tests.paths import TESTS
from tests.unit.providers.test_base import launch


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


def test_opencode_launch_line(tmp_path: Path) -> None:
    start = launch(tmp_path, contract=False)
    opencode = get(RoleSpec(provider="opencode")).argv(start)
    assert opencode[1:3] == [str(start.worktree), "--auto"]
    assert opencode[-2:] == ["--prompt", f"Read and follow {start.brief}"]
    assert get(RoleSpec(provider="opencode")).env(start)["OPENCODE_DISABLE_AUTOUPDATE"] == "1"
