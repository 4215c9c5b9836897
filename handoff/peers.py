"""The peers of one ticket: a tmux session with a window per role, on our private server.

A peer starts with its brief as the CLI's own argument; later messages are pasted and checked.
Each peer gets an allowlisted environment, never the orchestrator's whole one.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.providers import Launch, Provider
from handoff.providers.base import first_message
from handoff.store import atomic_write
from handoff.tmux import TERM, Pane, Tmux

BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
            "SHELL", "HANDOFF_HOME", "HANDOFF_TMUX_SOCKET")
ORCHESTRATOR_WINDOW = "orchestrator"


def session_name(ticket: str, repo_key: str) -> str:
    """Unique per repo (two repos may share a ticket id). tmux forbids '.' in names; '+' is
    not allowed in ticket ids, so REL.1 and REL_1 stay apart."""
    return f"{ticket}-{repo_key.rsplit('-', 1)[-1][:6]}".replace(".", "+")


def allowlisted_env(extra: dict[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """Only the variables a peer needs: no tokens it was not explicitly given."""
    names = (*BASE_ENV, *allow)
    env = {name: os.environ[name] for name in names if name in os.environ}
    env.update(extra)
    env["TERM"] = TERM
    return env


def with_env(env: dict[str, str], argv: Sequence[str]) -> list[str]:
    """argv run under exactly env: tmux would otherwise add its server's whole environment."""
    env_bin = shutil.which("env") or "/usr/bin/env"
    return [env_bin, "-i", *(f"{k}={v}" for k, v in sorted(env.items())), *argv]


@dataclass(frozen=True)
class Peers:
    tmux: Tmux
    session: str
    ticket_dir: Path

    def ensure_session(self, cwd: Path, orchestrator_argv: Sequence[str]) -> None:
        """The ticket's session with its orchestrator window, created once."""
        if not self.tmux.has_session(self.session):
            self.tmux.new_session(self.session, ORCHESTRATOR_WINDOW, orchestrator_argv, cwd)

    def pane(self, role: str) -> Pane | None:
        return self.tmux.panes(self.session).get(role)

    def launch(self, provider: Provider, launch: Launch, env: dict[str, str]) -> str:
        """Start the role's CLI fresh on launch.brief, replacing whatever ran in its window."""
        argv = with_env(env, provider.argv(launch))
        pane = self.pane(launch.role)
        if pane is None:
            pane_id = self.tmux.new_window(self.session, launch.role, argv, launch.worktree)
        else:
            self.tmux.respawn(pane.id, argv, launch.worktree)
            pane_id = pane.id
        self.tmux.tag(pane_id, str(launch.brief))
        return pane_id

    def exit_status(self, role: str, wait: float = 2.0) -> int | None:
        """A dead pane's exit status, or None when tmux never learns it.

        tmux marks a pane dead when its pty closes, before it reaps the child; and Debian's
        tmux 3.3a (with libutempter) can lose the child's SIGCHLD for good. A `run-shell true`
        job ends with a SIGCHLD of its own, on which tmux reaps every zombie it has.
        """
        deadline = time.monotonic() + wait
        while True:
            pane = self.pane(role)
            if pane is None or pane.status is not None or time.monotonic() > deadline:
                return pane.status if pane else None
            self.tmux.run("run-shell", "true", check=False)
            time.sleep(0.05)

    def working_on(self, role: str) -> str:
        """The brief the role's live process was last given ('' when none is running)."""
        pane = self.pane(role)
        return self.tmux.tag_of(pane.id) if pane is not None and not pane.dead else ""

    def retire(self, role: str, transcript: Path) -> bool:
        """Save the role's transcript and end its process and window; False when none ran."""
        pane = self.pane(role)
        if pane is None:
            return False
        atomic_write(transcript, self.tmux.capture(pane.id) + "\n")
        self.tmux.kill_pane(pane.id)
        return True

    def capture(self, role: str, path: Path) -> bool:
        """Save the role's whole pane history to path; False when there is no such pane."""
        pane = self.pane(role)
        if pane is None:
            return False
        atomic_write(path, self.tmux.capture(pane.id) + "\n")
        return True

    def deliver(self, provider: Provider, role: str, brief: Path, tries: int = 3,
                wait: float = 5.0) -> bool:
        """Paste the nudge for brief into the role's pane and check it was taken; bounded retries.

        A retry re-sends Enter only while our own text still sits in the input line, so a
        person's draft in the box is never submitted by us.
        """
        message = first_message(brief)
        for _ in range(tries):
            pane = self.pane(role)
            if pane is None or pane.dead:
                return False
            if provider.taken(self.tmux.capture(pane.id), message):
                self.tmux.tag(pane.id, str(brief))  # taken before a crash cut us short
                return True
            last = self.tmux.screen(pane.id).rstrip().splitlines()[-1:] or [""]
            if message in last[0]:
                self.tmux.send_enter(pane.id)
            else:
                self.tmux.paste(pane.id, message)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if provider.taken(self.tmux.capture(pane.id), message):
                    self.tmux.tag(pane.id, str(brief))
                    return True
                time.sleep(0.1)
        return False

    def stop(self) -> bool:
        return self.tmux.kill_session(self.session)


def self_argv(*args: str) -> list[str]:
    """This installation of handoff, runnable from anywhere without activating its venv."""
    return [sys.executable, "-m", "handoff", *args]
