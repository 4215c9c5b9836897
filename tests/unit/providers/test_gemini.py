"""handoff.providers.gemini: how Gemini CLI is launched, and its hooks through a settings
layer of handoff's own."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from handoff.providers import Launch, RoleSpec, get
from tests.unit.providers.test_base import launch


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


def test_gemini_launch_line(tmp_path: Path) -> None:
    start = launch(tmp_path, contract=False)
    gemini = get(RoleSpec(provider="gemini", model="gemini-3-pro")).argv(start)
    assert gemini[1:5] == ["--approval-mode", "yolo", "--skip-trust", "-m"]
    assert gemini[-1] == f"Read and follow {start.brief}"
