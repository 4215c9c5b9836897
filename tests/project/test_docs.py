"""The operator docs (docs/walkthrough.md, configuration.md, protocol.md, troubleshooting.md)
checked against the code and run, so they cannot drift from it.

* Every config key the code's dataclasses know is in docs/configuration.md with the default an
  empty configuration really loads; every YAML example there loads.
* docs/protocol.md names every file `TicketDir` knows, every `State` field, every report field
  the parser reads, and every event kind the code writes with its fields (found with `ast` in
  handoff/, not copied from a list).
* Every line of a ```text block in docs/troubleshooting.md is a message the code can print.
* The ```console blocks (`$ ` lines) run in order in a sandbox of their own (HOME,
  HANDOFF_HOME, tmux socket, repository), each exiting 0 and printing the lines shown (`…`
  matches anything). A block after `<!-- doc-test: wait -->` is run again until its output
  shows (bounded); a fenced block after `<!-- doc-test: file PATH -->` is written to PATH. The
  walkthrough runs twice: with the real Claude Code against the stand-in model server, and
  with the built-in scripted agent in its place (the page says so).
* Every `handoff …` line of a ```sh block names a real command and real options.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import MISSING, asdict, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from handoff import config as config_mod
from handoff import verdicts
from handoff.protocol import intake, reports
from handoff.providers import REGISTRY
from handoff.providers.base import RoleSpec
from handoff.providers.command import MARKERS
from handoff.record.ticket import State, TicketDir
from tests.conftest import wait_until
from tests.paths import ROOT
from tests.realcli import stand_in_errors
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home

DOCS = ROOT / "docs"
SOURCE = ROOT / "handoff"
OPERATOR_DOCS = ("walkthrough.md", "configuration.md", "protocol.md", "troubleshooting.md")
#: how long a command shown in the docs may run, and a `wait` block may take to show its output
COMMAND_TIMEOUT = 120.0
WAIT_TIMEOUT = 120.0


# ---- reading the docs -------------------------------------------------------------------------

@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    #: the `<!-- doc-test: … -->` comment right above the fence ('' when none)
    marker: str
    line: int


FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->$")


def blocks(name: str) -> list[Block]:
    """The fenced blocks of a doc, in order, with the doc-test marker above each."""
    lines = (DOCS / name).read_text(encoding="utf-8").splitlines()
    found, i, last = [], 0, ""
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            if lines[i].strip():
                last = lines[i].strip()
            i += 1
            continue
        indent, lang, start = fence.group(1), fence.group(2), i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        marker = MARKER.match(last)
        found.append(Block(lang, "\n".join(body) + "\n", marker.group(1) if marker else "",
                           start + 1))
        i, last = i + 1, ""
    return found


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under a `## heading`, up to the next `## ` heading (not a line of a block)."""
    lines = text.splitlines()
    start = lines.index(f"## {heading}")
    fenced, end = False, len(lines)
    for i in range(start + 1, len(lines)):
        fenced ^= bool(FENCE.match(lines[i]))
        if not fenced and lines[i].startswith("## "):
            end = i
            break
    return "\n".join(lines[start:end])


def table_rows(text: str) -> dict[str, str]:
    """Table rows keyed by the code in their first cell (a cell `a`, `b` gives two keys)."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        for key in re.findall(r"`([^`]+)`", first):
            rows[key] = line
    return rows


# ---- configuration.md -------------------------------------------------------------------------

def config_keys() -> dict[str, Any]:
    """Every key the configuration knows, from the code's dataclasses, with the default an empty
    configuration loads (MISSING: the key has none, e.g. a share's path)."""
    loaded = config_mod.load(Path("/nonexistent-handoff-home"), None)
    keys: dict[str, Any] = {f.name: getattr(loaded, f.name) for f in fields(config_mod.Config)}
    role = loaded.roles["implementer"]
    assert loaded.roles["reviewer"] == role, "the roles' defaults differ: document both"
    for f in fields(RoleSpec):
        keys[f"roles.<role>.{f.name}"] = getattr(role, f.name)
    for name in MARKERS:
        keys[f"roles.<role>.markers.{name}"] = None
    for f in fields(config_mod.Share):
        keys[f"share[].{f.name}"] = f.default
    for f in fields(config_mod.Budget):
        keys[f"budget.{f.name}"] = f.default
    for f in fields(config_mod.Sandbox):
        keys[f"sandbox.{f.name}"] = f.default
    for f in fields(config_mod.Scanner):
        keys[f"scanners[].{f.name}"] = f.default
    for f in fields(config_mod.Host):
        if f.name != "name":  # the key it is under
            keys[f"hosts.<name>.{f.name}"] = f.default
    return keys


def plain(value: Any) -> Any:
    """A default as YAML would spell it: tuples as lists, dataclasses as mappings without their
    empty fields."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in asdict(value).items() if v not in ("", (), {}, None)}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def test_configuration_lists_every_key_with_its_real_default() -> None:
    rows = table_rows(doc("configuration.md"))
    problems = []
    for key, default in config_keys().items():
        row = rows.get(key)
        if row is None:
            problems.append(f"{key}: not in docs/configuration.md")
            continue
        cell = row.split("|")[3]
        if default is MISSING:
            if "required" not in cell:
                problems.append(f"{key}: has no default, the doc should say 'required': {cell}")
            continue
        if default is None and key.startswith("roles.<role>.markers."):
            if "none" not in cell:
                problems.append(f"{key}: has no default, the doc should say 'none': {cell}")
            continue
        shown = re.search(r"`([^`]*)`", cell)
        if shown is None:
            problems.append(f"{key}: no default shown: {cell}")
            continue
        said = yaml.safe_load(shown.group(1))
        if said != plain(default):
            problems.append(f"{key}: the doc says {said!r}, the code has {plain(default)!r}")
    assert not problems, "\n".join(problems)


def test_configuration_names_each_providers_modes_and_answerable_screens() -> None:
    rows = table_rows(section(doc("configuration.md"), "Roles: which CLI runs each peer"))
    for name, cls in REGISTRY.items():
        provider = cls()
        row = rows.get(name)
        assert row is not None, f"provider {name} is not in the providers table"
        cells = row.split("|")
        assert re.findall(r"`([^`]+)`", cells[3]) == list(provider.modes), (name, cells[3])
        answerable = [d.name for d in provider.rules.dialogs if d.keys]
        assert re.findall(r"`([^`]+)`", cells[4]) == answerable, (name, cells[4])
        for variable in cls.env_allow:
            assert f"`{variable}`" in cells[5], (name, variable)


def test_configuration_examples_load(tmp_path: Path) -> None:
    examples = [b for b in blocks("configuration.md") if b.lang == "yaml"]
    assert examples
    repo = tmp_path / "repo"
    repo.mkdir()
    for block in examples:
        (repo / config_mod.REPO_CONFIG).write_text(block.text, encoding="utf-8")
        config_mod.load(tmp_path / "home", repo)  # a bad example raises UsageError here


# ---- protocol.md ------------------------------------------------------------------------------

def ticket_files() -> set[str]:
    """Every path TicketDir knows, relative to the ticket directory, with the role as <role> and
    the round or number as N."""
    tdir = TicketDir(Path("/ticket"))
    args = {"role": ("implementer", "reviewer"), "round_": (1,), "number": (1,), "by": ("close",),
            "report": (tdir.report("implementer", 1), tdir.report("reviewer", 1))}
    found: list[Path | None] = []
    for name, member in vars(TicketDir).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            value = getattr(tdir, name)
            found += [value if isinstance(value, Path) else getattr(value, "path", None)]
        elif callable(member):
            params = list(member.__code__.co_varnames[1:member.__code__.co_argcount])
            if not params or not set(params) <= set(args):
                continue
            combos: list[dict[str, Any]] = [{}]
            for param in params:
                combos = [{**c, param: v} for c in combos for v in args[param]]
            found += [member(tdir, **c) for c in combos]
    names = set()
    for path in found:
        if isinstance(path, Path) and path != tdir.path:
            rel = str(path.relative_to(tdir.path))
            rel = re.sub(r"\b(implementer|reviewer)\b", "<role>", rel)
            rel = re.sub(r"\.(rejected|forged)-1\.md$", r".\1-K.md", rel)  # the Kth of a report
            names.add(re.sub(r"(?<=-)1(?=\.|$)", "N", rel))
    return names


def test_protocol_names_every_file_of_the_ticket_directory() -> None:
    text = doc("protocol.md")
    files = ticket_files() | {intake.SOCKET}
    assert {"state.json", "events.jsonl", "inbox/<role>/brief-N.md",
            "receipts/review-report-N.json"} <= files, files  # the derivation itself works
    missing = [f for f in sorted(files) if f"`{f}" not in text]
    assert not missing, f"docs/protocol.md does not name {missing}"


def test_protocol_names_every_state_field() -> None:
    rows = table_rows(section(doc("protocol.md"), "state.json"))
    missing = [f.name for f in fields(State) if f.name not in rows]
    assert not missing, f"state.json fields missing from docs/protocol.md: {missing}"


def expected_report_keys() -> set[str]:
    """The frontmatter keys reports.parse is told to check against the ticket (its `expect`)."""
    keys: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "parse" and isinstance(node.func.value, ast.Name) and \
                    node.func.value.id == "reports" and len(node.args) > 2 and \
                    isinstance(node.args[2], ast.Dict):
                keys |= {str(k.value) for k in node.args[2].keys if isinstance(k, ast.Constant)}
    return keys


def test_protocol_names_every_report_field() -> None:
    text = section(doc("protocol.md"), "Reports")
    rows = table_rows(text)
    # a reviewer's answers are kept by key: each questioned list is a field of its own
    frontmatter = {f.name for f in fields(reports.Report)} - {"role", "sections", "body",
                                                              "answers"}
    frontmatter |= {asked.key for asked in reports.QUESTIONED}
    expect = expected_report_keys()
    assert {"ticket", "round"} <= expect, expect
    finding = {f.name for f in fields(reports.Finding)}
    missing = [k for k in sorted(frontmatter | expect | finding) if k not in rows]
    missing += [f"'{v}'" for v in (*verdicts.STATUSES, *verdicts.VERDICTS) if f"`{v}`" not in text]
    missing += [f"## {s}" for s in reports.IMPL_SECTIONS if f"`## {s}`" not in text]
    plan_keys = {f.name for f in fields(reports_plan_class())} - {"text", "scripts"}
    plan_rows = table_rows(section(doc("protocol.md"), "The plan"))
    missing += [f"plan {k}" for k in sorted(plan_keys) if k not in plan_rows]
    assert not missing, f"report fields missing from docs/protocol.md: {missing}"


def reports_plan_class() -> type:
    from handoff.protocol.plan import Plan

    return Plan


#: the calls that write an event: EventLog.append (as `….events.append`), the orchestrator's
#: `self.event`, and the `record` callback handoff.loop.notify is given
EMITTERS = ("append", "event", "record")


def emitted_events() -> dict[str, set[str]]:
    """Every event kind written anywhere in handoff/, with the field names its calls pass."""
    kinds: dict[str, set[str]] = {}
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            first = node.args[0]
            if name not in EMITTERS or not isinstance(first, ast.Constant) or \
                    not isinstance(first.value, str):
                continue
            if name == "append" and not (isinstance(func, ast.Attribute) and
                                         isinstance(func.value, ast.Attribute) and
                                         func.value.attr == "events"):
                continue
            found = kinds.setdefault(first.value, set())
            for keyword in node.keywords:
                if keyword.arg is not None and keyword.arg not in ("round", "role"):
                    found.add(keyword.arg)
                elif keyword.arg is None and isinstance(keyword.value, ast.Dict):
                    found |= {str(k.value) for k in keyword.value.keys
                              if isinstance(k, ast.Constant)}
    return kinds


def test_protocol_names_every_event_kind_and_its_fields() -> None:
    kinds = emitted_events()
    assert {"phase", "gate", "verdict", "notify-failed", "created"} <= set(kinds), kinds
    rows = table_rows(section(doc("protocol.md"), "events.jsonl"))
    problems = []
    for kind, names in sorted(kinds.items()):
        row = rows.get(kind)
        if row is None:
            problems.append(f"event kind {kind!r} is not in docs/protocol.md")
            continue
        problems += [f"event {kind!r}: field {n!r} not named" for n in sorted(names)
                     if f"`{n}`" not in row]
    assert not problems, "\n".join(problems)


def test_protocol_names_every_phase_the_notify_command_hears_of() -> None:
    from handoff.loop import notify

    rows = table_rows(section(doc("protocol.md"), "The notify command's input"))
    missing = [str(phase) for phase in notify.TOLD if f"`{phase}`" not in rows["phase"]]
    missing += [f.name for f in fields(notify.Notice) if f.name not in rows]
    assert not missing, f"docs/protocol.md's notify input misses {missing}"


# ---- troubleshooting.md -----------------------------------------------------------------------

def message_patterns() -> list[re.Pattern[str]]:
    """Every string literal of handoff/ as a pattern: an f-string's replacement fields match
    anything. Only literals with 15 or more fixed characters: `f"{a}: {b}"` says nothing."""
    patterns = []
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts = [(node.value, True)]
            elif isinstance(node, ast.JoinedStr):
                parts = [(str(v.value), True) if isinstance(v, ast.Constant) else ("", False)
                         for v in node.values]
            else:
                continue
            if sum(len(text) for text, _ in parts) < 15:
                continue
            patterns.append(re.compile("".join(re.escape(text) if fixed else ".*?"
                                               for text, fixed in parts), re.S))
    return patterns


#: how handoff frames a message on screen: error and hint lines, doctor lines, gc lines, status
FRAMES = (
    re.compile(r"^handoff: error: "), re.compile(r"^\s*hint: "), re.compile(r"^\s*fix: "),
    re.compile(r"^\s*next: "), re.compile(r"^(note|warning): "),
    re.compile(r"^(removed|would remove|not removed|kept)\s+(session|worktree|folder|socket|"
               r"record|lock) \S+: "),
)
DOCTOR = re.compile(r"^(OK|WARN|FAIL)\s+(?:(?:implementer|reviewer): )?([^:]+): (.*)$")


def quoted_messages(line: str) -> tuple[str, list[str]]:
    """A shown line without the frame handoff prints it in: a doctor line's check name (a
    string of the code as it stands) and the messages the line is made of."""
    line = line.strip()
    doctor = DOCTOR.match(line)
    if doctor:
        return doctor.group(2), [doctor.group(3).replace("…", "x")]
    for frame in FRAMES:
        line = frame.sub("", line)
    return "", [line.replace("…", "x")]


def string_constants() -> set[str]:
    return {node.value for path in SOURCE.rglob("*.py")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_troubleshooting_quotes_only_messages_the_code_prints() -> None:
    patterns, constants = message_patterns(), string_constants()
    shown = [line for b in blocks("troubleshooting.md") if b.lang == "text"
             for line in b.text.splitlines() if line.strip()]
    assert len(shown) > 20, shown
    unknown = []
    for line in shown:
        check, messages = quoted_messages(line)
        if check and check not in constants:
            unknown.append(f"doctor check {check!r}")
        unknown += [m for m in messages if not any(p.fullmatch(m) for p in patterns)]
    assert not unknown, "messages in docs/troubleshooting.md the code never prints:\n" + \
        "\n".join(unknown)


# ---- commands shown in the docs ---------------------------------------------------------------

def sandbox_env() -> dict[str, str]:
    """The test's isolated environment (its HOME, HANDOFF_HOME, tmux socket), with a PATH that
    holds this handoff, tmux, git and python3, and no coding CLI a person may have installed."""
    folders = [Path(sys.executable).parent]
    for tool in ("tmux", "git", "python3"):
        found = shutil.which(tool)
        assert found, f"{tool} is needed to run the docs' commands"
        folders.append(Path(found).parent)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(dict.fromkeys([*map(str, folders), "/usr/bin", "/bin"]))
    env.pop("NO_COLOR", None)
    env.pop("FORCE_COLOR", None)
    return env


def shown_pattern(line: str) -> re.Pattern[str]:
    return re.compile(".*?".join(re.escape(part) for part in line.rstrip().split("…")))


@dataclass
class Session:
    """A person at a shell: the current folder moves with `cd`; every command must exit 0."""

    cwd: Path
    env: dict[str, str]
    #: what a file block's text becomes before it is written (name → transform)
    rewrite: dict[str, Any]

    def write(self, block: Block) -> None:
        name = block.marker.split(maxsplit=1)[1]
        text = block.text
        for suffix, transform in self.rewrite.items():
            if name.endswith(suffix):
                text = transform(text)
        path = (self.cwd / name).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def run(self, block: Block, where: str) -> None:
        for command, shown in commands(block):
            if command.startswith("cd "):
                self.cwd = (self.cwd / command[3:].strip()).resolve()
                continue
            patterns = [shown_pattern(line) for line in shown if line.strip()]
            last: list[str] = []

            def shows_its_lines(command: str = command,
                                patterns: list[re.Pattern[str]] = patterns,
                                last: list[str] = last) -> bool:
                done = subprocess.run(["bash", "-c", command], cwd=self.cwd, env=self.env,
                                      capture_output=True, text=True, timeout=COMMAND_TIMEOUT,
                                      stdin=subprocess.DEVNULL)
                output = done.stdout + done.stderr
                lines = [line.rstrip() for line in output.splitlines()]
                missing = [p.pattern for p in patterns
                           if not any(p.fullmatch(line) for line in lines)]
                last[:] = [f"exited {done.returncode}; lines not shown: {missing}\n"
                           f"output:\n{output}"]
                return done.returncode == 0 and not missing

            try:
                if block.marker == "wait":  # a person polling `handoff status`, bounded
                    wait_until(shows_its_lines, WAIT_TIMEOUT, f"`{command}` to show its lines", 0.2)
                elif not shows_its_lines():
                    raise AssertionError("once")
            except AssertionError:
                raise AssertionError(f"{where} line {block.line}: `{command}` {last[0]}") from None


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """A console block's `$ ` commands, each with the output lines shown under it."""
    found: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            found.append((line[2:].strip(), []))
        elif found:
            found[-1][1].append(line)
    return found


def run_doc(name: str, session: Session) -> int:
    ran = 0
    for block in blocks(name):
        if block.marker.startswith("file "):
            session.write(block)
        elif block.lang == "console":
            session.run(block, f"docs/{name}")
            ran += len(commands(block))
    return ran


#: what the walkthrough's Claude Code does, as the scripted agent's steps: round 1 asks a
#: question, round 2 (after the answer) fixes add, round 3 (the extra round) fixes mul
SCRIPTED_STEPS = """
```handoff-script
round: 1
status: blocked
question: Should add() accept floats too?
```

```handoff-script
round: 2
edits: [{file: calc.py, replace: "return a - b", with: "return a + b"}]
```

```handoff-script
round: 3
edits: [{file: calc.py, replace: "def mul(a, b):\\n    return a + b",
         with: "def mul(a, b):\\n    return a * b"}]
```
"""


def scripted_roles(text: str) -> str:
    """The walkthrough's .handoff.yaml with the scripted agent in place of Claude Code (its
    Claude-only settings, such as the screens to answer, dropped)."""
    data = yaml.safe_load(text)
    for role in data["roles"].values():
        assert role["provider"] == "claude", role
        role.clear()
        role["provider"] = "scripted"
    return yaml.safe_dump(data)


def test_walkthrough_runs_from_install_to_a_merged_ticket(tmp_path: Path,
                                                          handoff_home: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    session = Session(work, sandbox_env(), {".handoff.yaml": scripted_roles,
                                            "plan.md": lambda text: text + SCRIPTED_STEPS})
    ran = run_doc("walkthrough.md", session)
    assert ran >= 15, ran
    repo = work / "calc"
    assert "return a + b" in (repo / "calc.py").read_text() and \
        "return a * b" in (repo / "calc.py").read_text()
    assert not (repo / ".worktrees" / "CALC-1").exists() or \
        not any((repo / ".worktrees" / "CALC-1").iterdir())


def test_walkthrough_runs_with_the_real_claude_code(
        tmp_path: Path, handoff_home: Path, isolated: dict[str, str], claude: Path,
        anthropic: AnthropicStandIn) -> None:
    """The page as written, .handoff.yaml and all: the pinned Claude Code binary is the one
    `claude` on PATH, set up as the page's install step leaves it (first run done; the folder
    not trusted: handoff answers that screen, as the page's `answer: [trust]` allows), and the
    stand-in model server acts out the same steps as the scripted agent."""
    claude_home(Path(isolated["HOME"]), [])
    own_bin = tmp_path / "bin"
    own_bin.mkdir()
    (own_bin / "claude").symlink_to(claude)
    env = sandbox_env()
    env["PATH"] = f"{own_bin}{os.pathsep}{env['PATH']}"
    work = tmp_path / "work"
    work.mkdir()
    session = Session(work, env, {"plan.md": lambda text: text + SCRIPTED_STEPS})
    try:
        run_doc("walkthrough.md", session)
    except AssertionError as exc:
        raise AssertionError(f"{exc}{stand_in_errors(anthropic)}") from None
    repo = work / "calc"
    assert "return a * b" in (repo / "calc.py").read_text()
    assert "Read and follow" in " ".join(anthropic.turn_prompts())
    kinds = [json.loads(line) for path in handoff_home.glob("calc-*/CALC-1/events.jsonl")
             for line in path.read_text().splitlines()]
    launched = [e for e in kinds if e["kind"] == "launch"]
    assert launched and all(e["provider"] == "claude" for e in launched), launched
    answered = [e for e in kinds if e["kind"] == "dialog"]
    assert any(e["state"] == "dialog (trust)" for e in answered), answered


def test_troubleshooting_commands_run(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True, timeout=30)
    ran = run_doc("troubleshooting.md", Session(work, sandbox_env(), {}))
    assert ran >= 1


def subcommand_help() -> dict[str, str]:
    from typer.main import get_command

    from handoff.cli.app import app

    group = get_command(app)
    found = {}
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        options = [opt for param in command.params for opt in (*param.opts, *param.secondary_opts)]
        found[name] = " ".join(options)
    return found


@pytest.mark.parametrize("name", OPERATOR_DOCS)
def test_handoff_lines_shown_but_not_run_name_real_commands_and_options(name: str) -> None:
    known = subcommand_help()
    lines = [line.split("#", 1)[0].strip() for b in blocks(name) if b.lang == "sh"
             for line in b.text.splitlines()]
    lines += [command for b in blocks(name) if b.lang == "console" for command, _ in commands(b)]
    problems = []
    for line in lines:
        if not line.startswith("handoff "):
            continue
        words = shlex.split(line)[1:]
        if words[0].startswith("-"):
            continue  # handoff --version: the app's own options, run by the walkthrough
        if words[0] not in known:
            problems.append(f"{line}: no command {words[0]!r}")
            continue
        options = known[words[0]].split()
        problems += [f"{line}: {words[0]} has no option {w}" for w in words[1:]
                     if w.startswith("--") and w not in options]
    assert not problems, "\n".join(problems)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    lines, fenced, found = text.splitlines(), False, set()
    for line in lines:
        fenced ^= bool(FENCE.match(line))
        heading = re.match(r"^#{1,6} (.+)$", line)
        if heading and not fenced:
            found.add(slug(heading.group(1)))
    return found


@pytest.mark.parametrize("name", OPERATOR_DOCS)
def test_links_lead_somewhere(name: str) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc(name)):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        file, _, anchor = target.partition("#")
        path = (DOCS / file).resolve() if file else DOCS / name
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor} in {path.name}")
    assert not broken, "\n".join(broken)


def brief_fields() -> set[str]:
    """The frontmatter keys of a brief: handoff/protocol/briefs.py's BriefFields, the keys every
    brief has and those each kind's round adds (RoundFields)."""
    from handoff.protocol.briefs import BriefFields

    return set(BriefFields.__annotations__)


def test_protocol_names_every_brief_field() -> None:
    keys = brief_fields()
    assert {"ticket", "submit", "commit", "findings"} <= keys, keys
    text = section(doc("protocol.md"), "Briefs")
    missing = [k for k in sorted(keys) if f"`{k}`" not in text]
    assert not missing, f"brief fields missing from docs/protocol.md: {missing}"


def test_every_event_kind_written_is_in_the_vocabulary_and_every_one_of_it_is_written() -> None:
    """EventKind (handoff/record/events.py) is the one list of kinds: mypy holds every call to
    it, and this holds it to what the code writes."""
    from typing import get_args

    from handoff.record.events import EventKind

    assert set(emitted_events()) == set(get_args(EventKind))
