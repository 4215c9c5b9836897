"""The conventions of the `handoff` command (docs/cli.md): --version, shell completion,
NO_COLOR, the --json shapes and the exit codes, checked against the real command in
subprocesses, real bash and a real tmux pane. The JSON shapes and the exit codes are read from
docs/cli.md itself, so the page cannot drift from what the command does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import typer

from handoff import errors
from handoff.cli.app import app
from tests.conftest import wait_until
from tests.harness import (
    ADD_ONLY,
    ALL_TESTS,
    FIX_ADD,
    handoff,
    plan_text,
    spawn,
    state,
    wait_event,
    wait_phase,
    write_plan,
)
from tests.paths import ROOT

DOCS = ROOT / "docs" / "cli.md"
ESC = "\x1b["
#: the console script pip installed: what a user runs, and what completion scripts call
SCRIPT = Path(sys.executable).parent / "handoff"
BASH = shutil.which("bash") or "bash"


def installed() -> str:
    assert SCRIPT.is_file(), f"handoff is not installed in {SCRIPT.parent} (pip install -e .)"
    return str(SCRIPT)


def on_path() -> dict[str, str]:
    installed()
    return dict(os.environ, PATH=f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}",
                SHELL=BASH)


def bash(script: str) -> subprocess.CompletedProcess[str]:
    """script in a real bash whose PATH finds the installed handoff. A trailing `; true`
    keeps bash from exec-ing the last command: handoff's parent stays the shell, which is
    what its shell detection reads."""
    return subprocess.run([BASH, "--norc", "--noprofile", "-c", script], capture_output=True,
                          text=True, timeout=60, env=on_path())


# ---- --version ----------------------------------------------------------------------------

def test_version_prints_the_distribution_version_and_loads_nothing_heavy() -> None:
    expected = f"handoff {version('tmux-handoff')}\n"
    for flag in ("--version", "-V"):
        done = handoff(flag)
        assert (done.returncode, done.stdout, done.stderr) == (0, expected, ""), flag
    timed = subprocess.run([sys.executable, "-X", "importtime", "-m", "handoff", "--version"],
                           capture_output=True, text=True, timeout=60)
    assert timed.returncode == 0 and timed.stdout == expected
    loaded = {line.rsplit("|", 1)[-1].strip() for line in timed.stderr.splitlines()
              if line.startswith("import time:")}
    assert "handoff.cli.app" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in ("libtmux", "git", "yaml")
             or m in ("handoff.config", "handoff.operations.doctor", "handoff.operations.opening",
                      "handoff.operations.create", "handoff.operations.resume",
                      "handoff.operations.closing", "handoff.operations.tending",
                      "handoff.loop.orchestrator", "handoff.machinery.tmux",
                      "handoff.providers")}
    assert heavy == set(), "--version must not load the machinery behind the commands"


# ---- shell completion -------------------------------------------------------------------

def test_show_completion_prints_a_bash_script_that_completes_from_the_real_command() -> None:
    shown = bash("handoff --show-completion; true")
    assert shown.returncode == 0, shown.stderr
    assert "_HANDOFF_COMPLETE=complete_bash" in shown.stdout
    assert "complete -o default -F _handoff_completion handoff" in shown.stdout
    # sourced into bash, the function asks the real handoff, as a TAB after `handoff sta` does
    completed = bash('source <(handoff --show-completion); COMP_WORDS=(handoff sta); '
                     'COMP_CWORD=1; _handoff_completion handoff sta handoff; '
                     'printf "%s\\n" "${COMPREPLY[@]}"')
    assert completed.returncode == 0, completed.stderr
    assert sorted(completed.stdout.split()) == ["start", "status"]
    options = bash('source <(handoff --show-completion); COMP_WORDS=(handoff log --); '
                   'COMP_CWORD=2; _handoff_completion handoff -- log; '
                   'printf "%s\\n" "${COMPREPLY[@]}"')
    assert {"--json", "--follow", "--repo"} <= set(options.stdout.split())


def completions(*words: str) -> list[str]:
    """What TAB offers after `handoff WORDS...` (the last word being typed), in real bash."""
    quoted = " ".join(f"'{w}'" for w in ("handoff", *words))
    done = bash(f'source <(handoff --show-completion); COMP_WORDS=({quoted}); '
                f'COMP_CWORD={len(words)}; _handoff_completion handoff "{words[-1]}" handoff; '
                'printf "%s\\n" "${COMPREPLY[@]}"')
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.split())


def test_ticket_ids_and_roles_complete(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    for ticket in ("C-1", "C-2", "D-1"):  # left awaiting approval: folders, nothing running
        assert handoff("start", ticket, "--plan", str(plan), cwd=repo).returncode == 1
    assert completions("status", "C-") == ["C-1", "C-2"]
    assert completions("close", "") == ["C-1", "C-2", "D-1"]
    assert completions("recycle", "D-1", "rev") == ["reviewer"]
    assert completions("attach", "D-1", "--role", "o") == ["orchestrator"]


def test_install_completion_sets_up_the_users_bash(isolated: dict[str, str]) -> None:
    home = Path(isolated["HOME"])
    done = bash("handoff --install-completion; true")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bash completion installed" in done.stdout
    script = home / ".bash_completions" / "handoff.sh"
    assert "_handoff_completion" in script.read_text()
    registered = bash("source ~/.bashrc; complete -p handoff")
    assert registered.stdout.strip() == "complete -o default -F _handoff_completion handoff"


# ---- NO_COLOR ------------------------------------------------------------------------------

#: help, the help of a command, a usage error (typer's panel) and handoff's own error
SHOWN = (("--help",), ("start", "--help"), ("answer",), ("status", "NO-SUCH-TICKET"))


def forced_colour(no_color: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env.update(FORCE_COLOR="1", TERM="xterm-256color")
    if no_color is not None:
        env["NO_COLOR"] = no_color
    return env


def test_no_escape_codes_even_with_colour_forced(tmp_path: Path) -> None:
    """The command line prints plain text (click's help, not rich's: see docs/performance.md),
    so NO_COLOR holds whatever the environment forces; `handoff watch` honours NO_COLOR itself
    (tests/e2e/test_board.py)."""
    def run(no_color: str | None) -> dict[tuple[str, ...], subprocess.CompletedProcess[str]]:
        return {args: handoff(*args, cwd=tmp_path, env=forced_colour(no_color))
                for args in SHOWN}

    for runs in (run(None), run(""), run("1")):
        for args, done in runs.items():
            assert ESC not in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert "Commands" in runs[("--help",)].stdout
        assert "Missing argument" in runs[("answer",)].stderr
        assert runs[("status", "NO-SUCH-TICKET")].returncode == errors.EXIT_NOT_FOUND
        assert "handoff: error:" in runs[("status", "NO-SUCH-TICKET")].stderr


def pane_screen(socket: str, conf: Path, name: str, *command: str) -> str:
    """What command leaves on the screen of a real tmux pane (a terminal, so colour is
    detected, not forced), with its escape codes (capture-pane -e)."""
    subprocess.run(["tmux", "-f", str(conf), "-L", socket, "new-session", "-d", "-s", name,
                    "-x", "100", "-y", "60", *command], check=True, timeout=15)

    def capture(*flags: str) -> str:
        return subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", *flags, "-t",
                               f"={name}:"], capture_output=True, text=True, timeout=15,
                              check=True).stdout

    def dead() -> bool:
        shown = subprocess.run(["tmux", "-L", socket, "display-message", "-p", "-t",
                                f"={name}:", "#{pane_dead}"], capture_output=True, text=True,
                               timeout=15)
        return shown.stdout.strip() == "1"

    # the pane dead (its terminal closed: all output read) and the help's last words drawn;
    # tmux's own "Pane is dead" line waits for the exit status, which may come late
    try:
        wait_until(lambda: dead() and "(docs/cli.md)" in capture(), 30,
                   f"{' '.join(command)} to finish drawing in its pane")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the screen:\n{capture()}") from None
    return "\n".join(line for line in capture("-e").splitlines() if "Pane is dead" not in line)


def test_no_escape_codes_in_a_real_terminal(socket: str, tmp_path: Path) -> None:
    conf = tmp_path / "keep.tmux.conf"
    conf.write_text("set -g remain-on-exit on\n", encoding="utf-8")  # the screen outlives it
    script = installed()
    shown = pane_screen(socket, conf, "shown", "env", "-u", "NO_COLOR", "-u", "FORCE_COLOR",
                        script, "--help")
    assert "Commands" in shown and "Options" in shown and ESC not in shown, shown


# ---- --json --------------------------------------------------------------------------------

TYPES: dict[str, type] = {"string": str, "integer": int, "boolean": bool, "null": type(None),
                          "list of strings": list, "object": dict, "number": float}


def documented_keys(command: str) -> dict[str, tuple[type, ...]]:
    """The key table under `### `handoff COMMAND ...` in docs/cli.md: key → allowed types."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(f"### `handoff {command}")
    end = text.find("\n### ", start + 1)
    section = text[start:end if end != -1 else None]
    keys: dict[str, tuple[type, ...]] = {}
    for cells in re.findall(r"^\| (`[^|]+`) \| ([^|]+) \|", section, re.M):
        names, kinds = cells
        allowed = tuple(TYPES[k.strip()] for k in kinds.split(" or "))
        for name in re.findall(r"`([^`]+)`", names):
            keys[name] = allowed
    assert keys, f"no key table for {command} in {DOCS}"
    return keys


def assert_shape(obj: dict[str, Any], keys: dict[str, tuple[type, ...]], exact: bool) -> None:
    if exact:
        assert set(obj) == set(keys), f"undocumented or missing keys: {set(obj) ^ set(keys)}"
    for key, allowed in keys.items():
        assert key in obj, key
        assert type(obj[key]) in allowed, (key, obj[key], allowed)  # bool is no integer here


def run_json(*args: str, cwd: Path) -> Any:
    done = handoff(*args, "--json", cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def test_json_of_each_state_reading_command_is_the_documented_shape(
        repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", "J-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert done.returncode == errors.EXIT_OK, done.stdout + done.stderr

    rows = run_json("status", cwd=repo)
    assert isinstance(rows, list) and len(rows) == 1
    assert_shape(rows[0], documented_keys("status"), exact=True)
    assert (rows[0]["ticket"], rows[0]["phase"], rows[0]["round"], rows[0]["run"]) == \
        ("J-1", "passed", 1, "finished")
    assert run_json("status", "J-1", cwd=repo) == rows

    log = run_json("log", "J-1", cwd=repo)
    assert isinstance(log, list) and log
    for event in log:
        assert_shape(event, documented_keys("log"), exact=False)
    assert ("reviewing", "passed") in [(e["from"], e["to"]) for e in log if e["kind"] == "phase"]

    providers = run_json("providers", cwd=repo)
    for row in providers:
        assert_shape(row, documented_keys("providers"), exact=True)
    assert sorted(role for row in providers for role in row["roles"]) == \
        ["implementer", "reviewer"]

    checks = handoff("doctor", "--json", cwd=repo)
    found = json.loads(checks.stdout)
    for check in found:
        assert_shape(check, documented_keys("doctor"), exact=True)
        assert check["level"] in ("OK", "WARN", "FAIL")
    assert {"tmux", "git", "state dir", "config"} <= {c["what"] for c in found}
    failing = any(c["level"] == "FAIL" for c in found)
    assert checks.returncode == (errors.EXIT_FAILED if failing else errors.EXIT_OK)


def test_doctor_json_outside_a_repo_keeps_stdout_one_document(tmp_path: Path) -> None:
    done = handoff("doctor", "--json", cwd=tmp_path)
    assert "repo checks skipped" in done.stderr
    assert isinstance(json.loads(done.stdout), list)


def test_log_json_follow_prints_json_lines_as_events_come(repo: Path, tmp_path: Path) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "J-2", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo, timeout=120).returncode == 0
    before = len(run_json("log", "J-2", cwd=repo))
    out = tmp_path / "follow.jsonl"
    follower = spawn("log", "J-2", "--json", "--follow", cwd=repo, log=out)
    try:
        def lines() -> list[dict[str, Any]]:
            return [json.loads(line) for line in out.read_text().splitlines()]

        wait_until(lambda: len(lines()) >= before, 30, "the events so far, one per line")
        assert handoff("close", "J-2", cwd=repo).returncode == 0
        wait_until(lambda: any(e["kind"] == "phase" and e["to"] == "closed" for e in lines()),
                   30, "the close event to follow")
    finally:
        follower.kill()
        follower.wait()
    assert all(isinstance(event, dict) for event in lines())


# ---- exit codes ----------------------------------------------------------------------------

def test_exit_codes_are_distinct_and_documented() -> None:
    codes = {name: value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert len(set(codes.values())) == len(codes), codes
    raised = {cls.exit_code for cls in vars(errors).values()
              if isinstance(cls, type) and issubclass(cls, errors.HandoffError)}
    assert raised <= set(codes.values())
    documented = {int(c) for c in re.findall(r"^\| (\d+) \|", DOCS.read_text(), re.M)}
    assert documented == set(codes.values())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### Exit codes"):]
    section = section[:section.index("\n## ")]
    assert {int(c) for c in re.findall(r"^\| (\d+) \|", section, re.M)} == set(codes.values())
    assert "docs/cli.md" in section
    shown = handoff("--help", env=dict(os.environ, NO_COLOR="1")).stdout
    assert "10 needs-human" in shown and "11 escalated" in shown


def test_every_command_and_option_is_in_the_reference() -> None:
    text = DOCS.read_text(encoding="utf-8")
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    for name, command in group.commands.items():
        rows = [line for line in text.splitlines() if line.startswith(f"| `{name}")]
        assert len(rows) == 1, f"{name} is not in the commands table of {DOCS}"
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--") and opt != "--help":
                    assert re.search(rf"{re.escape(opt)}\b", rows[0]), \
                        f"{name} {opt} is not documented"


def test_a_run_that_escalates_exits_with_the_escalated_code(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    # round 1 fixes add only; the reviewer runs every test: fail, and --max-rounds 1 stops it
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ALL_TESTS]))
    done = handoff("start", "E-1", "--plan", str(plan), "--yes", "--foreground",
                   "--max-rounds", "1", cwd=repo, timeout=120)
    assert done.returncode == errors.EXIT_ESCALATED == 11, done.stdout + done.stderr
    assert state(handoff_home, "E-1")["phase"] == "escalated"
    assert "Open findings" in done.stdout, "the final report is shown"


def stopped_run(repo: Path, tmp_path: Path, home: Path, ticket: str,
                script: dict[str, Any], reached: Callable[[], object]) -> int:
    """The exit code of a foreground run that `handoff stop` ends once reached() holds."""
    plan = write_plan(tmp_path, plan_text({1: script}, test=ADD_ONLY))
    runner = spawn("start", ticket, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   log=tmp_path / "run.log")
    try:
        reached()
        assert handoff("stop", ticket, cwd=repo).returncode == 0
        return runner.wait(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_a_run_that_ends_with_the_ticket_needing_a_person_exits_with_its_code(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    code = stopped_run(repo, tmp_path, handoff_home, "H-1",
                       {"status": "blocked", "question": "Which rounding?"},
                       lambda: wait_phase(handoff_home, "H-1", "needs-human"))
    assert code == errors.EXIT_NEEDS_HUMAN == 10, (tmp_path / "run.log").read_text()


def test_a_run_stopped_mid_round_exits_interrupted(repo: Path, tmp_path: Path,
                                                  handoff_home: Path) -> None:
    code = stopped_run(repo, tmp_path, handoff_home, "I-1",
                       {"edits": [FIX_ADD], "pause_before_report": str(tmp_path / "never")},
                       lambda: wait_event(handoff_home, "I-1", "launch", role="implementer"))
    assert state(handoff_home, "I-1")["phase"] == "implementing"
    assert code == errors.EXIT_INTERRUPTED == 130, (tmp_path / "run.log").read_text()


def test_every_command_is_in_the_readmes_using_it() -> None:
    """README's "Using it" is where a person first meets the commands: each one `--help` lists
    is there as it is typed (`submit`, the peers' own, and `demo`, the README's first command,
    are named where they are explained), and no command there is one `--help` does not know."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    using = readme.split("## Using it", 1)[1].split("\n## ", 1)[0]
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    listed = {name for name, command in group.commands.items() if not command.hidden}
    elsewhere = {"submit", "demo"}
    missing = sorted(n for n in listed - elsewhere if f"handoff {n}" not in using)
    assert missing == [], f"README's Using it lacks: {missing}"
    assert all(f"handoff {n}" in readme for n in elsewhere)
    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", using, re.S))
    typed = set(re.findall(r"^handoff ([a-z-]+)", blocks, re.M))
    assert typed <= listed, f"README names commands handoff has not: {typed - listed}"
