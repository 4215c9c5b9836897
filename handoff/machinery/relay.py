"""Hand a command to the warm process (handoff.cli.warm) instead of loading handoff here.

A full `handoff start` spends about 0.3 s of CPU importing typer, libtmux, GitPython and
PyYAML before it does 30 ms of work, and so does the orchestrator each ticket runs in its tmux
window. Twenty tickets started at once are twenty of each on the cores their peers need. The
warm process has all of it imported once; this client, standard library only, passes it the
command line, the environment and the working directory, and the warm process forks a child
that says its pid; only then does this client send it `go` with its own stdin, stdout and
stderr (SCM_RIGHTS), and the child runs the command on them exactly as this process would
have (handoff.cli.entry.run) and sends back its exit status. A stopped or stuck warm process
(no pid) is given up on, said, and the command runs here: it was never handed our output.

What stays exactly as without it: each command is a process of its own (the orchestrator of a
ticket too: it holds the ticket's lock, `stop` signals it, kill -9 of it is the crash it
always was); its output goes to this terminal; Ctrl-C and every signal sent to this client go
on to it; when this client dies (its tmux pane killed) the child is hung up on, as tmux would.

Only `start`, `resume` and `close` are relayed (the commands a crowd of tickets runs), and the
orchestrator in its tmux window, whose launcher relays it itself; not `--foreground` typed in a
terminal (see `relayable`). `submit` and `status` have lean paths of their own, and the
interactive commands (attach, board, watch) keep their terminal as theirs. Where no warm
process answers, the command starts one and waits for it (READY_WAIT); one that does not come
up leaves the command, and those of the next minute, to run on their own as before.
HANDOFF_WARM=0 turns relaying off.
"""

from __future__ import annotations

# _socket and _signal, not socket and signal: those wrap every constant in an enum, whose import
# alone was a quarter of this client's start (python -X importtime); twenty commands at once
# pay it twenty times on the cores that run them
import _socket
import fcntl
import os
import sys
import time

from handoff.record import starts
from handoff.record.address import Address
from handoff.record.home import state_home_path

TYPE_CHECKING = False  # typing's own import is more than a tenth of this client's start
if TYPE_CHECKING:
    import signal as _signal  # the same functions and numbers, typed
    from collections.abc import Callable, Iterator
    from types import FrameType
else:
    import _signal

#: the commands handed to the warm process
RELAYED = frozenset({"start", "resume", "close"})
#: set to 0 (or off, no, false) to run every command in its own process, as before
ENV = "HANDOFF_WARM"
FOLDER = ".warm"
#: how long a command waits for a warm process being started to answer before it runs here
READY_WAIT = 3.0
#: how long a command waits for the warm process's child to say its pid (the warm process
#: imports handoff after it listens: seconds on a busy machine) before it runs here instead
SERVE_WAIT = 30.0
#: how often a command waiting for the warm process's child looks whether it is stopped
LOOK = 0.5
#: a warm process takes its lock first thing: one that holds none this long after it was
#: started has ended (its log, .warm/KEY.log, says why)
LOCK_GRACE = 0.5
#: after a warm process failed to come up, commands run on their own this long before one
#: tries again
RETRY_AFTER = 60.0
#: the signals a person or handoff sends to a command, passed on to the child running it
FORWARDED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1,
             _signal.SIGUSR2, _signal.SIGWINCH)
#: the variables the warm process itself starts with (each command brings its own)
SERVER_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "HANDOFF_HOME",
              "PYTHONPATH", "VIRTUAL_ENV", "XDG_STATE_HOME")


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "no", "false")


def key() -> str:
    """One warm process per interpreter and installation of handoff: two venvs sharing a
    HANDOFF_HOME each have their own, never the other's code. (The files' identities, not a
    hash of their paths: hashlib alone would cost each command a tenth of its start.)"""
    interpreter = os.lstat(sys.executable)  # a venv's own link to a shared interpreter
    package = os.stat(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return (f"{interpreter.st_dev:x}.{interpreter.st_ino:x}-"
            f"{package.st_dev:x}.{package.st_ino:x}")


def folder(home: str) -> str:
    return os.path.join(home, FOLDER)


def relayable(argv: list[str], window: bool = False) -> bool:
    """Whether `handoff ARGV` goes to the warm process. Not with --foreground typed in a
    terminal: an orchestrator run there is that terminal's own process, for its job control
    and for whoever signals it by the pid they started; in its tmux window (window) the
    launcher is the window's process and relays it. Nor a start or resume that may ask its
    person for an approval at this terminal (no --yes, a terminal on stdin): its prompt is
    then that terminal's own process's, so a Ctrl-C reaches the read at once (one forwarded
    to a warm child at its prompt was lost now and then under load: measured, 2 of 3 CI runs)."""
    asks = not window and argv[:1] in (["start"], ["resume"]) and os.isatty(0) \
        and not any(a in ("--yes", "-y") for a in argv[1:])
    return (bool(argv) and argv[0] in RELAYED and enabled() and not asks
            and not any(a in ("--help", "-h") for a in argv[1:])
            and (window or "--foreground" not in argv[1:]))


def relay(argv: list[str], home: str | None = None) -> int | None:
    """Run `handoff ARGV` in a child of the warm process of home (default: the state home);
    its exit status, or None when no warm process could take it (the caller runs it here)."""
    home = home or state_home_path()
    # in flight from now until this process exits (handoff.record.starts), unless it may stop
    # to ask a person to approve its plan: a person's time holds no orchestrator back
    if argv[0] == "start" and ("--yes" in argv or "-y" in argv or not os.isatty(0)):
        starts.mark(home)
    where = folder(home)
    conn = connect(where)
    if conn is None:
        if not start_server(home):
            return None
        conn = _wait_connect(where, READY_WAIT)
        if conn is None:
            _failed(where)
            return None
    try:
        return _talk(conn, argv, where)
    finally:
        conn.close()


def connect(where: str) -> _socket.socket | None:
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        with Address(where, f"{key()}.sock") as address:
            sock.connect(address.path)
    except OSError:  # none there (or one that cannot be reached): the command runs here
        sock.close()
        return None
    return sock


def _wait_connect(where: str, bound: float) -> _socket.socket | None:
    """Connect to the warm process being started, within bound; None when it does not answer
    in time, or ended before it listened (nobody holds its lock after LOCK_GRACE)."""
    started = time.monotonic()
    deadline = started + bound
    while time.monotonic() < deadline:
        conn = connect(where)
        if conn is not None:
            return conn
        if time.monotonic() - started > LOCK_GRACE and not _held(os.path.join(where, key())):
            return None
        time.sleep(0.005)  # it listens within milliseconds of its start (handoff.cli.warm)
    return None


def _held(base: str) -> bool:
    """Whether a warm process holds (or is starting with) the lock of base."""
    try:
        lock = os.open(f"{base}.lock", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(lock)
    return False


def _failed(where: str) -> None:
    """A warm process did not come up (its log says why): no command starts one again for
    RETRY_AFTER seconds, each runs on its own meanwhile."""
    marker = os.path.join(where, f"{key()}.failed")
    try:
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        os.utime(marker)
    except OSError:
        pass


def _failed_lately(base: str) -> bool:
    try:
        return time.time() - os.stat(f"{base}.failed").st_mtime < RETRY_AFTER
    except OSError:
        return False


def start_server(home: str) -> bool:
    """Start a warm process for this installation unless one is starting already (its lock is
    held); True when one is (or may soon be) there to connect to."""
    where = folder(home)
    base = os.path.join(where, key())
    if _failed_lately(base):
        return False
    try:
        os.makedirs(os.path.dirname(home), exist_ok=True)  # not ours: its own modes
        for ours in (home, where):  # the user's alone, whatever the umask
            try:
                os.mkdir(ours, 0o700)
                os.chmod(ours, 0o700)
            except FileExistsError:
                pass
        lock = os.open(f"{base}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True  # held: a warm process runs or is starting
    finally:
        os.close(lock)  # the warm process takes the lock itself, first thing
    env = {name: os.environ[name] for name in SERVER_ENV if name in os.environ}
    env["HANDOFF_HOME"] = home
    import subprocess  # only here: most commands find a warm process running

    try:
        with open(f"{base}.log", "ab") as log:
            os.chmod(f"{base}.log", 0o600)
            subprocess.Popen([sys.executable, "-m", "handoff.cli.warm"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=log, env=env, cwd="/",
                             start_new_session=True, close_fds=True)
    except OSError:
        return False
    return True


def end(home: str | os.PathLike[str]) -> list[int]:
    """End the warm processes of this HANDOFF_HOME (each is asked to with SIGTERM; the commands
    their children run go on); the pids asked."""
    ended: list[int] = []
    where = folder(os.fspath(home))
    try:
        entries = [e for e in os.listdir(where) if e.endswith(".pid")]
    except OSError:
        return ended
    for entry in entries:
        try:
            with open(os.path.join(where, entry), encoding="utf-8") as handle:
                pid = int(handle.read().strip())
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if b"handoff.cli.warm" not in handle.read():
                    continue  # not ours (any more): a pid is never signalled on trust
            os.kill(pid, _signal.SIGTERM)
        except (OSError, ValueError):
            continue
        ended.append(pid)
    return ended


#: what a request starts with: a warm process of another protocol answers nothing to it
PROTOCOL = b"handoff-relay/2"
#: the most a request may be: a command line and an environment
REQUEST_LIMIT = 1 << 20


class Request:
    """A command handed over: its command line, environment, working directory, niceness.

    On the wire (no JSON: its import is a tenth of this client's start): the payload's length
    in decimal and a newline, then NUL-separated bytes: PROTOCOL, cwd, nice, the number of
    arguments, the arguments, and NAME=VALUE for each variable. None of them can hold a NUL:
    the kernel passes each as a C string. Its stdin, stdout and stderr follow with `go`
    (SCM_RIGHTS)."""

    __slots__ = ("argv", "cwd", "env", "nice")

    def __init__(self, argv: list[bytes], env: dict[bytes, bytes], cwd: bytes, nice: int) -> None:
        self.argv, self.env, self.cwd, self.nice = argv, env, cwd, nice

    def encode(self) -> bytes:
        fields = [PROTOCOL, self.cwd, b"%d" % self.nice, b"%d" % len(self.argv), *self.argv,
                  *(name + b"=" + value for name, value in self.env.items())]
        payload = b"\0".join(fields)
        return b"%d\n" % len(payload) + payload

    @classmethod
    def decode(cls, payload: bytes) -> Request:
        """The request in payload (without its length line); ValueError when it is not one."""
        fields = payload.split(b"\0")
        if len(fields) < 4 or fields[0] != PROTOCOL:
            raise ValueError("not a handoff relay request of this version")
        count = int(fields[3])
        argv, variables = fields[4:4 + count], fields[4 + count:]
        if len(argv) != count or not all(b"=" in v for v in variables):
            raise ValueError("a request with its arguments or variables cut short")
        env = dict(v.split(b"=", 1) for v in variables)
        return cls(argv, env, fields[1], int(fields[2]))


def send_request(conn: _socket.socket, argv: list[str]) -> None:
    request = Request([os.fsencode(a) for a in argv], dict(os.environb), os.getcwdb(),
                      os.getpriority(os.PRIO_PROCESS, 0))
    conn.sendall(request.encode())


def send_go(conn: _socket.socket) -> None:
    """`go`, with our stdin, stdout and stderr: only to a child that has said its pid, so a
    warm process that never took the command (stopped, stuck) holds none of them open (a
    pipe reading our output would wait on it)."""
    fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))  # C ints, as the kernel reads
    conn.sendmsg([b"go\n"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])


class _Child:
    """The child running our command, once the warm process has said its pid."""

    def __init__(self) -> None:
        self.pid = 0
        self.pending: list[int] = []

    def forward(self, signum: int, frame: FrameType | None) -> None:
        if self.pid:
            try:  # noqa: SIM105 (contextlib: one more import for every command)
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass  # it has ended: its exit status is on its way
        else:
            self.pending.append(signum)


def _lines(conn: _socket.socket, quiet: Callable[[], bool]) -> Iterator[bytes]:
    """The lines conn sends until it hangs up (its last, unended, included). Each time its
    timeout passes with nothing said, quiet() says whether to stop listening."""
    pending = b""
    while True:
        try:
            chunk = conn.recv(256)
        except TimeoutError:
            if quiet():
                return
            continue
        if not chunk:
            if pending:
                yield pending
            return
        pending += chunk
        *whole, pending = pending.split(b"\n")
        yield from whole


def stopped(where: str) -> int:
    """The warm process's pid when it is stopped (SIGSTOP, a debugger): it takes no command
    until it is continued. 0 when it is not, or cannot be told."""
    try:
        with open(os.path.join(where, f"{key()}.pid"), encoding="utf-8") as handle:
            pid = int(handle.read().strip())
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return 0
    return pid if state in ("T", "t") else 0


def _talk(conn: _socket.socket, argv: list[str], where: str = "") -> int | None:
    """Hand argv over and wait for its exit status, passing on every signal we are sent.

    The warm process's child says `pid N`; the command runs only once we answer `go`, so a
    command we gave up on (no pid within SERVE_WAIT: the warm process is stuck) and run here
    instead never runs twice. Then `exit N`. `stale`: its code is older than ours (it ends
    itself, and the command runs here)."""
    try:
        send_request(conn, argv)
    except OSError:
        return None  # the warm process went away between connect and send: run it here
    child = _Child()
    kept = {signum: _signal.signal(signum, child.forward) for signum in FORWARDED}
    started = time.monotonic()

    def quiet() -> bool:
        """No pid yet: give up on a stopped warm process at once, on any other after
        SERVE_WAIT; never silently."""
        halted = stopped(where) if where else 0
        if halted or time.monotonic() - started >= SERVE_WAIT:
            sys.stderr.write(f"handoff: note: the warm process (pid {halted}) is stopped"
                             if halted else "handoff: note: the warm process did not take "
                             f"this command within {SERVE_WAIT:g}s")
            sys.stderr.write("; it runs in a process of its own\n")
            return True
        return False

    conn.settimeout(LOOK)
    try:
        for line in _lines(conn, quiet):
            word, _, number = line.strip().partition(b" ")
            if word == b"stale" and not child.pid:
                return None
            if word == b"pid" and number.isdigit() and not child.pid:
                send_go(conn)
                conn.settimeout(None)  # the command runs as long as it runs
                child.pid = int(number)
                for signum in child.pending:
                    child.forward(signum, None)
            elif word == b"exit" and number.lstrip(b"-").isdigit():
                return int(number)
    except OSError:  # TimeoutError included: it never said a pid, nothing runs there
        pass
    finally:
        for signum, handler in kept.items():
            _signal.signal(signum, handler)
    if not child.pid:
        return None  # nothing was started: run it here
    sys.stderr.write(f"handoff: the process running this command (pid {child.pid}) ended "
                     "without an exit status (killed?)\n")
    return 1
