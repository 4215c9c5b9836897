"""The warm process: handoff imported once, a child forked for each command handed to it.

Started by the first relayed command (handoff.machinery.relay) as `python -m handoff.cli.warm`, in
a session of its own, one per HANDOFF_HOME and installation. It takes its lock before anything
else (so twenty commands at once start one), imports what `start`, `resume` and `close` need,
listens on a 0600 socket in $HANDOFF_HOME/.warm, and for each command of its own user forks a
child, which: leaves the warm process's session (a group of its own, as a command run from a
shell has), takes the command's stdin, stdout and stderr, working directory and environment,
says its pid, runs `handoff.cli.entry.run` on the command line, and says its exit status. The
warm process itself runs no command and starts no thread: a fork copies a process with
nothing half done.

It ends by itself when nobody asked anything of it for IDLE seconds, when its socket or its
HANDOFF_HOME is gone, or when a file of handoff's code changed since it loaded it (an upgrade,
an edit): that command, and every later one until a new warm process is up, runs on its own.
Its children are not its work: they run on when it ends, as any command does when the shell
that started it exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import shlex
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

import setproctitle

from handoff.machinery import relay
from handoff.machinery.launcher import yield_cpu
from handoff.record.address import Address
from handoff.record.store import atomic_write

#: a warm process nobody asked anything of for this long ends (a command's child does not count)
IDLE = 900.0
#: how often an idle warm process looks whether its socket, its home and its code are its own
CHECK = 2.0
#: how long a child waits for the command that connected to send it
READ_TIMEOUT = 5.0
#: every command runs at least this nice (its own niceness if more): twenty commands at once
#: would otherwise keep the warm process from forking the last of them while the first ones
#: run (measured with `python -m bench crowd`: docs/performance.md)
COMMAND_NICE = 3
#: what `start`, `resume` and `close` import: loaded here once, in every child for free. The
#: last line is what an orchestrator and `close` imported on first use in each child (a child's
#: new modules, listed): psutil, the final report's renderer, and what reads the role files
PRELOADED = ("handoff.cli.app", "handoff.cli.crash", "handoff.operations.create",
             "handoff.operations.resume", "handoff.operations.closing",
             "handoff.operations.tending", "handoff.loop.orchestrator",
             "handoff.operations.doctor", "handoff.operations.standing", "handoff.machinery.gitcmd",
             "psutil", "handoff.operations.render", "handoff.roles", "importlib.resources.readers",
             "zipfile")


Stamp = tuple[tuple[str, int, int], ...]


def code_files(package: Path) -> list[Path]:
    return sorted(package.rglob("*.py"))


def stamp(files: Sequence[Path]) -> Stamp:
    """What the code on disk is: each file's path, modification time and size (an upgrade or
    an edit changes one of them; a vanished file reads as changed)."""
    found = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            found.append((str(path), -1, -1))
            continue
        found.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(found)


def main() -> int:
    where = relay.folder(os.environ["HANDOFF_HOME"])
    name = relay.key()
    lock = os.open(os.path.join(where, f"{name}.lock"),
                   os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another one runs, or is starting
    package = Path(__file__).resolve().parent.parent
    files = code_files(package)
    loaded = stamp(files)
    # listening before the imports: the commands that started it connect at once and wait in
    # the backlog, rather than poll for the socket while the imports take the cores
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with Address(where, f"{name}.sock") as address:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address.path)  # a dead warm process's: the lock says none other runs
        listener.bind(address.path)
        os.chmod(address.path, 0o600)
        mine = os.stat(address.path).st_ino
        listener.listen(128)
    import importlib

    for module in PRELOADED:
        importlib.import_module(module)
    from handoff.cli import app
    from handoff.machinery import sandbox, tools

    app.command()  # typer's click command, built once for every child
    tools.problems()  # git's and tmux's versions, asked once for every child
    sandbox.support()  # bubblewrap's probe, run again by a child only if what decides it changed
    pid_file = Path(where) / f"{name}.pid"
    atomic_write(pid_file, f"{os.getpid()}\n")  # 0600, as everything under the home
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    signal.signal(signal.SIGTERM, _leave)  # `relay.end`: remove the socket on the way out
    gc.collect()
    gc.freeze()  # what is loaded now is never collected: its pages stay shared with children
    try:
        serve(listener, lock, files, loaded, lambda: _still_ours(where, name, mine))
    finally:
        with Address(where, f"{name}.sock") as address, contextlib.suppress(OSError):
            if os.stat(address.path).st_ino == mine:
                os.unlink(address.path)
        with contextlib.suppress(OSError):
            if pid_file.read_text(encoding="utf-8").strip() == str(os.getpid()):
                pid_file.unlink()
    return 0


def _leave(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _still_ours(where: str, name: str, mine: int) -> bool:
    try:
        with Address(where, f"{name}.sock") as address:
            return os.stat(address.path).st_ino == mine
    except OSError:
        return False


def serve(listener: socket.socket, lock: int, files: Sequence[Path], loaded: Stamp,
          still: Callable[[], bool]) -> None:
    """Fork a child per command until idle, replaced (still() False), or the code changed."""
    listener.settimeout(CHECK)
    last = time.monotonic()
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if time.monotonic() - last > IDLE or not still():
                return
            continue
        last = time.monotonic()
        if not _same_user(conn):
            conn.close()
            continue
        if stamp(files) != loaded:
            with contextlib.suppress(OSError):
                conn.sendall(b"stale\n")
            conn.close()
            return
        pid = os.fork()
        if pid == 0:
            _child(conn, listener, lock)
        conn.close()


def _same_user(conn: socket.socket) -> bool:
    import struct

    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return False
    _, uid, _ = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


def _child(conn: socket.socket, listener: socket.socket, lock: int) -> NoReturn:
    code = 1
    try:
        listener.close()
        os.close(lock)  # never keep the warm process's lock alive after it
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the command waits for its own children
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.setsid()
        request = _receive(conn)
        # its stdio comes with `go`: a command that gave up on us hears nothing of this child,
        # and nothing of it was ever held here
        conn.sendall(b"pid %d\n" % os.getpid())
        conn.settimeout(READ_TIMEOUT)
        fds = _go(conn)
        if fds is None:
            os._exit(0)  # it gave up waiting and runs on its own: never run it twice
        conn.settimeout(None)
        code = _run(conn, request, fds)
    except BaseException as exc:  # nothing may leave a child alive in the warm process's loop
        with contextlib.suppress(Exception):
            sys.stderr.write(f"handoff: the warm process could not run the command: {exc}\n")
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            conn.sendall(b"exit %d\n" % code)
        os._exit(code)


def _receive(conn: socket.socket) -> relay.Request:
    """The request on conn."""
    conn.settimeout(READ_TIMEOUT)
    data = b""
    while b"\n" not in data or len(data) - data.index(b"\n") - 1 < _length(data):
        chunk = conn.recv(relay.REQUEST_LIMIT)
        if not chunk:
            raise ConnectionError("the command hung up before it was sent")
        data += chunk
        if len(data) > relay.REQUEST_LIMIT + 16:
            raise ValueError("the request is too long")
    conn.settimeout(None)
    return relay.Request.decode(data[data.index(b"\n") + 1:])


def _go(conn: socket.socket) -> list[int] | None:
    """The command's `go` and the stdin, stdout and stderr that come with it; None when it
    gave up on us (it hung up, or said anything else)."""
    fds: list[int] = []
    line = b""
    while not line.endswith(b"\n") and len(line) < 16:
        chunk, ancillary, _, _ = conn.recvmsg(16, socket.CMSG_SPACE(3 * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += [int.from_bytes(payload[i:i + 4], sys.byteorder)
                        for i in range(0, len(payload) - len(payload) % 4, 4)]
        if not chunk:
            break
        line += chunk
    if line.strip() != b"go" or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    return fds


def _length(data: bytes) -> int:
    head = data.split(b"\n", 1)[0]
    if not head.isdigit() or int(head) > relay.REQUEST_LIMIT:
        raise ValueError("not a handoff relay request")
    return int(head)


def _run(conn: socket.socket, request: relay.Request, fds: list[int]) -> int:
    # at least COMMAND_NICE, the command's own niceness if more (an orchestrator's window)
    yield_cpu(max(request.nice, COMMAND_NICE))
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        if fd > 2:
            os.close(fd)
    _reopen_streams()
    # what `ps` and `top` show: the command it runs, not the warm process it was forked from
    # (an orchestrator runs for hours; "python -m handoff.cli.warm" tells a person nothing).
    # Before the environment is replaced: setproctitle finds argv's room by the environment
    # the process started with
    setproctitle.setproctitle(shlex.join(["handoff", *(os.fsdecode(a) for a in request.argv)]))
    os.environb.clear()
    os.environb.update(request.env)
    os.chdir(request.cwd)
    argv = [os.fsdecode(a) for a in request.argv]
    sys.argv = [sys.argv[0], *argv]
    # every signal goes to the command's own thread: one the kernel gave this helper thread
    # would leave the command blocked in a read (a prompt) with its Ctrl-C never raised
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        threading.Thread(target=_hang_up_when_gone, args=(conn,), daemon=True).start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    from handoff.cli import entry

    return entry.run(argv, warm=False)


def _reopen_streams() -> None:
    """Python's standard streams as a process of its own would have made them on these fds:
    line-buffered on a terminal (an orchestrator's window shows each event as it happens)."""
    encoding = sys.stdout.encoding or "utf-8"
    sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding=encoding, closefd=False,  # noqa: SIM115
                      buffering=1 if os.isatty(1) else -1)
    sys.stderr = open(2, "w", encoding=encoding, closefd=False,  # noqa: SIM115
                      errors="backslashreplace", buffering=1)


def _hang_up_when_gone(conn: socket.socket) -> None:
    """The command's process is gone (its tmux pane killed, or kill -9): this child is hung up
    on, as a process in that pane would have been."""
    with contextlib.suppress(OSError):
        while conn.recv(64):
            pass
    os.kill(os.getpid(), signal.SIGHUP)


if __name__ == "__main__":
    raise SystemExit(main())
