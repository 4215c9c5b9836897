"""Where a scenario runs: one temp dir holding HANDOFF_HOME, HOME, TMPDIR, XDG_STATE_HOME and
the git repos, and private, uniquely named tmux sockets. Closing it ends the tmux servers
(and with them every peer and orchestrator they run), removes their socket files and the
temp dir, and puts back any environment it changed; the runner turns SIGTERM and SIGHUP into
an exit, so this happens on an error or a signal too."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from handoff.machinery import relay

#: what a parent shell's tmux or a peer's environment would leak into the runs
DROPPED = ("TMUX", "TMUX_PANE", "HANDOFF_TICKET_DIR", "HANDOFF_ROLE", "HANDOFF_TICKET",
           "HANDOFF_SEAL")


class BenchError(Exception):
    """A scenario could not do its work (a command failed, a ticket never got where it had to)."""


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0,
               interval: float = 0.01) -> None:
    """Poll check() until it holds; BenchError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def timed(action: Callable[[], object]) -> float:
    """Milliseconds action() took."""
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()  # the bench runs on Linux only (it reads /proc)


class Sandbox:
    def __init__(self, name: str, python: str | None = None) -> None:
        #: the interpreter that runs handoff's command line here
        self.python = python or sys.executable
        self.root = Path(tempfile.mkdtemp(prefix=f"hb-{name}-")).resolve()
        self._sockets: list[str] = []
        self.socket = self.new_socket()
        home = self.root / "home"
        home.mkdir()
        (home / ".gitconfig").write_text(
            "[user]\n\tname = handoff bench\n\temail = bench@handoff.invalid\n"
            "[init]\n\tdefaultBranch = main\n", encoding="utf-8")
        for folder in ("tmp", "t", "work"):
            (self.root / folder).mkdir()
        self.home = self.root / "state"
        env = {k: v for k, v in os.environ.items() if k not in DROPPED}
        env.update({"HOME": str(home), "HANDOFF_HOME": str(self.home),
                    "HANDOFF_TMUX_SOCKET": self.socket, "GIT_CONFIG_NOSYSTEM": "1",
                    "XDG_STATE_HOME": str(self.root / "xdg-state"),
                    "TMPDIR": str(self.root / "tmp")})
        # A socket path must stay short (sun_path is ~104 bytes); else tmux's default dir.
        if len(str(self.root / "t" / f"tmux-{os.getuid()}" / f"{self.socket}-x")) < 100:
            env["TMUX_TMPDIR"] = str(self.root / "t")
        self.env = env
        self._saved_env: dict[str, str] | None = None

    def new_socket(self) -> str:
        """A tmux socket name of this sandbox's own; its server is ended on close."""
        name = f"hb-{uuid.uuid4().hex[:10]}"
        self._sockets.append(name)
        return name

    def apply(self) -> None:
        """Make this sandbox's environment the process's own (for in-process measurements)."""
        if self._saved_env is None:
            self._saved_env = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)

    def run(self, argv: Sequence[str], cwd: Path | None = None, check: bool = True,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """argv in this sandbox's environment; BenchError when it fails and check is set."""
        done = subprocess.run(list(argv), cwd=cwd or self.root / "work", env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise BenchError(f"{' '.join(argv[:5])} failed ({done.returncode}): "
                             f"{(done.stderr or done.stdout).strip()[-400:]}")
        return done

    def handoff(self, *args: str, cwd: Path | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run([self.python, "-m", "handoff", *args], cwd, check)

    def tmux(self, *args: str, check: bool = True) -> str:
        return self.run(["tmux", "-L", self.socket, *args], check=check).stdout.rstrip("\n")

    def socket_file(self, socket: str) -> Path:
        folder = self.env.get("TMUX_TMPDIR") or os.environ.get("TMUX_TMPDIR") or "/tmp"
        return Path(folder) / f"tmux-{os.getuid()}" / socket

    def _end_server(self, socket: str) -> list[int]:
        """Kill socket's tmux server; the pids its panes ran (they get SIGHUP and exit)."""
        if not shutil.which("tmux"):
            return []
        listed = subprocess.run(["tmux", "-L", socket, "list-panes", "-a", "-F", "#{pane_pid}"],
                                capture_output=True, text=True, env=self.env, timeout=15,
                                check=False)
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, env=self.env,
                       timeout=15, check=False)
        return [int(p) for p in listed.stdout.split() if p.isdigit()]

    def close(self) -> None:
        left: list[int] = []
        for socket in self._sockets:
            left += self._end_server(socket)
            self.socket_file(socket).unlink(missing_ok=True)
        # An orchestrator saves its state as it ends: let it finish before its folder goes.
        deadline = time.monotonic() + 10
        while left and time.monotonic() < deadline:
            left = [pid for pid in left if _alive(pid)]
            time.sleep(0.02)
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        relay.end(self.home)  # the warm process this sandbox's commands started
        if self._saved_env is not None:
            os.environ.clear()
            os.environ.update(self._saved_env)
            self._saved_env = None
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
