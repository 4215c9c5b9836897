"""The repository as a Claude Code plugin, loaded by the real (pinned) Claude Code.

`.claude-plugin/plugin.json` names the skill (skills/handoff/SKILL.md) and the hooks file
(hooks/hooks.json, which runs hooks/plugin-signal); `.claude-plugin/marketplace.json` makes the
checkout its own marketplace, so README's one command installs it. Every run of claude here
has the test's private HOME and talks to the stand-in model server: nothing touches the
user's ~/.claude*.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from handoff.protocol.frontmatter import split
from handoff.providers import RoleSpec, get
from handoff.providers.base import Launch
from handoff.providers.claude import Claude
from tests.paths import ROOT
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_env, claude_home

MANIFEST = ROOT / ".claude-plugin" / "plugin.json"
MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
#: what a clone holds that is no part of the plugin: a folder install copies the whole folder
NOT_PLUGIN = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".worktrees")
RUN_TIMEOUT = 120.0


def manifest() -> dict[str, Any]:
    data = json.loads(MANIFEST.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def skill_folders() -> list[Path]:
    paths = manifest().get("skills", [])
    return [(ROOT / p).resolve() for p in ([paths] if isinstance(paths, str) else paths)]


def skill_header(folder: Path) -> dict[str, Any]:
    data, _ = split((folder / "SKILL.md").read_text(encoding="utf-8"))
    return data


def hook_commands() -> list[str]:
    hooks = json.loads((ROOT / manifest()["hooks"]).read_text(encoding="utf-8"))["hooks"]
    return [h["command"] for groups in hooks.values() for group in groups for h in group["hooks"]]


def readme_install_line() -> str:
    """The one command README gives for installing the plugin."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"^(claude plugin install [^#\n]*?)\s*(?:#.*)?$", text, re.M)
    assert len(found) == 1, f"README.md should give one 'claude plugin install' line: {found}"
    return str(found[0])


# -- the manifest itself ---------------------------------------------------------------------

def test_plugin_version_is_the_package_version() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]

    assert manifest()["version"] == project["version"]
    assert manifest()["name"] == "handoff"


def test_every_file_the_plugin_names_exists() -> None:
    market = json.loads(MARKETPLACE.read_text(encoding="utf-8"))
    [entry] = [p for p in market["plugins"] if p["name"] == manifest()["name"]]
    assert (MARKETPLACE.parent.parent / entry["source"] / ".claude-plugin/plugin.json").resolve() \
        == MANIFEST.resolve()

    assert skill_folders()
    for folder in skill_folders():
        assert folder.is_relative_to(ROOT), folder
        header = skill_header(folder)
        assert header["name"] == folder.name and str(header["description"]).strip()

    assert (ROOT / manifest()["hooks"]).is_file()
    commands = hook_commands()
    assert commands
    for command in commands:
        named = re.findall(r"\$\{CLAUDE_PLUGIN_ROOT\}/([^\"' ]+)", command)
        assert named, f"a hook that runs nothing of the plugin's: {command}"
        for path in named:
            assert (ROOT / path).is_file(), f"{command}: {path} is missing"
    assert (ROOT / "hooks" / "peer-signal").is_file()  # what plugin-signal hands over to


# -- the real Claude Code --------------------------------------------------------------------

@pytest.fixture
def home(isolated: dict[str, str], claude: Path, tmp_path: Path) -> Path:
    """The private HOME, with Claude Code's first-run state (no onboarding, tmp_path trusted)."""
    path = Path(isolated["HOME"])
    claude_home(path, [tmp_path])
    return path


def environment(home: Path, api: AnthropicStandIn, isolated: dict[str, str],
                **more: str) -> dict[str, str]:
    """Exactly what claude sees: the private HOME, the stand-in, the test's own temp folders."""
    return claude_env(home, api.base_url, extra={"TMPDIR": isolated["TMPDIR"],
                                                  "XDG_RUNTIME_DIR": isolated["XDG_RUNTIME_DIR"],
                                                  **more})


def run(argv: Sequence[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)


def ask(claude: Path, env: dict[str, str], cwd: Path, *args: str) -> list[dict[str, Any]]:
    """claude -p hello (one turn), its hooks' results: what each printed and how it exited."""
    done = run([str(claude), *args, "-p", "hello", "--output-format", "stream-json", "--verbose",
                "--include-hook-events"], env, cwd)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [d for d in lines if d.get("type") == "system" and d.get("subtype") == "hook_response"]


def strings(value: Any) -> Iterator[str]:
    """Every string in a request body (system blocks, messages, tool descriptions)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def offered_skill(api: AnthropicStandIn) -> bool:
    """Did the model get handoff's skill, by its name and description, in the list of skills
    Claude Code offers (`- plugin:skill: description`)?"""
    description = " ".join(str(skill_header(skill_folders()[0])["description"]).split())
    listed = f"- handoff:handoff: {description[:60]}"
    return any(listed in text for e in api.main_loop() for text in strings(e.body))


def test_claude_plugin_validate_passes_on_the_repository(home: Path, claude: Path,
                                                         anthropic: AnthropicStandIn,
                                                         isolated: dict[str, str]) -> None:
    env = environment(home, anthropic, isolated)
    for target in (MANIFEST, MARKETPLACE):
        done = run([str(claude), "plugin", "validate", "--strict", "--json", str(target)],
                   env, ROOT)
        assert done.returncode == 0, f"{target.name}:\n{done.stdout}\n{done.stderr}"
        report = json.loads(done.stdout)
        assert report["success"] is True, done.stdout
    provides = json.loads(run([str(claude), "plugin", "validate", "--json", str(MANIFEST)],
                              env, ROOT).stdout)["provides"]
    assert provides["skills"] == ["handoff:handoff"]
    assert len(provides["hooks"]) == len(hook_commands())


def test_readme_command_installs_the_plugin_and_claude_offers_its_skill(
        home: Path, claude: Path, anthropic: AnthropicStandIn, isolated: dict[str, str],
        tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=NOT_PLUGIN)
    env = environment(home, anthropic, isolated)
    line = shlex.split(readme_install_line())

    installed = run([str(claude), *line[1:]], env, clone)

    assert installed.returncode == 0, f"{line}:\n{installed.stdout}\n{installed.stderr}"
    listed = run([str(claude), "plugin", "list", "--json"], env, clone)
    [plugin] = [p for p in json.loads(listed.stdout) if p["id"] == "handoff@handoff"]
    assert plugin["enabled"] and plugin["version"] == manifest()["version"]
    assert plugin["scope"] == "user" and Path(plugin["installPath"]).is_relative_to(home)

    work = tmp_path / "work"
    work.mkdir()
    ask(claude, env, work)

    assert offered_skill(anthropic), "the installed plugin's skill was not offered to the model"
    anthropic.check()


def test_plugin_hooks_signal_a_peer_that_handoff_did_not_wire(
        home: Path, claude: Path, anthropic: AnthropicStandIn, isolated: dict[str, str],
        tmp_path: Path) -> None:
    ticket = tmp_path / "ticket"
    env = environment(home, anthropic, isolated, HANDOFF_TICKET_DIR=str(ticket),
                      HANDOFF_ROLE="implementer")

    hooks = ask(claude, env, tmp_path, "--plugin-dir", str(ROOT))

    assert offered_skill(anthropic)
    assert quiet_and_ok(hooks) == ["Stop", "UserPromptSubmit"]
    folder = ticket / "signals" / "implementer"
    assert signal_names(folder) == ["prompt", "stop"]
    prompt = json.loads(next(folder.glob("prompt.*.json")).read_text(encoding="utf-8"))
    assert prompt["hook_event_name"] == "UserPromptSubmit" and prompt["prompt"] == "hello"


def test_plugin_hooks_leave_a_wired_peer_to_handoffs_own_hooks(
        home: Path, claude: Path, anthropic: AnthropicStandIn, isolated: dict[str, str],
        tmp_path: Path) -> None:
    ticket = tmp_path / "ticket"
    folder = ticket / "signals" / "reviewer"
    provider = get(RoleSpec(provider="claude", binary=str(claude)))
    assert isinstance(provider, Claude)
    launch = Launch(ticket="T", role="reviewer", worktree=tmp_path, brief=tmp_path / "b.md",
                    ticket_dir=ticket, signals=folder)
    settings = json.dumps(provider.settings(launch))
    env = environment(home, anthropic, isolated, HANDOFF_TICKET_DIR=str(ticket),
                      HANDOFF_ROLE="reviewer")

    hooks = ask(claude, env, tmp_path, "--plugin-dir", str(ROOT), "--settings", settings)

    assert offered_skill(anthropic)
    # both hook sets ran (handoff's and the plugin's) ...
    assert quiet_and_ok(hooks) == ["Stop", "Stop", "UserPromptSubmit", "UserPromptSubmit"]
    # ... and each event was kept once: handoff's own hooks wrote it, the plugin's stayed silent
    assert signal_names(folder) == ["prompt", "stop"]


def test_plugin_hooks_do_nothing_outside_a_peer(home: Path, claude: Path,
                                                anthropic: AnthropicStandIn,
                                                isolated: dict[str, str], tmp_path: Path) -> None:
    env = environment(home, anthropic, isolated)
    before = Path("/signals").exists()  # where an unguarded hook would write without a ticket

    hooks = ask(claude, env, tmp_path, "--plugin-dir", str(ROOT))

    assert offered_skill(anthropic)
    assert quiet_and_ok(hooks) == ["Stop", "UserPromptSubmit"]
    assert anthropic.turn_prompts() == ["hello"]  # nothing a prompt hook printed was added
    assert not [p for p in (tmp_path, Path(isolated["TMPDIR"])) for _ in p.rglob("signals")]
    assert Path("/signals").exists() == before


def test_plugin_signal_script_is_silent_without_a_ticket(tmp_path: Path) -> None:
    """The hook script alone: no ticket dir, no role or a bad one -> nothing written, nothing
    printed; with both, the hook's JSON lands in the role's signal folder."""
    script = ROOT / "hooks" / "plugin-signal"
    ticket = tmp_path / "ticket"
    before = Path("/signals").exists()
    cli = subprocess.Popen(["sleep", "30"])  # a process whose command line names no hooks
    try:
        for env in ({}, {"HANDOFF_TICKET_DIR": str(ticket)}, {"HANDOFF_ROLE": "implementer"},
                    {"HANDOFF_TICKET_DIR": str(ticket), "HANDOFF_ROLE": "../x"}):
            done = subprocess.run(["sh", str(script), "stop", str(cli.pid)], input='{"a": 1}',
                                  capture_output=True, text=True, timeout=10,
                                  env={"PATH": "/usr/bin:/bin", **env})
            assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), env
        assert not ticket.exists() and not (tmp_path / "x").exists()
        assert Path("/signals").exists() == before

        done = subprocess.run(["sh", str(script), "stop", str(cli.pid)], input='{"a": 1}',
                              capture_output=True, text=True, timeout=10,
                              env={"PATH": "/usr/bin:/bin", "HANDOFF_TICKET_DIR": str(ticket),
                                   "HANDOFF_ROLE": "implementer"})
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        [written] = (ticket / "signals" / "implementer").glob("stop.*.json")
        assert json.loads(written.read_text(encoding="utf-8")) == {"a": 1}
    finally:
        cli.kill()
        cli.wait(timeout=10)


def quiet_and_ok(hooks: list[dict[str, Any]]) -> list[str]:
    """The events whose hooks ran, after checking each printed nothing and exited 0 (a
    UserPromptSubmit hook's output would go into the prompt; a failing one shows)."""
    for hook in hooks:
        assert (hook["exit_code"], hook["stdout"], hook["stderr"]) == (0, "", ""), hook
    return sorted(str(h["hook_event"]) for h in hooks)


def signal_names(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(p.name.split(".", 1)[0] for p in folder.iterdir() if not p.name.startswith("."))


def test_a_peer_handoff_launches_is_not_offered_the_plugins_skill(
        home: Path, claude: Path, anthropic: AnthropicStandIn, isolated: dict[str, str],
        tmp_path: Path) -> None:
    """The person installed the plugin for themselves; the peers handoff starts do not get it
    (its skill would offer a peer to start tickets of its own)."""
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=NOT_PLUGIN)
    env = environment(home, anthropic, isolated)
    line = shlex.split(readme_install_line())
    assert run([str(claude), *line[1:]], env, clone).returncode == 0
    provider = get(RoleSpec(provider="claude", binary=str(claude)))
    assert isinstance(provider, Claude)
    ticket = tmp_path / "ticket"
    launch = Launch(ticket="T", role="implementer", worktree=tmp_path, brief=tmp_path / "b.md",
                    ticket_dir=ticket, signals=ticket / "signals" / "implementer")
    work = tmp_path / "work"
    work.mkdir()

    ask(claude, env, work, "--settings", json.dumps(provider.settings(launch)))

    assert anthropic.main_loop(), "claude reached the stand-in"
    assert not offered_skill(anthropic), "a peer was offered the plugin's skill"
