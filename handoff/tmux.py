"""Our private tmux server: its own socket and config, so the user's own server is never touched.

Every call goes through `proc.run` with a timeout; targets are pane ids or exact `=session`
names, never prefixes.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff import proc
from handoff.errors import ExternalFailure, MissingTool

DEFAULT_SOCKET = "handoff"
TMUX_TIMEOUT = 15.0
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
"""


def socket_name() -> str:
    return os.environ.get("HANDOFF_TMUX_SOCKET") or DEFAULT_SOCKET


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

    def run(self, *args: str, check: bool = True) -> str:
        if not self.config.exists() or self.config.read_text(encoding="utf-8") != CONFIG:
            self.config.parent.mkdir(parents=True, exist_ok=True)
            self.config.write_text(CONFIG, encoding="utf-8")
        result = proc.run([*self.base(), *args], timeout=TMUX_TIMEOUT, check=False)
        if check and result.returncode != 0:
            raise ExternalFailure(f"tmux {args[0]} failed: {result.stderr.strip()}")
        return result.stdout.rstrip("\n")

    def attach_argv(self, target: str) -> list[str]:
        return [*self.base(), "attach-session", "-t", target]

    def has_session(self, session: str) -> bool:
        if self._binary is None:
            return False
        result = proc.run([*self.base(), "has-session", "-t", f"={session}"],
                          timeout=TMUX_TIMEOUT, check=False)
        return result.returncode == 0

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
        """The panes of a session by window name (empty when the session is gone)."""
        out = self.run("list-panes", "-s", "-t", f"={session}", "-F",
                       "#{session_name}\t#{pane_id}\t#{window_name}\t#{pane_dead}\t"
                       "#{pane_dead_status}\t#{pane_pid}", check=False)
        panes = {}
        for line in out.splitlines():
            parts = line.split("\t")
            # tmux falls back to a prefix match when no session has this exact name
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
        proc.run([*self.base(), "load-buffer", "-b", buffer, "-"], input_text=text,
                 timeout=TMUX_TIMEOUT)
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
        self.run("kill-session", "-t", f"={session}", check=False)
        self.forget_if_empty()
        return True

    def forget_if_empty(self) -> None:
        """Stop the server when it has no sessions, and remove its socket file."""
        if self._binary is None:
            return
        listing = proc.run([*self.base(), "list-sessions"], timeout=TMUX_TIMEOUT, check=False)
        if listing.returncode == 0 and listing.stdout.strip():
            return
        socket = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / self.socket
        proc.run([*self.base(), "kill-server"], timeout=TMUX_TIMEOUT, check=False)
        socket.unlink(missing_ok=True)
