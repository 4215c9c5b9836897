"""Our private tmux server: its own socket and config, so the user's own server is never touched.

Every call goes through `proc.run` with a timeout and an allowlisted environment (any client
call may be the one that starts the server, and the server keeps the environment it started
with for every client on the socket to read); targets are pane ids or exact `=session:`
names, never prefixes.

A failed call is one of three things, told apart by what tmux says: the session or pane is gone
(an empty answer), the server is gone (`ServerGone`), or tmux failed to answer (`TmuxFailure`,
which says nothing about whether anything is alive).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff import proc
from handoff.errors import ExternalFailure, MissingTool

DEFAULT_SOCKET = "handoff"
TMUX_TIMEOUT = 15.0
#: how long a watcher goes on looking while tmux does not answer, before it gives up
PATIENCE = 2 * TMUX_TIMEOUT

#: what every process on our server starts from: the server itself, the orchestrator in its
#: window and each peer before its provider's own variables are added; never a token. TMUX_TMPDIR
#: is where our socket is: without it a process in a window would start a second server in /tmp.
#: TMUX (set inside a person's own tmux) never passes: it names their server, not ours.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
            "XDG_RUNTIME_DIR", "SHELL", "HANDOFF_HOME", "HANDOFF_TMUX_SOCKET", "TMUX_TMPDIR",
            # the network as this machine reaches it: every coding CLI needs it the same way
            "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
            "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS")

# tmux 3.3a's words on stderr
GONE = ("can't find session", "can't find window", "can't find pane")
NO_SERVER = ("no server running on", "server exited unexpectedly", "lost server")
NO_SOCKET = ("(No such file or directory)", "(Connection refused)")
WIDTH, HEIGHT = 200, 50
TERM = "screen-256color"

CONFIG = """\
# handoff's own tmux config: a user's ~/.tmux.conf never reaches peers.
set -g remain-on-exit on
set -g exit-empty on
set -g history-limit 50000
set -g default-terminal "screen-256color"
set -g allow-rename off
set -g automatic-rename off
set -g mouse on
set -s escape-time 10
set -g status-left "[#S] "
set -g status-left-length 48
set -g default-size 200x50
# a person who attaches must not hand their SSH agent or display to every peer on the socket
set -g update-environment ""
"""


def socket_name() -> str:
    return os.environ.get("HANDOFF_TMUX_SOCKET") or DEFAULT_SOCKET


def client_env() -> dict[str, str]:
    """The environment of every tmux client we run, and so of a server one of them starts."""
    return {name: os.environ[name] for name in BASE_ENV if name in os.environ}


class ServerGone(ExternalFailure):
    """No tmux server listens on the socket: it was killed, or never started."""


class TmuxFailure(ExternalFailure):
    """tmux did not answer in time, or failed some other way: nothing is known to be gone."""


def failure_kind(stderr: str) -> str:
    """'gone' (the session, window or pane), 'no-server', or 'failed' (anything else)."""
    if any(text in stderr for text in GONE):
        return "gone"
    if any(text in stderr for text in NO_SERVER):
        return "no-server"
    if "error connecting to" in stderr and any(text in stderr for text in NO_SOCKET):
        return "no-server"
    return "failed"


def direct(argv: Sequence[str]) -> list[str]:
    """tmux runs a lone argument through `sh -c`; two or more it executes directly."""
    if len(argv) == 1:
        return [shutil.which("env") or "/usr/bin/env", argv[0]]
    return list(argv)


@dataclass(frozen=True)
class Pane:
    id: str
    window: str
    dead: bool
    status: int | None
    pid: int


class Tmux:
    def __init__(self, socket: str, config_dir: Path) -> None:
        self.socket = socket
        self.config = config_dir / "tmux.conf"
        self._binary = shutil.which("tmux")

    def base(self) -> list[str]:
        if self._binary is None:
            raise MissingTool("tmux is not installed", "install tmux (e.g. apt-get install -y tmux)")
        return [self._binary, "-L", self.socket, "-f", str(self.config)]

    def call(self, *args: str, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        """One tmux client call, whatever it answers; TmuxFailure when it does not in time."""
        if not self.config.exists() or self.config.read_text(encoding="utf-8") != CONFIG:
            self.config.parent.mkdir(parents=True, exist_ok=True)
            self.config.write_text(CONFIG, encoding="utf-8")
        base = self.base()
        try:
            return proc.run([*base, *args], timeout=TMUX_TIMEOUT, check=False, env=client_env(),
                            input_text=input_text)
        except ExternalFailure:  # its timeout: the client was killed, the server may live on
            raise TmuxFailure(
                f"tmux {args[0]} on socket {self.socket} did not answer within {TMUX_TIMEOUT:g}s",
                f"the tmux server may be stopped or overloaded: look at it with 'tmux -L "
                f"{self.socket} list-sessions'") from None

    def failure(self, args: Sequence[str], result: subprocess.CompletedProcess[str]) -> ExternalFailure:
        """The exception for a failed call: the server gone, or tmux failing."""
        said = result.stderr.strip() or f"exit {result.returncode}"
        if failure_kind(said) == "no-server":
            return ServerGone(f"the tmux server on socket {self.socket} is gone ({said})",
                              "'handoff resume TICKET' starts it again with the ticket's session")
        return TmuxFailure(f"tmux {args[0]} failed: {said}")

    def run(self, *args: str, check: bool = True) -> str:
        """stdout of a tmux call. check: raise ServerGone/TmuxFailure when it fails; without
        it a failure answers what tmux printed (usually nothing), but a timeout still raises."""
        result = self.call(*args)
        if check and result.returncode != 0:
            raise self.failure(args, result)
        return result.stdout.rstrip("\n")

    def attach_argv(self, target: str) -> list[str]:
        return [*self.base(), "attach-session", "-t", target]

    def has_session(self, session: str) -> bool:
        """Whether the session exists; False too when no server runs, TmuxFailure when tmux
        cannot tell."""
        if self._binary is None:
            return False
        args = ("has-session", "-t", f"={session}:")
        result = self.call(*args)
        if result.returncode == 0:
            return True
        if failure_kind(result.stderr) in ("gone", "no-server"):
            return False
        raise self.failure(args, result)

    def new_session(self, session: str, window: str, argv: Sequence[str], cwd: Path) -> str:
        """Create a detached session whose first window runs argv (directly, no shell)."""
        argv = direct(argv)
        pane = self.run("new-session", "-d", "-P", "-F", "#{pane_id}", "-s", session,
                        "-n", window, "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(cwd),
                        "--", *argv)
        self.fix_size(pane)
        return pane

    def new_window(self, session: str, window: str, argv: Sequence[str], cwd: Path) -> str:
        argv = direct(argv)
        pane = self.run("new-window", "-d", "-P", "-F", "#{pane_id}", "-t", f"={session}:",
                        "-n", window, "-c", str(cwd), "--", *argv)
        self.fix_size(pane)
        return pane

    def fix_size(self, pane: str) -> None:
        """Pin the window at WIDTHxHEIGHT, so a peer's screen reads the same whoever attaches.

        resize-window makes that one window's size manual; the global `window-size manual`
        would do it for all, but tmux 3.3a's server exits on it.
        """
        self.run("resize-window", "-t", pane, "-x", str(WIDTH), "-y", str(HEIGHT), check=False)

    def respawn(self, pane: str, argv: Sequence[str], cwd: Path) -> None:
        """Kill whatever runs in the pane (its whole process group) and start argv there.

        The old history goes (the caller keeps it as a transcript first): what the pane shows
        is then only ever about the process now running in it.
        """
        argv = direct(argv)
        self.run("clear-history", "-t", pane, check=False)
        self.run("respawn-pane", "-k", "-t", pane, "-c", str(cwd), "--", *argv)

    def panes(self, session: str) -> dict[str, Pane]:
        """The panes of a session by window name: empty when the session is gone, ServerGone
        when the whole server is, TmuxFailure when tmux fails (which proves nothing dead)."""
        args = ("list-panes", "-s", "-t", f"={session}:", "-F",
                "#{session_name}\t#{pane_id}\t#{window_name}\t#{pane_dead}\t"
                "#{pane_dead_status}\t#{pane_pid}")
        result = self.call(*args)
        if result.returncode != 0:
            if failure_kind(result.stderr) == "gone":
                return {}
            raise self.failure(args, result)
        panes = {}
        for line in result.stdout.splitlines():
            parts = line.split("\t")
            # `=name` alone falls back to a prefix match; `=name:` does not, but be sure
            if len(parts) != 6 or parts[0] != session:
                continue
            _, pid, window, dead, status, ppid = parts
            panes[window] = Pane(pid, window, dead == "1",
                                 int(status) if status.lstrip("-").isdigit() else None,
                                 int(ppid) if ppid.isdigit() else 0)
        return panes

    def tag(self, pane: str, value: str, name: str = "@handoff") -> None:
        """Remember on the pane itself what it was started for (survives our own crash)."""
        self.run("set-option", "-p", "-t", pane, name, value)

    def tag_of(self, pane: str, name: str = "@handoff") -> str:
        return self.run("show-options", "-p", "-v", "-t", pane, name, check=False).strip()

    def kill_pane(self, pane: str) -> None:
        self.run("kill-pane", "-t", pane, check=False)

    def capture(self, pane: str) -> str:
        """The pane's whole history and screen, wrapped lines joined."""
        return self.run("capture-pane", "-p", "-J", "-S", "-", "-t", pane, check=False)

    def tail(self, pane: str, lines: int = 200) -> str:
        """The last lines of the pane's history and its screen: enough to see a message that
        scrolled off just after it was taken."""
        return self.run("capture-pane", "-p", "-J", "-S", f"-{lines}", "-t", pane, check=False)

    def screen(self, pane: str) -> str:
        return self.run("capture-pane", "-p", "-J", "-t", pane, check=False)

    def paste(self, pane: str, text: str, enter_delay: float = 0.2) -> None:
        """Bracketed paste of text, then Enter as its own key press after enter_delay.

        A TUI that sees the Enter inside the paste burst keeps it as a newline in the draft
        instead of submitting it; how long a pause it needs is the provider's knowledge.
        """
        buffer = f"handoff-{os.getpid()}-{pane.lstrip('%')}"
        loaded = self.call("load-buffer", "-b", buffer, "-", input_text=text)
        if loaded.returncode != 0:
            raise self.failure(("load-buffer",), loaded)
        self.run("paste-buffer", "-p", "-d", "-b", buffer, "-t", pane)
        if enter_delay:
            time.sleep(enter_delay)
        self.run("send-keys", "-t", pane, "Enter")

    def send_enter(self, pane: str) -> None:
        self.run("send-keys", "-t", pane, "Enter")

    def send_key(self, pane: str, key: str) -> None:
        """One key by its tmux name (Down, Enter, C-c); any other word is typed as text."""
        self.run("send-keys", "-t", pane, key)

    def kill_session(self, session: str) -> bool:
        if not self.has_session(session):
            return False
        self.run("kill-session", "-t", f"={session}:", check=False)
        self.forget_if_empty()
        return True

    def forget_if_empty(self) -> None:
        """Stop the server when it has no sessions, and remove its socket file. A server that
        cannot be asked is left alone: its socket is how anyone reaches its sessions."""
        if self._binary is None:
            return
        listing = self.call("list-sessions")
        if listing.returncode == 0 and listing.stdout.strip():
            return
        if listing.returncode != 0 and failure_kind(listing.stderr) != "no-server":
            return
        socket = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / self.socket
        self.call("kill-server")
        socket.unlink(missing_ok=True)


class Patience:
    """How long a watcher goes on while tmux does not answer: a stopped or swamped server gets
    `limit` seconds since it last answered, then the watcher gives up with a TmuxFailure that
    says so, instead of waiting forever or taking the silence for a death."""

    def __init__(self, ticket: str = "TICKET", limit: float = PATIENCE) -> None:
        self.ticket, self.limit = ticket, limit
        self.answered_at = time.monotonic()
        self.failing = False

    def failed(self, exc: TmuxFailure) -> bool:
        """Note a failure; True for the first since tmux last answered (worth telling)."""
        silent = time.monotonic() - self.answered_at
        if silent >= self.limit:
            hint = "; ".join(filter(None, (exc.hint, f"once it answers again, 'handoff resume "
                                                     f"{self.ticket}' carries on where this stopped")))
            raise TmuxFailure(f"tmux has not answered for {silent:.0f}s: {exc.message}", hint)
        first, self.failing = not self.failing, True
        return first

    def answered(self) -> float | None:
        """Note an answer; how long tmux had been failing, when it had."""
        now = time.monotonic()
        was = now - self.answered_at if self.failing else None
        self.answered_at, self.failing = now, False
        return was
