"""Whole tickets with the real opencode as peers, against the stand-in Anthropic server.

The real `opencode` (pinned 1.18.33, from the npm registry, cached in ~/.cache/handoff-tests)
runs in handoff's tmux panes with `-m anthropic/claude-sonnet-4-6` and ANTHROPIC_BASE_URL at
the stand-in, which speaks opencode's own tool dialect (read/edit/write/bash with filePath,
oldString, newString, workdir: tests/standins/anthropic.py). handoff's opencode plugin
(hooks/opencode-signal.js), loaded through OPENCODE_CONFIG_CONTENT, tells the orchestrator
when a prompt arrived and a turn ended.

Offline: the models list is not fetched (OPENCODE_DISABLE_MODELS_FETCH=1, the bundled one
names the model), and the private HOME holds what a used opencode leaves in ~/.config/opencode
(its own npm install of @opencode-ai/plugin, recorded in package.json and package-lock.json):
without it opencode installs that package from the registry on every start, and while any
external plugin is configured it waits for that install before the first prompt (measured
offline: ~70 s of retries). The test checks that nothing was installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git
from tests.e2e.test_setups import BLIND
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    FIX_MUL,
    FIX_NEG,
    events,
    handoff,
    plan_text,
    processes_of,
    spawn,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors
from tests.standins import install
from tests.standins.anthropic import AnthropicStandIn, claude_code_call, dialect_of, opencode_call
from tests.standins.brain import Edit, Read, Shell, Write

MODEL = "anthropic/claude-sonnet-4-6"
#: what the test's environment sets for the peers, each passed by the role's `env:` list
OFFLINE = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}
#: a plugin of the person's own: it notes each folder opencode loaded it for (in opencode's
#: data folder, the role's own, which the sandbox lets opencode write)
PERSON_PLUGIN = """\
import { appendFileSync, existsSync } from "node:fs"
export default async ({ directory }) => {
  const data = process.env.XDG_DATA_HOME || `${process.env.HOME}/.local/share`
  const config = process.env.XDG_CONFIG_HOME || `${process.env.HOME}/.config`
  const seen = existsSync(`${config}/person-tool/settings`) ? "sees-person-tool" : "blind"
  appendFileSync(`${data}/opencode/person-plugin.log`, `${directory} ${seen}\\n`)
  return {}
}
"""


@pytest.fixture
def opencode(isolated: dict[str, str], anthropic: AnthropicStandIn,
             monkeypatch: pytest.MonkeyPatch) -> Path:
    """The pinned opencode pointed at the stand-in; its HOME is the test's private one."""
    path = install.binary("opencode")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "standin")
    # the AI SDK appends /messages to the base URL (Claude Code appends /v1/messages)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"{anthropic.base_url}/v1")
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)
    opencode_home(Path(isolated["HOME"]))
    return path


def opencode_home(home: Path) -> Path:
    """~/.config/opencode as a person's machine has it after opencode ran there once (online):
    their opencode.json with a plugin of their own, and opencode's own install of its plugin
    API, which it would otherwise redo from the registry at every start. Returns the person's
    opencode.json."""
    folder = home / ".config" / "opencode"
    (folder / "node_modules").mkdir(parents=True)
    # another tool's settings beside opencode's: what a peer's other tools read
    (home / ".config" / "person-tool").mkdir()
    (home / ".config" / "person-tool" / "settings").write_text("mine\n", encoding="utf-8")
    mine = home / "person-plugin.js"
    mine.write_text(PERSON_PLUGIN, encoding="utf-8")
    person = {"$schema": "https://opencode.ai/config.json", "username": "person",
              "share": "disabled", "plugin": [mine.as_uri()]}
    wanted = {"@opencode-ai/plugin": install.EXTRA["opencode"][1]}
    (folder / "package.json").write_text(json.dumps({"dependencies": wanted}), encoding="utf-8")
    (folder / "package-lock.json").write_text(json.dumps(
        {"lockfileVersion": 3, "packages": {"": {"dependencies": wanted}}}), encoding="utf-8")
    (folder / "opencode.json").write_text(json.dumps(person, indent=2) + "\n", encoding="utf-8")
    return folder / "opencode.json"


def opencode_role(binary: Path, **more: object) -> dict[str, object]:
    return role("opencode", binary, model=MODEL, env=sorted(OFFLINE), **more)


def judged(log: list[dict[str, Any]], who: str) -> list[dict[str, Any]]:
    return [e for e in log if e["kind"] == "peer" and e["role"] == who]


def signal_files(folder: Path, who: str) -> dict[str, list[dict[str, Any]]]:
    """The signal files the role's plugin left, by event."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((folder / "signals" / who).glob("*.json")):
        found.setdefault(path.name.split(".", 1)[0], []).append(json.loads(path.read_text()))
    return found


def test_opencode_as_both_peers_fails_then_passes_and_leaves_the_persons_config_alone(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        opencode: Path, anthropic: AnthropicStandIn) -> None:
    person = Path(isolated["HOME"]) / ".config" / "opencode" / "opencode.json"
    before = person.read_bytes()
    configure(handoff_home, {"implementer": opencode_role(opencode),
                             "reviewer": opencode_role(opencode)})
    plan = plan_text({1: {"edits": [FIX_ADD]}, 2: {"edits": [FIX_MUL, FIX_NEG]}},
                     test=ADD_ONLY, review=[ALL_TESTS])
    done = handoff("start", "OC-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    final = state(handoff_home, "OC-1")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}

    folder = ticket_path(handoff_home, "OC-1")
    prompts = anthropic.turn_prompts()
    for who, n in (("implementer", 1), ("implementer", 2), ("reviewer", 1), ("reviewer", 2)):
        brief = folder / "inbox" / who / f"brief-{n}.md"
        assert prompts.count(f"Read and follow {brief}") == 1, (who, n, prompts)
    # the work was done by opencode's own tools, called by their own names
    called = {str(e.sent["name"]) for e in anthropic.main_loop()
              if e.sent is not None and e.sent.get("type") == "tool_use"}
    assert called == {"read", "edit", "write", "bash"}, called
    assert all(e.body.get("model") == MODEL.split("/", 1)[1] for e in anthropic.main_loop())
    subjects = git(repo, "log", "--format=%s", "handoff/OC-1").splitlines()
    assert subjects[:2] == ["OC-1: round 2", "OC-1: round 1"]
    assert "return a * b" in git(repo, "show", "handoff/OC-1:calc.py")
    review = (folder / "review-report-1.md").read_text()
    assert "verdict: fail" in review and "test_mul" in review

    log = events(handoff_home, "OC-1")
    assert [e["by"] for e in log if e["kind"] == "brief" and e["role"] == "implementer"] == ["paste"], \
        "round 2 reached the live implementer once, by paste"
    assert [e for e in log if e["kind"] in ("nudge", "escalate", "delivery-failed")] == []
    for who in ("implementer", "reviewer"):
        assert any(e["state"] == "working" and e["evidence"].startswith("hook ")
                   for e in judged(log, who)), (who, judged(log, who))
        signals = signal_files(folder, who)
        assert {"prompt", "stop"} <= set(signals), (who, signals)
        assert any(s["prompt"].startswith("Read and follow ") for s in signals["prompt"])
        assert all(s["type"] == "session.idle" for s in signals["stop"])
        assert "permission" not in signals, "--auto answered every permission by itself"

    # the person's configuration reached both peers (handoff's was merged over it, not in its
    # place), each in its own folders, and is as it was; opencode's own plugin install was not
    # redone (no registry); no worktree got an .opencode/ or anything else uncommitted
    # (and its XDG folders show the person's other tools' settings, read-only)
    for who in ("implementer", "reviewer"):
        loaded = folder / "cli" / who / "opencode" / "data" / "opencode" / "person-plugin.log"
        lines = [line.rsplit(" ", 1) for line in loaded.read_text().splitlines()]
        assert {(Path(where).name, seen) for where, seen in lines} == {(who, "sees-person-tool")}
    assert not (Path(isolated["HOME"]) / ".local" / "share" / "opencode").exists()
    assert person.read_bytes() == before
    assert list((person.parent / "node_modules").iterdir()) == []
    worktrees = [Path(line.split(" ", 1)[1]) for line in
                 git(repo, "worktree", "list", "--porcelain").splitlines()
                 if line.startswith("worktree ")]
    assert worktrees[0] == repo and len(worktrees) == 4, worktrees  # both roles' and the gate's
    for tree in worktrees:
        assert not (tree / ".opencode").exists(), tree
        assert not (tree / "opencode.json").exists(), tree
        # in the roles' worktrees not even an ignored file (the checkout holds .worktrees/)
        shown = ["status", "--porcelain"] + (["--ignored"] if tree != repo else [])
        assert git(tree, *shown) == "", tree

    closed = handoff("close", "OC-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr
    assert processes_of(handoff_home, str(opencode.parent.parent), "opencode") == []


def test_an_opencode_ticket_passes_on_its_plugins_signals_alone_when_no_screen_rule_matches(
        repo: Path, tmp_path: Path, handoff_home: Path, opencode: Path,
        anthropic: AnthropicStandIn) -> None:
    """No screen rule reads anything (BLIND): the prompts, and the end of a turn that filed no
    report, are known from the plugin alone; the nudge that follows is taken and the ticket
    passes."""
    configure(handoff_home, {"implementer": opencode_role(opencode, markers=BLIND),
                             "reviewer": opencode_role(opencode, markers=BLIND)}, turn_grace=1)
    plan = plan_text({1: {"edits": [FIX_ADD], "cli": {"silent": "once"}},
                      2: {"edits": [FIX_MUL, FIX_NEG]}}, test=ADD_ONLY, review=[ALL_TESTS])
    done = handoff("start", "OC-2", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    final = state(handoff_home, "OC-2")
    assert final["phase"] == "passed" and final["verdicts"] == {"1": "fail", "2": "pass"}
    log = events(handoff_home, "OC-2")
    for who in ("implementer", "reviewer"):
        mine = judged(log, who)
        assert any(e["state"] == "working" and e["evidence"].startswith("hook ") for e in mine), \
            (who, mine)
        # no judgement of this peer came from its screen: the rules matched nothing
        assert all(e["evidence"].startswith("hook ") for e in mine
                   if e["state"] in ("working", "turn-ended")), (who, mine)
    ended = [e for e in judged(log, "implementer") if e["state"] == "turn-ended"]
    assert ended and ended[0]["evidence"].startswith("hook session."), ended
    nudges = [e for e in log if e["kind"] == "nudge"]
    assert len(nudges) == 1 and nudges[0]["role"] == "implementer" and nudges[0]["delivered"]
    assert nudges[0]["evidence"].startswith("hook session."), "the plugin, not the screen, said so"
    prompts = anthropic.turn_prompts()
    assert sum("You ended your turn without filing your report" in p for p in prompts) == 1
    assert [e for e in log if e["kind"] in ("escalate", "delivery-failed")] == []
    assert handoff("close", "OC-2", cwd=repo).returncode == 0


def test_opencode_asking_a_permission_in_its_default_mode_is_handed_to_a_person(
        repo: Path, tmp_path: Path, handoff_home: Path, opencode: Path,
        anthropic: AnthropicStandIn) -> None:
    """Without --auto, reading the brief (outside the worktree) makes opencode ask: no screen
    rule knows its permission box, the plugin says it, and a person is asked."""
    configure(handoff_home, {"implementer": opencode_role(opencode, permission_mode="default"),
                             "reviewer": opencode_role(opencode)})
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    runner = spawn("start", "OC-3", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "orchestrator.log")
    try:
        waiting = wait_phase(handoff_home, "OC-3", "needs-human", timeout=120)
    finally:
        runner.kill()
        runner.wait(timeout=30)
    assert "waiting for permission" in waiting["reason"], waiting["reason"]
    escalated = [e for e in events(handoff_home, "OC-3") if e["kind"] == "escalate"]
    assert len(escalated) == 1 and escalated[0]["role"] == "implementer", escalated
    assert escalated[0]["evidence"].startswith("hook ") and \
        "external_directory" in escalated[0]["evidence"], escalated[0]
    folder = ticket_path(handoff_home, "OC-3")
    [asked] = signal_files(folder, "implementer")["permission"]
    assert (asked["type"], asked["tool_name"]) == ("permission.asked", "external_directory")
    assert asked["properties"]["metadata"]["filepath"] == \
        str(folder / "inbox" / "implementer" / "brief-1.md")
    assert not (folder / "impl-report-1.md").exists()
    assert handoff("close", "OC-3", "--force", cwd=repo).returncode == 0


#: opencode 1.18.33's coding tools as its requests declare them (trimmed to their parameters)
OPENCODE_TOOLS: list[dict[str, Any]] = [
    {"name": "bash", "input_schema": {"type": "object", "properties": {
        "command": {"type": "string"}, "timeout": {"type": "integer"},
        "workdir": {"type": "string"}}, "required": ["command"]}},
    {"name": "edit", "input_schema": {"type": "object", "properties": {
        "filePath": {"type": "string"}, "oldString": {"type": "string"},
        "newString": {"type": "string"}, "replaceAll": {"type": "boolean"}},
        "required": ["filePath", "oldString", "newString"]}},
    {"name": "read", "input_schema": {"type": "object", "properties": {
        "filePath": {"type": "string"}, "offset": {"type": "integer"},
        "limit": {"type": "integer"}}, "required": ["filePath"]}},
    {"name": "write", "input_schema": {"type": "object", "properties": {
        "content": {"type": "string"}, "filePath": {"type": "string"}},
        "required": ["content", "filePath"]}},
]


def test_the_stand_in_speaks_opencodes_dialect_to_opencode_and_claude_codes_to_the_rest() -> None:
    assert dialect_of({"tools": OPENCODE_TOOLS}) is opencode_call
    claude = [{"name": "Read", "input_schema": {"type": "object", "properties": {
        "file_path": {"type": "string"}}}}, {"name": "Bash", "input_schema": {}}]
    assert dialect_of({"tools": claude}) is claude_code_call
    assert dialect_of({"tools": [{"name": "read", "input_schema": {"type": "object"}}]}) is \
        claude_code_call, "a schema naming no parameters is spoken to as Claude Code"
    assert opencode_call(Read("/w/a.py")) == ("read", {"filePath": "/w/a.py"})
    assert opencode_call(Edit("/w/a.py", "x", "y")) == \
        ("edit", {"filePath": "/w/a.py", "oldString": "x", "newString": "y"})
    assert opencode_call(Write("/w/r.md", lambda: "text")) == \
        ("write", {"filePath": "/w/r.md", "content": "text"})
    assert opencode_call(Shell("git status", "/w")) == \
        ("bash", {"command": "git status", "workdir": "/w"})
    for name, args in (opencode_call(a) for a in (Read("/a"), Edit("/a", "x", "y"),
                                                   Write("/a", lambda: ""), Shell("ls", "/"))):
        declared = next(t for t in OPENCODE_TOOLS if t["name"] == name)["input_schema"]
        assert set(args) <= set(declared["properties"]), (name, args)
    assert claude_code_call(Shell("ls", "/w")) == \
        ("Bash", {"command": "cd '/w' && ls", "description": "Run a step of the handoff brief"})
