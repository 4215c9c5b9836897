"""libtmux runs tmux only through handoff's bounded runner.

The bound is installed at the pinned libtmux's one seam (the `tmux_cmd` name in each module that
calls it); these tests read the installed libtmux source so that an upgrade that runs tmux from
anywhere else fails here, and drive libtmux's own objects against a stopped and a fresh server.
"""

from __future__ import annotations

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
from handoff.machinery.tmux import BASE_ENV, ServerGone, Tmux, TmuxFailure
from tests.conftest import read_json
from tests.unit.machinery import test_tmux
from tests.unit.machinery import test_tmux_stack as unit_tests
from tests.unit.machinery.test_tmux import BLOCK, SECRET_ENV, environ_of

#: the fixtures this module's unit tests define, shared
tmux = unit_tests.tmux

PY = sys.executable
short_tmpdir = test_tmux.short_tmpdir  # the fixture: a socket folder short enough for tmux


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
