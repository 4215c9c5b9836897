"""The peers of one ticket: a tmux session with a window per role, on our private server.

A peer starts with its brief as the CLI's own argument; later messages are pasted and checked.
Each peer gets an allowlisted environment, never the orchestrator's whole one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.machinery import launcher, limits, reaper
from handoff.machinery.tmux import BASE_ENV, MARK, SESSION_MARK, TERM, Pane, ServerGone, Tmux
from handoff.providers import Launch, Provider, first_message
from handoff.providers.markers import marker
from handoff.providers.screen import DIALOG, READY, Reading, holds
from handoff.record.store import atomic_write, private_dir

#: what a pane started with no brief (a warm reviewer, handoff.loop.crew) works on
WARM = "warm: waiting for its brief"

ORCHESTRATOR_WINDOW = "orchestrator"


def session_name(ticket: str, repo_key: str) -> str:
    """Unique per repo (two repos may share a ticket id). tmux forbids '.' in names; '+' is
    not allowed in ticket ids, so REL.1 and REL_1 stay apart."""
    return f"{ticket}-{repo_key.rsplit('-', 1)[-1][:6]}".replace(".", "+")


def allowlisted_env(extra: dict[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """Only the variables a peer needs: no tokens it was not explicitly given, and never a
    coding CLI's session marker (handoff.providers.markers), whoever allowed it."""
    names = (*BASE_ENV, *allow)
    env = {name: os.environ[name] for name in names
           if name in os.environ and marker(name) is None}
    env.update(extra)
    env["TERM"] = TERM
    return env


#: a launch's environment file left this long was never used (tmux failed to start it)
LAUNCH_FILE_AGE = 600.0


def with_env(env: dict[str, str], argv: Sequence[str], home: Path, nice: int = 0,
             bounds: Mapping[str, object] | None = None, owner: str = "",
             hold: Mapping[str, str] | None = None) -> list[str]:
    """argv run under exactly env (tmux would otherwise add its server's whole environment),
    with nothing on the command line: env and argv go into a 0600 file under home/.launch that
    the launcher reads, deletes and replaces itself by argv (handoff.machinery.launcher), at
    niceness nice (launcher.yield_cpu), held to bounds (launcher.bound: a plan of
    handoff.machinery.limits) before it execs. owner: the ticket's session, in the file's name
    (`forget_launches`); hold: a file of the queue the program keeps locked while it lives
    (launcher.hold_slot)."""
    folder = private_dir(home / ".launch")
    _drop_stale(folder)
    handle, path = tempfile.mkstemp(dir=folder, prefix=_prefix(owner), suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as out:  # mkstemp: mode 0600
        json.dump({"env": env, "argv": list(argv), "nice": nice,
                   **({"bounds": dict(bounds)} if bounds else {}),
                   **({"hold": dict(hold)} if hold else {})}, out)
    return [sys.executable, "-I", "-S", str(Path(launcher.__file__)), path]


def _prefix(owner: str) -> str:
    return f"env-{owner}-" if OWNER.fullmatch(owner) else "env-"


#: what a launch file's name may carry of its owner (a session name: handoff makes them)
OWNER = re.compile(r"[A-Za-z0-9_+-]{1,80}")


def forget_launches(home: Path, owner: str) -> int:
    """The launch files of owner's windows that no launcher read (a window ended before it
    started): removed with the environment they hold, since its session is gone. How many."""
    if not OWNER.fullmatch(owner):
        return 0
    gone = 0
    with contextlib.suppress(OSError), os.scandir(home / ".launch") as entries:
        for entry in entries:
            if entry.name.startswith(_prefix(owner)) and entry.name.endswith(".json") and \
                    entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    gone += 1
    return gone


def _drop_stale(folder: Path) -> None:
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime > LAUNCH_FILE_AGE:
                    os.unlink(entry.path)


@dataclass(frozen=True)
class Delivery:
    taken: bool
    why: str

    def __bool__(self) -> bool:
        return self.taken


@dataclass(frozen=True)
class Peers:
    tmux: Tmux
    session: str
    ticket_dir: Path
    #: how far the peers yield the CPU (handoff.config's peer_nice)
    nice: int = 0

    def ensure_session(self, cwd: Path, orchestrator_argv: Sequence[str]) -> bool:
        """The ticket's session with its orchestrator window, created once; True when it was
        created now (on a new server, if the old one was gone)."""
        if self.tmux.has_session(self.session):
            return False
        self.tmux.new_session(self.session, ORCHESTRATOR_WINDOW, orchestrator_argv, cwd)
        return True

    def look(self, role: str) -> Pane | None:
        """The role's pane; None when it or the session is gone. ServerGone when the whole
        server is, TmuxFailure when tmux does not answer: neither is the peer's death."""
        return self.tmux.panes(self.session).get(role)

    def pane(self, role: str) -> Pane | None:
        """The role's pane, None when there is none (the server gone included)."""
        try:
            return self.look(role)
        except ServerGone:
            return None

    def launch(self, provider: Provider, launch: Launch, env: dict[str, str],
               fence: Callable[[list[str]], list[str]] | None = None,
               bounds: Mapping[str, object] | None = None,
               hold: Mapping[str, str] | None = None) -> str:
        """Start the role's CLI fresh on launch.brief, replacing whatever ran in its window
        (fence: what puts its command line in the sandbox, when it runs in one; bounds: the
        limits it is held to, handoff.machinery.limits)."""
        mark = {reaper.MARKER: reaper.marker(self.ticket_dir, launch.role)}
        program = provider.argv(launch)
        argv = with_env({**env, **provider.env(launch), **mark},
                        fence(program) if fence is not None else program,
                        self.tmux.config.parent, self.nice, bounds, owner=self.session,
                        hold=hold)
        pane = self.pane(launch.role)
        # the old CLI and whatever it left running, also when its window or server went away
        # under it: two of them must never work in one worktree
        self.reap(launch.role)
        if pane is None:
            pane_id = self.tmux.new_window(self.session, launch.role, argv, launch.worktree,
                                           self.nice)
        else:
            self.tmux.respawn(pane.id, argv, launch.worktree)
            pane_id = pane.id
        self.tmux.mark_pane_with(pane_id, {
            MARK: str(launch.brief) if launch.brief is not None else WARM,
            **({SESSION_MARK: launch.session_id} if launch.session_id else {})})
        return pane_id

    def session_of(self, role: str) -> str:
        """The session id the role's CLI was started with ('' when none was given)."""
        pane = self.pane(role)
        return pane.session_mark if pane is not None else ""

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
        """The brief the role's live process was last given ('' when none is running; WARM
        for one started with none, waiting for its brief)."""
        pane = self.pane(role)
        return pane.mark if pane is not None and not pane.dead else ""

    def leave(self, provider: Provider, role: str, wait: float = 3.0) -> bool:
        """Ask an idle CLI to exit by itself (its session saved, its resume line and usage on
        screen for the transcript); False when it is busy, holds a draft, or does not go."""
        return role in self.leave_all({role: provider}, wait)

    def leave_all(self, providers: Mapping[str, Provider], wait: float = 3.0) -> list[str]:
        """`leave` for several peers at once (a team's reviewers): each idle one is asked, then
        all are waited for together, at most wait seconds in all; the roles that left."""
        asked: dict[str, tuple[str, tuple[str, ...]]] = {}
        for role, provider in providers.items():
            pane = self.pane(role)
            if not provider.exit_keys or pane is None or pane.dead:
                continue
            reading = provider.read(self.tmux.screen(pane.id))
            if reading.state != READY or reading.draft:
                continue
            asked[role] = (pane.id, provider.exit_keys)
        # the same key to every one of them, then one pause for their TUIs to take it: a
        # team leaves in the time one peer does (a pause per key per peer, and one after the
        # last key, was 0.8 s of a two-peer ticket's 3.3 s: bench floor)
        presses = max((len(keys) for _, keys in asked.values()), default=0)
        pause = max((providers[role].exit_pause for role in asked), default=0.0)
        for i in range(presses):
            for pane_id, keys in asked.values():
                if i < len(keys):
                    self.tmux.send_key(pane_id, keys[i])
            if i < presses - 1 and pause:
                time.sleep(pause)

        def gone(role: str) -> bool:
            pane = self.pane(role)
            return pane is None or pane.dead

        poll(lambda: all(gone(role) for role in asked), wait if asked else 0.0)
        return [role for role in asked if gone(role)]

    def retire(self, role: str, transcript: Path) -> bool:
        """Save the role's transcript and end its process and window; False when none ran."""
        pane = self.pane(role)
        if pane is None:
            return False
        atomic_write(transcript, self.tmux.capture(pane.id) + "\n")
        self.tmux.kill_pane(pane.id)
        self.reap(role)
        return True

    def reap(self, role: str = "") -> list[int]:
        """End what the role's CLI (every role's, without one) left running past its pane."""
        return reaper.reap(reaper.marker(self.ticket_dir, role) if role
                           else f"{self.ticket_dir}#")

    def capture(self, role: str, path: Path) -> bool:
        """Save the role's whole pane history to path; False when there is no such pane."""
        pane = self.pane(role)
        if pane is None:
            return False
        atomic_write(path, self.tmux.capture(pane.id) + "\n")
        return True

    def deliver(self, provider: Provider, role: str, message: str, tries: int = 3,
                wait: float = 5.0) -> Delivery:
        """Paste message into the role's input line and check it was taken; bounded retries.

        Enter is re-sent only while our own text still sits in the input line; a person's
        draft is never submitted by us, and nothing is ever typed into a dialog. Exactly once:
        once pasted, a message whose input line is empty again while the screen moved on was
        taken (whether or not the provider's rules read the CLI's echo of it), and is never
        pasted a second time; only a paste that never landed (nothing changed) is repeated.
        """
        before: str | None = None  # the screen as it was when we pasted
        for _ in range(tries):
            pane = self.pane(role)
            if pane is None or pane.dead:
                return Delivery(False, "the peer is not running")
            if provider.taken(self.tmux.tail(pane.id), message):
                return Delivery(True, "taken")
            screen = self.tmux.screen(pane.id)
            reading = provider.read(screen)
            if reading.state == DIALOG:
                return Delivery(False, f"the peer shows a dialog: {reading.says()}")
            if holds(reading.draft, message):
                self.tmux.send_enter(pane.id)
            elif reading.draft:
                return Delivery(False, f"a draft sits in the peer's input line: "
                                f"{reading.draft[:80]!r}")
            elif before is not None and reading.draft == "" and screen != before:
                return Delivery(True, "taken: it left the input line and the screen moved on")
            else:
                before = screen
                self.tmux.paste(pane.id, message, provider.enter_delay)
            if self._wait_taken(provider, pane.id, message, wait):
                return Delivery(True, "taken")
        return Delivery(False, f"not taken after {tries} tries")

    def _wait_taken(self, provider: Provider, pane: str, message: str, wait: float) -> bool:
        return poll(lambda: provider.taken(self.tmux.tail(pane), message), wait)

    def ready(self, provider: Provider, role: str, wait: float) -> Reading | None:
        """Until the role's CLI is at its input line (a warm start is still drawing it), at
        most wait seconds, or until it shows a dialog (which it will not leave by itself):
        None when it is at its input line, else what it shows instead (`Reading("not
        running")` when it runs no longer)."""
        seen = [Reading("not running")]

        def settled() -> bool:
            pane = self.pane(role)
            if pane is None or pane.dead:
                seen[0] = Reading("not running")
                return False
            seen[0] = provider.read(self.tmux.screen(pane.id))
            return seen[0].state == DIALOG or (seen[0].state == READY and not seen[0].draft)
        poll(settled, wait)
        return None if seen[0].state == READY and not seen[0].draft else seen[0]

    def deliver_brief(self, provider: Provider, role: str, brief: Path) -> Delivery:
        """Deliver a brief's nudge and remember on the pane that it works on that brief."""
        delivery = self.deliver(provider, role, first_message(brief))
        pane = self.pane(role)
        if delivery and pane is not None:
            self.tmux.mark_pane(pane.id, str(brief))
        return delivery

    def keys(self, role: str, keys: Sequence[str], pause: float = 0.15) -> bool:
        """Answer a screen: each key as its own press, with a pause for the TUI to redraw."""
        pane = self.pane(role)
        if pane is None or pane.dead:
            return False
        for key in keys:
            self.tmux.send_key(pane.id, key)
            time.sleep(pause)
        return True

    def steady(self, role: str, quiet: float = 0.2, wait: float = 3.0) -> bool:
        """Wait (bounded) until the role's screen stays the same for quiet seconds: a TUI draws
        a dialog a moment before it listens for keys, and a key sent in that moment is lost."""
        last = self.screen(role)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = self.screen(role)
            if now == last:
                return True
            last = now
        return False

    def answer(self, provider: Provider, role: str, keys: Sequence[str], dialog: str) -> bool:
        """Answer the dialog on the role's screen with keys, once it holds still; whether it
        went away."""
        self.steady(role)
        self.keys(role, keys)
        return self.dialog_gone(provider, role, dialog)

    def dialog_gone(self, provider: Provider, role: str, name: str, wait: float = 5.0) -> bool:
        """Wait (bounded) until the role's screen no longer shows dialog name: a TUI redraws a
        moment after a key, and a dialog read twice must not be answered twice."""
        def gone() -> bool:
            screen = self.screen(role)
            dialog = provider.read(screen).dialog if screen is not None else None
            return dialog is None or dialog.name != name
        return poll(gone, wait)

    def screen(self, role: str) -> str | None:
        return self.screen_of(self.pane(role))

    def screen_of(self, pane: Pane | None) -> str | None:
        """The screen of a pane already looked up (one tmux call fewer than `screen`); None
        when there is none, or its process has ended."""
        return None if pane is None or pane.dead else self.tmux.screen(pane.id)

    def stop(self) -> bool:
        stopped = self.tmux.kill_session(self.session)
        self.reap()
        # the peers' cgroups, emptied (handoff.machinery.limits): none is left per ticket
        limits.end_ticket(self.tmux.config.parent, str(self.ticket_dir))
        limits.sweep(self.tmux.config.parent, ticket=str(self.ticket_dir))
        return stopped



#: the first pause between two looks of poll(), and the longest
POLL_FIRST, POLL_MOST = 0.01, 0.05


def poll(check: Callable[[], bool], wait: float) -> bool:
    """check() until it holds or wait seconds pass, looking sooner at first (a TUI answers a
    key or a paste within tens of milliseconds, or takes its time). The looks are at most
    POLL_MOST apart: what is awaited here is on the ticket's path (a warm reviewer reaching
    its input line as the gate passes, a peer leaving), and a look is two tmux calls of about
    2 ms; doubling up to 0.25 s let a warm scripted reviewer's readiness be seen up to 160 ms
    late (bench floor)."""
    deadline, pause = time.monotonic() + wait, POLL_FIRST
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 1.5, POLL_MOST)
    return True


def self_argv(*args: str) -> list[str]:
    """This installation of handoff, runnable from anywhere without activating its venv."""
    return [sys.executable, "-m", "handoff", *args]
