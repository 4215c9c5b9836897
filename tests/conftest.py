"""Shared fixtures: every test gets its own HANDOFF_HOME, HOME, tmux socket and git repo.

Nothing reaches the user's ~/.local/state, ~/.gitconfig, ~/.claude.json or default tmux server.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from handoff.machinery import relay
from handoff.machinery.peers import Peers, session_name
from handoff.machinery.ports import BOOK, CLAIMS
from handoff.machinery.tmux import Tmux

T = TypeVar("T")

#: the real-CLI fixtures (claude, codex and their stand-in servers); the config tests' files
pytest_plugins = ("tests.realcli", "tests.configfiles")

PYTHON = sys.executable


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, timeout=60).stdout.strip()


def commit_file(repo: Path, name: str, text: str, message: str = "work") -> str:
    """Write name in a checkout, commit it, return the new HEAD."""
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    git(repo, "add", "--", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def read_json(path: Path) -> dict[str, object] | None:
    """A JSON object another process wrote, or None while it is not there yet."""
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def wait_until(check: Callable[[], T | None], timeout: float = 20.0, what: str = "condition",
               interval: float = 0.05) -> T:
    """Poll check() until it returns something truthy; fail the test with what on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[user]\n\tname = handoff tests\n\temail = tests@handoff.invalid\n"
        "[init]\n\tdefaultBranch = main\n", encoding="utf-8")
    socket = f"handoff-test-{uuid.uuid4().hex[:10]}"
    scratch = tempfile.mkdtemp(prefix="ht-", dir="/tmp")
    values = {
        "HOME": str(home),
        "HANDOFF_HOME": str(tmp_path / "state"),
        "HANDOFF_TMUX_SOCKET": socket,
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "GIT_CONFIG_NOSYSTEM": "1",
        # what handoff and the real CLIs put in the temp dir (the demo's repo, Claude's
        # sockets) goes into a folder of this test's own, removed after it: short, so socket
        # paths in it stay within the 108 bytes a Unix socket allows
        "TMPDIR": scratch,
        "XDG_RUNTIME_DIR": scratch,  # where Claude Code puts its sockets (else /tmp/cc-socks)
    }
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    for key in ("TMUX", "TMUX_PANE", "HANDOFF_TICKET_DIR", "HANDOFF_ROLE", "HANDOFF_TICKET"):
        monkeypatch.delenv(key, raising=False)
    tmux = shutil.which("tmux") or "tmux"  # resolved now: a test may empty PATH
    yield values
    relay.end(Path(values["HANDOFF_HOME"]))  # the warm process the test's commands started
    socket_file = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / socket
    if socket_file.exists():  # a server ran on it (no tmux started for a test that used none)
        subprocess.run([tmux, "-L", socket, "kill-server"], capture_output=True, timeout=15)
    end_servers_of(socket)
    socket_file.unlink(missing_ok=True)
    shutil.rmtree(scratch, ignore_errors=True)
    forget_port_claims(tmp_path)


def end_servers_of(socket: str) -> None:
    """Kill any tmux server still running for the test's socket (its name is the test's own),
    found by its command line: one whose socket file went, or that did not answer kill-server,
    would outlive the test with its panes (seen after test_relay: a server and its
    `handoff log --follow`)."""
    for entry in Path("/proc").iterdir() if Path("/proc/self").exists() else ():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # not a process, gone, or not ours
            continue
        named = socket.encode()
        if argv and argv[0].endswith(b"tmux") and (b"-L" + named in argv or any(
                pair == (b"-L", named) for pair in itertools.pairwise(argv))):
            with contextlib.suppress(OSError):
                os.kill(int(entry.name), signal.SIGKILL)


def forget_port_claims(tmp_path: Path) -> None:
    """Remove the machine-wide port claims a test's homes made (its tickets are left unclosed,
    and pytest keeps its last runs' folders: their claims would hold ports from the next run)."""
    if not any((where / BOOK).exists() for where in (tmp_path, tmp_path / "state")):
        return
    with contextlib.suppress(FileNotFoundError):
        for claim in CLAIMS.iterdir():
            with contextlib.suppress(OSError, IndexError):
                if claim.read_text(encoding="utf-8").splitlines()[0].startswith(str(tmp_path)):
                    claim.unlink()


@pytest.fixture
def peers(socket: str, handoff_home: Path, tmp_path: Path) -> Peers:
    """Ticket T-1's session on the test's socket, its orchestrator window a sleeping program."""
    tdir = handoff_home / "repo-0123456789" / "T-1"
    tdir.mkdir(parents=True)
    p = Peers(Tmux(socket, handoff_home), session_name("T-1", "repo-0123456789"), tdir)
    p.ensure_session(tmp_path, [PYTHON, "-c", "import time; time.sleep(600)"])
    return p


@pytest.fixture
def terminal() -> Iterator[str]:
    """A separate tmux server standing in for the person's own terminal."""
    name = f"handoff-test-user-{uuid.uuid4().hex[:8]}"
    yield name
    subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, timeout=15)
    (Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / name).unlink(
        missing_ok=True)


@pytest.fixture
def handoff_home(isolated: dict[str, str]) -> Path:
    return Path(isolated["HANDOFF_HOME"])


@pytest.fixture
def socket(isolated: dict[str, str]) -> str:
    return isolated["HANDOFF_TMUX_SOCKET"]


CALC = '''\
def add(a: int, b: int) -> int:
    return a - b


def mul(a: int, b: int) -> int:
    return a + b


def neg(a: int) -> int:
    return a
'''

TEST_CALC = '''\
import unittest

from calc import add, mul, neg


class AddTest(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)


class MulTest(unittest.TestCase):
    def test_mul(self) -> None:
        self.assertEqual(mul(2, 3), 6)


class NegTest(unittest.TestCase):
    def test_neg(self) -> None:
        self.assertEqual(neg(2), -2)
'''


@pytest.fixture
def repo(tmp_path: Path, isolated: dict[str, str]) -> Path:
    """A small git repo: calc.py with three bugs (add, mul, neg) and one test per bug."""
    path = tmp_path / "repo"
    (path / "tests").mkdir(parents=True)
    (path / "calc.py").write_text(CALC, encoding="utf-8")
    (path / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (path / "tests" / "test_calc.py").write_text(TEST_CALC, encoding="utf-8")
    (path / ".gitignore").write_text("__pycache__/\n", encoding="utf-8")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "calc with bugs")
    return path


def unittest_argv(*targets: str) -> list[str]:
    return [PYTHON, "-m", "unittest", "-q", *targets]
