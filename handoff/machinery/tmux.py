"""Our private tmux server, driven through libtmux: its own socket and config, so the user's own
server is never touched.

One `libtmux.Server` (our subclass, `Server`) owns the socket and config file; panes are
`libtmux.Pane` objects for capture, options (the `@handoff` tag), paste and kill. Targets are
pane ids or exact `=session:` names, never prefixes.

Bounding. libtmux 0.62 runs every tmux client with `Popen.communicate()` and no timeout, and a
tmux server stopped with SIGSTOP then blocks it forever (even killing the client does not help:
the server was handed the client's stdout and still holds the pipe). No released libtmux has a
timeout. We chose to install a bounded runner at the one seam libtmux runs tmux through, the
`tmux_cmd` class, in each module that calls it (`libtmux.common`, `.server`, `.neo`; see `SEAMS`),
rather than a watchdog around each call: a watchdog would leave the stuck thread and its client
behind, while `BoundedCmd` runs the client through `proc.run`, which ends its whole process group
on the timeout, gives up a pipe the stopped server holds, keeps stdin on /dev/null and passes
only the allowlisted `client_env()` (any client call may be the one that starts the server, and
the server keeps the environment it started with for every client on the socket to read).
tests/unit/machinery/test_tmux_stack.py reads the pinned libtmux source and fails when an upgrade runs tmux
from anywhere else (another `tmux_cmd` importer, or a new subprocess call). The runner is
installed process-wide when this module is imported: any libtmux use in handoff's process
(the tests' observer too) is bounded the same way.

A failed call is one of three things, told apart by what tmux says: the session or pane is gone
(an empty answer), the server is gone (`ServerGone`), or tmux failed to answer (`TmuxFailure`,
which says nothing about whether anything is alive).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import libtmux
import libtmux.common
import libtmux.neo
import libtmux.server
from libtmux.exc import LibTmuxException

from handoff.errors import ExternalFailure, MissingTool
from handoff.machinery import proc
from handoff.machinery.launcher import yield_cpu

#: seconds a new pane's program is given to lead a session of its own before it is weighed
SETSID_WAIT = 1.0

DEFAULT_SOCKET = "handoff"
#: seconds one tmux call may take before tmux is said not to answer
TMUX_TIMEOUT = 15.0
#: sets it instead (seconds, up to 600): a swamped machine's tmux may need longer, and a test of
#: a stopped server need not wait the whole default
TIMEOUT_VARIABLE = "HANDOFF_TMUX_TIMEOUT"


def call_timeout() -> float:
    """Seconds one tmux call may take: $HANDOFF_TMUX_TIMEOUT, else TMUX_TIMEOUT."""
    return proc.seconds_from(TIMEOUT_VARIABLE, TMUX_TIMEOUT, most=600.0)


#: what every process on our server starts from: the server itself, the orchestrator in its
#: window and each peer before its provider's own variables are added; never a token. TMUX_TMPDIR
#: is where our socket is: without it a process in a window would start a second server in /tmp.
#: TMUX (set inside a person's own tmux) never passes: it names their server, not ours.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
            "XDG_RUNTIME_DIR", "SHELL", "HANDOFF_HOME", "HANDOFF_TMUX_SOCKET", "TMUX_TMPDIR",
            # the network as this machine reaches it: every coding CLI needs it the same way
            "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "https_proxy", "http_proxy", "no_proxy",
            "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS")

# tmux 3.3a's words on stderr (libtmux's own readers of them are private and miss "Connection
# refused" and "server exited unexpectedly")
GONE = ("can't find session", "can't find window", "can't find pane")
NO_SERVER = ("no server running on", "server exited unexpectedly", "lost server")
NO_SOCKET = ("(No such file or directory)", "(Connection refused)")
WIDTH, HEIGHT = 200, 50
#: the pane option that says what a pane was started for (handoff.machinery.peers)
MARK = "@handoff"
#: the pane option naming the session id its CLI was started with
SESSION_MARK = "@handoff-session"
#: what new-session and new-window print of the pane they made: its id, its program's pid
NEW_PANE = "#{pane_id} #{pane_pid}"
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


def no_shell(argv: Sequence[str]) -> list[str]:
    """argv as tmux must be given it to execute exactly that: tmux runs a lone argument through
    `sh -c` (two or more it executes directly), and takes an argument ending in `;` as the end
    of its command (`a\\;` is its way to say a literal `a;`)."""
    if len(argv) == 1:
        argv = [shutil.which("env") or "/usr/bin/env", argv[0]]
    return [literal(arg) for arg in argv]


def literal(arg: str) -> str:
    """arg as tmux takes it for itself: one ending in `;` would end tmux's command."""
    return arg[:-1] + "\\;" if arg.endswith(";") else arg


class BoundedCmd(libtmux.common.tmux_cmd):
    """libtmux's `tmux_cmd` (same attributes: cmd, returncode, stdout and stderr as lists of
    lines), run through `proc.run`: `call_timeout()`, the client's process group ended on it, stdin
    /dev/null unless input_text is given, and only `client_env()`."""

    def __init__(self, *args: Any, tmux_bin: str | None = None, input_text: str | None = None) -> None:
        resolved = tmux_bin or shutil.which("tmux")
        if resolved is None:
            raise MissingTool("tmux is not installed", "install tmux (e.g. apt-get install -y tmux)")
        self.cmd = [resolved, *(str(arg) for arg in args)]
        timeout = call_timeout()
        try:
            done = proc.run(self.cmd, timeout=timeout, check=False, env=client_env(),
                            input_text=input_text)
        except ExternalFailure:  # its timeout: the client was killed, the server may live on
            socket = next((arg[2:] for arg in self.cmd if arg.startswith("-L")), "?")
            verb = next((arg for arg in self.cmd[1:] if not arg.startswith("-")), "?")
            raise TmuxFailure(
                f"tmux {verb} on socket {socket} did not answer within {timeout:g}s",
                f"the tmux server may be stopped or overloaded: look at it with 'tmux -L "
                f"{socket} list-sessions'") from None
        self.returncode = done.returncode
        stdout = done.stdout.split("\n")
        while stdout and stdout[-1] == "":  # as libtmux does: no trailing empty lines
            stdout.pop()
        self.stderr = [line for line in done.stderr.split("\n") if line]
        # libtmux's own quirk, kept so its has_session reads the same through us
        self.stdout = [self.stderr[0]] if "has-session" in self.cmd and self.stderr and not stdout else stdout

    @property
    def said(self) -> str:
        """What tmux printed on stderr, or its exit status when it printed nothing."""
        return "\n".join(self.stderr) or f"exit {self.returncode}"

    @property
    def text(self) -> str:
        return "\n".join(self.stdout)


#: every module of the pinned libtmux that runs tmux, each through its own `tmux_cmd` name
#: (tests/unit/machinery/test_tmux_stack.py checks this against the installed source)
SEAMS: tuple[ModuleType, ...] = (libtmux.common, libtmux.server, libtmux.neo)


def install_bounded_runner() -> None:
    """Every tmux client libtmux starts, in this process, is a `BoundedCmd`."""
    for module in SEAMS:
        setattr(module, "tmux_cmd", BoundedCmd)  # noqa: B010  (mypy: a module attribute)


install_bounded_runner()


class Server(libtmux.Server):
    """libtmux's server on our socket and config file, which every command writes first; `feed`
    gives a command stdin, which libtmux's `cmd` cannot (load-buffer from `-`: a brief is too
    long for an argument tmux accepts)."""

    def cmd(self, cmd: str, *args: Any, target: str | int | None = None) -> libtmux.common.tmux_cmd:
        self.write_config()
        return super().cmd(cmd, *args, target=target)

    def feed(self, cmd: str, *args: str, input_text: str) -> BoundedCmd:
        """cmd with input_text on its stdin, built as libtmux's `cmd` builds its arguments."""
        self.write_config()
        return BoundedCmd(f"-f{self.config_file}", f"-L{self.socket_name}", cmd, *args,
                          tmux_bin=self.tmux_bin, input_text=input_text)

    def write_config(self) -> None:
        """Our config, whatever left there: any call may be the one that starts the server."""
        config = Path(str(self.config_file))
        if not config.exists() or config.read_text(encoding="utf-8") != CONFIG:
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text(CONFIG, encoding="utf-8")


@dataclass(frozen=True)
class Pane:
    id: str
    window: str
    dead: bool
    status: int | None
    pid: int
    #: what it was started for (MARK) and its CLI's session id (SESSION_MARK), read with the
    #: listing itself: a show-options per look was 20 tmux calls of a ticket (bench floor)
    mark: str = ""
    session_mark: str = ""


class Tmux:
    def __init__(self, socket: str, config_dir: Path) -> None:
        self.socket = socket
        self.config = config_dir / "tmux.conf"
        self._binary = shutil.which("tmux")
        self.server = Server(socket_name=socket, config_file=str(self.config), tmux_bin=self._binary)

    def base(self) -> list[str]:
        if self._binary is None:
            raise MissingTool("tmux is not installed", "install tmux (e.g. apt-get install -y tmux)")
        return [self._binary, "-L", self.socket, "-f", str(self.config)]

    def pane(self, pane: str) -> libtmux.Pane:
        """The libtmux object for a pane id, without asking tmux (a fetch would cost a call)."""
        return libtmux.Pane(server=self.server, pane_id=pane)

    def call(self, *args: str, input_text: str | None = None) -> BoundedCmd:
        """One tmux client call, whatever it answers; TmuxFailure when it does not in time."""
        if input_text is not None:
            return self.server.feed(*args, input_text=input_text)
        return cast(BoundedCmd, self.server.cmd(*args))

    def failure(self, args: Sequence[str], said: str) -> ExternalFailure:
        """The exception for a failed call: the server gone, or tmux failing."""
        if failure_kind(said) == "no-server":
            return ServerGone(f"the tmux server on socket {self.socket} is gone ({said})",
                              "'handoff resume TICKET' starts it again with the ticket's session")
        return TmuxFailure(f"tmux {args[0]} failed: {said}")

    def run(self, *args: str, check: bool = True) -> str:
        """stdout of a tmux call. check: raise ServerGone/TmuxFailure when it fails; without
        it a failure answers what tmux printed (usually nothing), but a timeout still raises."""
        result = self.call(*args)
        if check and result.returncode != 0:
            raise self.failure(args, result.said)
        return result.text

    @contextlib.contextmanager
    def checked(self, verb: str) -> Any:
        """A libtmux call whose LibTmuxException (what tmux said) becomes ours."""
        try:
            yield
        except LibTmuxException as exc:
            raise self.failure((verb,), str(exc) or verb) from None

    def attach_argv(self, target: str) -> list[str]:
        return [*self.base(), "attach-session", "-t", target]

    def has_session(self, session: str) -> bool:
        """Whether the session exists; False too when no server runs, TmuxFailure when tmux
        cannot tell. (libtmux's has_session answers False for a failing server too.)"""
        if self._binary is None:
            return False
        args = ("has-session", "-t", f"={session}:")
        result = self.call(*args)
        if result.returncode == 0:
            return True
        if failure_kind(result.said) in ("gone", "no-server"):
            return False
        raise self.failure(args, result.said)

    # new-session/new-window stay commands: libtmux's fetch the new object with a second tmux
    # call, and take the program as one shell string where we run argv directly
    def new_session(self, session: str, window: str, argv: Sequence[str], cwd: Path,
                    nice: int = 0) -> str:
        """Create a detached session whose first window runs argv (directly, no shell)."""
        made = self.new_session_unless_there(session, window, argv, cwd, nice)
        if made is None:
            raise TmuxFailure(f"tmux new-session failed: duplicate session: {session}")
        return made

    def new_session_unless_there(self, session: str, window: str, argv: Sequence[str],
                                 cwd: Path, nice: int = 0) -> str | None:
        """new_session, or None when that session already exists: one tmux call either way,
        where asking first would be two for a new one."""
        return self._create(("new-session", "-d", "-P", "-F", NEW_PANE, "-s", session,
                             "-n", window, "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(cwd),
                             "--", *no_shell(argv)), f"={session}:", nice)

    def new_window(self, session: str, window: str, argv: Sequence[str], cwd: Path,
                   nice: int = 0) -> str:
        made = self._create(("new-window", "-d", "-P", "-F", NEW_PANE, "-t", f"={session}:",
                             "-n", window, "-c", str(cwd), "--", *no_shell(argv)),
                            f"={session}:={window}", nice)
        if made is None:  # new-window never says so; typed for _create's other caller
            raise TmuxFailure(f"tmux new-window failed in {session}")
        return made

    def _create(self, args: Sequence[str], window: str, nice: int) -> str | None:
        """Run a new-session/new-window and pin its window's size (`fix_size`) in the same tmux
        call: one client process for both, not two. Its new pane's id, or None when new-session
        found its session already there.

        nice > 0: the pane's program yields the CPU (launcher.yield_cpu) from here on, not
        only once its own interpreter has started and read its launch file. A pane is a
        session of its own, which Linux weighs as much as the whole session of the command
        that made it (autogroup): twenty starts at once had twenty launchers and orchestrators
        start at full weight beside them (ten crowds of 20, this on in every other one: the
        slowest start 0.81-1.22 s without it, 0.71-0.95 s with it; docs/performance.md)."""
        result = self.call(*args, ";", "resize-window", "-t", window, "-x", str(WIDTH),
                           "-y", str(HEIGHT))
        made = next((line.split() for line in result.stdout if line.startswith("%")), [])
        pane = made[0] if made else ""
        if nice > 0 and len(made) == 2 and made[1].isdigit():
            # tmux makes it the leader of its process group and session: waited for, at most
            # SETSID_WAIT, since under load that comes a little after tmux answers
            yield_cpu(nice, int(made[1]), wait=SETSID_WAIT)
        if not pane:
            if result.said.startswith("duplicate session"):
                return None
            raise self.failure(args, result.said)
        if result.returncode != 0:  # made, but not found by name (another window of it): by id
            self.fix_size(pane)
        return pane

    def fix_size(self, pane: str) -> None:
        """Pin the window at WIDTHxHEIGHT, so a peer's screen reads the same whoever attaches.

        resize-window makes that one window's size manual; the global `window-size manual`
        would do it for all, but tmux 3.3a's server exits on it. (libtmux's Window.resize
        fetches the window first: one call more.)
        """
        self.run("resize-window", "-t", pane, "-x", str(WIDTH), "-y", str(HEIGHT), check=False)

    def respawn(self, pane: str, argv: Sequence[str], cwd: Path) -> None:
        """Kill whatever runs in the pane (its whole process group) and start argv there.

        The old history goes (the caller keeps it as a transcript first): what the pane shows
        is then only ever about the process now running in it.
        """
        argv = no_shell(argv)
        target = self.pane(pane)
        with contextlib.suppress(LibTmuxException):  # a pane already gone fails just below
            target.clear_history()
        # respawn-pane by command: libtmux's Pane.respawn takes one shell string, not argv
        respawned = target.cmd("respawn-pane", "-k", "-c", str(cwd), "--", *argv)
        if respawned.returncode != 0:
            raise self.failure(("respawn-pane",), cast(BoundedCmd, respawned).said)

    def bring_forward(self, pane: str) -> None:
        """Make the pane's window its session's current one: what an attaching client shows."""
        shown = self.pane(pane).cmd("select-window")
        if shown.returncode != 0:
            raise self.failure(("select-window",), cast(BoundedCmd, shown).said)

    def panes(self, session: str) -> dict[str, Pane]:
        """The panes of a session by window name: empty when the session is gone, ServerGone
        when the whole server is, TmuxFailure when tmux fails (which proves nothing dead).

        One list-panes with our format: libtmux's Session.panes is a fetch of every field and
        this runs every half second."""
        args = ("list-panes", "-s", "-t", f"={session}:", "-F",
                "#{session_name}\t#{pane_id}\t#{window_name}\t#{pane_dead}\t"
                f"#{{pane_dead_status}}\t#{{pane_pid}}\t#{{{SESSION_MARK}}}\t#{{{MARK}}}")
        result = self.call(*args)
        if result.returncode != 0:
            if failure_kind(result.said) == "gone":
                return {}
            raise self.failure(args, result.said)
        panes = {}
        for record in _records(result.stdout, f"{session}\t%"):
            parts = record.split("\t", 7)
            # `=name` alone falls back to a prefix match; `=name:` does not, but be sure
            if len(parts) != 8 or parts[0] != session:
                continue
            _, pid, window, dead, status, ppid, session_mark, mark = parts
            panes[window] = Pane(pid, window, dead == "1",
                                 int(status) if status.lstrip("-").isdigit() else None,
                                 int(ppid) if ppid.isdigit() else 0, mark.strip(),
                                 session_mark.strip())
        return panes

    def mark_pane(self, pane: str, value: str, name: str = MARK) -> None:
        """Remember on the pane itself what it was started for (survives our own crash)."""
        self.mark_pane_with(pane, {name: value})

    def mark_pane_with(self, pane: str, marks: Mapping[str, str]) -> None:
        """Several marks on the pane in one tmux call (a launch sets two)."""
        args: list[str] = []
        for name, value in marks.items():
            args += [*([";"] if args else []), "set-option", "-t", pane, "-p", name,
                     literal(value)]
        if args:
            self.run(*args)

    def kill_pane(self, pane: str) -> None:
        with contextlib.suppress(LibTmuxException):  # already gone: what was wanted
            self.pane(pane).kill()

    def capture(self, pane: str) -> str:
        """The pane's whole history and screen, wrapped lines joined."""
        return "\n".join(self.pane(pane).capture_pane(start="-", join_wrapped=True) or [])

    def tail(self, pane: str, lines: int = 200) -> str:
        """The last lines of the pane's history and its screen: enough to see a message that
        scrolled off just after it was taken."""
        return "\n".join(self.pane(pane).capture_pane(start=-lines, join_wrapped=True) or [])

    def screen(self, pane: str) -> str:
        return "\n".join(self.pane(pane).capture_pane(join_wrapped=True) or [])

    def paste(self, pane: str, text: str, enter_delay: float = 0.2) -> None:
        """Bracketed paste of text, then Enter as its own key press after enter_delay.

        A TUI that sees the Enter inside the paste burst keeps it as a newline in the draft
        instead of submitting it; how long a pause it needs is the provider's knowledge.
        """
        buffer = f"handoff-{os.getpid()}-{pane.lstrip('%')}"
        loaded = self.call("load-buffer", "-b", buffer, "-", input_text=text)
        if loaded.returncode != 0:
            raise self.failure(("load-buffer",), loaded.said)
        with self.checked("paste-buffer"):
            self.pane(pane).paste_buffer(buffer_name=buffer, delete_after=True, bracket=True)
        if enter_delay:
            time.sleep(enter_delay)
        self.send_key(pane, "Enter")

    def send_enter(self, pane: str) -> None:
        self.send_key(pane, "Enter")

    def send_key(self, pane: str, key: str) -> None:
        """One key by its tmux name (Down, Enter, C-c); any other word is typed as text.
        (libtmux's send_keys does not check that tmux took the key.)"""
        self.run("send-keys", "-t", pane, key)

    def kill_session(self, session: str) -> bool:
        if not self.has_session(session):
            return False
        with contextlib.suppress(LibTmuxException):  # gone meanwhile: what was wanted
            self.server.kill_session(f"={session}:")  # `=name:`: exact, never libtmux's fnmatch
        self.stop_if_empty()
        return True

    def stop_if_empty(self) -> None:
        """Stop the server when it has no sessions, and remove its socket file. A server that
        cannot be asked is left alone: its socket is how anyone reaches its sessions."""
        if self._binary is None:
            return
        listing = self.call("list-sessions")
        if listing.returncode == 0 and listing.stdout:
            return
        if listing.returncode != 0 and failure_kind(listing.said) != "no-server":
            return
        socket = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / self.socket
        self.call("kill-server")
        socket.unlink(missing_ok=True)


def _records(lines: Sequence[str], start: str) -> list[str]:
    """A listing's lines as records: a line that does not begin one (start) goes on the one
    before, whose last field (a pane's brief mark, a path) held a newline."""
    records: list[str] = []
    for line in lines:
        if line.startswith(start) or not records:
            records.append(line)
        else:
            records[-1] += "\n" + line
    return records
