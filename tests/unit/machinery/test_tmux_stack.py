"""libtmux runs tmux only through handoff's bounded runner.

The bound is installed at the pinned libtmux's one seam (the `tmux_cmd` name in each module that
calls it); these tests read the installed libtmux source so that an upgrade that runs tmux from
anywhere else fails here, and drive libtmux's own objects against a stopped and a fresh server.
"""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import libtmux
import pytest

from handoff.machinery import tmux as tmux_module
from handoff.machinery.tmux import BASE_ENV, SEAMS, BoundedCmd, ServerGone, Tmux, TmuxFailure
from tests.conftest import read_json
from tests.paths import ROOT
from tests.unit.machinery import test_tmux
from tests.unit.machinery.test_tmux import BLOCK, SECRET_ENV, environ_of

PY = sys.executable
LIBTMUX = Path(libtmux.__file__).parent
HANDOFF = ROOT / "handoff"
short_tmpdir = test_tmux.short_tmpdir  # the fixture: a socket folder short enough for tmux

#: module, enclosing function → what starts a process there, in the pinned libtmux 0.62
RUNS_TMUX = {
    ("libtmux.common", "_query_version", "tmux_cmd"),  # tmux -V, through the seam
    ("libtmux.neo", "fetch_objs", "tmux_cmd"),  # every object listing, through the seam
    ("libtmux.server", "cmd", "tmux_cmd"),  # every other command, through the seam
    ("libtmux.common", "__init__", "subprocess.Popen"),  # tmux_cmd itself: what the seam replaces
    ("libtmux.server", "raise_if_dead", "subprocess.check_call"),  # never called by handoff
    ("libtmux._internal.control_mode", "__enter__", "subprocess.Popen"),  # libtmux's test helper
}
#: what, from a module, starts a process
STARTERS = {"subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput",
                           "getstatusoutput"},
            "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execv",
                   "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv",
                   "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe"},
            "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
            "pty": {"spawn", "fork"}}


def process_starts(module: str, source: str) -> set[tuple[str, str, str]]:
    """(module, enclosing function, callee) for each call in source that runs a process."""
    found: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call):
                callee = child.func
                if isinstance(callee, ast.Name) and callee.id == "tmux_cmd":
                    found.add((module, function, "tmux_cmd"))
                if (isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name)
                        and callee.attr in STARTERS.get(callee.value.id, ())):
                    found.add((module, function, f"{callee.value.id}.{callee.attr}"))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def libtmux_process_starts() -> set[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()
    for path in sorted(LIBTMUX.rglob("*.py")):
        relative = path.relative_to(LIBTMUX.parent).with_suffix("")
        if "test" in relative.parts or relative.name == "pytest_plugin":
            continue  # libtmux's own tests and fixtures: never imported by handoff
        found |= process_starts(".".join(relative.parts), path.read_text(encoding="utf-8"))
    return found


def test_the_pinned_libtmux_runs_tmux_only_where_the_bounded_runner_is_installed() -> None:
    assert libtmux.__version__.startswith("0.62."), "re-read libtmux's call sites for a new minor"
    assert libtmux_process_starts() == RUNS_TMUX
    seams = {module for module, _, callee in RUNS_TMUX if callee == "tmux_cmd"}
    assert {module.__name__ for module in SEAMS} == seams
    for module in SEAMS:
        assert module.tmux_cmd is BoundedCmd, f"{module.__name__} runs tmux unbounded"


def test_the_call_site_check_sees_a_new_way_to_run_tmux() -> None:
    source = "import subprocess, os\ndef f():\n    subprocess.run(['tmux'])\n    os.system('x')\n"
    assert process_starts("m", source) == {("m", "f", "subprocess.run"), ("m", "f", "os.system")}
    assert process_starts("m", "from x import tmux_cmd\ntmux_cmd('-V')\n") == {
        ("m", "<module>", "tmux_cmd")}


def test_handoff_never_uses_the_unbounded_libtmux_paths() -> None:
    source = "\n".join(path.read_text(encoding="utf-8") for path in sorted(HANDOFF.rglob("*.py")))
    for unbounded in ("raise_if_dead", "control_mode", "ControlMode"):
        assert unbounded not in source


@pytest.fixture
def tmux(socket: str, handoff_home: Path) -> Tmux:
    return Tmux(socket, handoff_home)


def test_libtmux_objects_on_a_stopped_server_fail_within_the_bound(
        tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pane = tmux.server.cmd("new-session", "-d", "-P", "-F", "#{pane_id}", "-s", "s", "-c", str(tmp_path),
                           "--", PY, "-c", BLOCK).stdout[0]
    pid = int(tmux.server.cmd("display-message", "-p", "#{pid}").stdout[0])
    monkeypatch.setattr(tmux_module, "TMUX_TIMEOUT", 1.0)
    os.kill(pid, signal.SIGSTOP)
    try:
        # a listing (neo.fetch_objs), an object fetch, and a command on an object
        for look in (lambda: tmux.server.sessions, lambda: libtmux.Pane.from_pane_id(tmux.server, pane),
                     lambda: tmux.pane(pane).capture_pane(), lambda: tmux.pane(pane).set_option("@x", "1")):
            began = time.monotonic()
            with pytest.raises(TmuxFailure) as caught:
                look()
            assert not isinstance(caught.value, ServerGone)
            assert "did not answer within 1s" in caught.value.message
            assert time.monotonic() - began < 1.0 + 2 * 2.0 + 2.0, "the bound, grace and a margin"
    finally:
        os.kill(pid, signal.SIGCONT)
    assert [s.session_name for s in tmux.server.sessions] == ["s"], "the server lives on"


def test_a_server_libtmux_starts_gets_only_the_allowlisted_environment(
        tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmpdir: Path) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TMUX_TMPDIR", str(short_tmpdir))

    session = tmux.server.new_session("s", start_directory=str(tmp_path))  # libtmux's own path

    assert session.session_name == "s"
    shown = tmux.server.cmd("show-environment", "-g").stdout
    pid = int(tmux.server.cmd("display-message", "-p", "#{pid}").stdout[0])
    for seen in ({line.split("=", 1)[0] for line in shown if "=" in line}, set(environ_of(pid))):
        assert not set(SECRET_ENV) & seen
        assert seen <= {*BASE_ENV, "PWD"}


@contextlib.contextmanager
def terminal_on_stdin() -> Iterator[None]:
    """fd 0 is a pipe for a while (pytest's is /dev/null already): what a client would inherit."""
    reading, writing = os.pipe()
    saved = os.dup(0)
    os.dup2(reading, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        for fd in (saved, reading, writing):
            os.close(fd)


SPY = """\
import json, os, shutil, sys
with open(os.environ["HANDOFF_HOME"] + "/client.json", "w") as f:
    json.dump({"stdin": os.readlink("/proc/self/fd/0"), "pgid": os.getpgid(0), "pid": os.getpid(),
               "env": sorted(os.environ)}, f)
os.execv(shutil.which("tmux"), ["tmux", *sys.argv[1:]])
"""


def test_every_libtmux_client_runs_alone_on_dev_null_with_the_allowlisted_environment(
        tmux: Tmux, tmp_path: Path, handoff_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    spy = tmp_path / "tmux-spy"
    spy.write_text(f"#!{PY}\n{SPY}", encoding="utf-8")
    spy.chmod(0o755)
    tmux.server.tmux_bin = str(spy)
    handoff_home.mkdir(parents=True, exist_ok=True)
    for call in (lambda: tmux.server.sessions, lambda: tmux.server.cmd("list-sessions")):
        (handoff_home / "client.json").unlink(missing_ok=True)
        with terminal_on_stdin():
            call()
        client = read_json(handoff_home / "client.json")
        assert client is not None
        assert client["stdin"] == "/dev/null"
        assert client["pgid"] == client["pid"] != os.getpgid(0), "its own process group"
        names = client["env"]
        assert isinstance(names, list) and set(names) <= set(BASE_ENV)
