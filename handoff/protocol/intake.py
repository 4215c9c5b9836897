"""Where `handoff submit` hands a report to the running orchestrator: a Unix socket in the
ticket directory, one request and one verdict per connection.

A report is judged once, by the process that acts on it. The orchestrator already has the
ticket, the repository and the peers loaded; it checks the report, files it with its receipt,
answers the peer, and takes the report it judged without checking it again. `handoff submit`
itself stays a short stdlib-only process (handoff.cli.filing). It judges a report alone only when
no orchestrator listens (the ticket is stopped); the orchestrator then checks the filed file
as a claim when it resumes, as it does any file a peer can write.

Stdlib only, like handoff.cli.filing, which imports it in every peer's `handoff submit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import time
from collections.abc import Callable
from types import TracebackType

from handoff.phases import awaited
from handoff.record.address import Address
from handoff.role import Kind

#: in a folder of its own, which a sandboxed peer sees as a folder: a resumed orchestrator's
#: new socket is there for a peer that outlived the old one (a socket file bound on its own
#: would stay the old, dead one)
SOCKET = "intake/intake.sock"
#: a report is at most 1 MiB (handoff.inputs.REPORT_LIMIT); JSON may escape each byte to 6
REQUEST_LIMIT = 7 * 1024 * 1024
#: how long a connected peer has to send its whole request: one deadline from its accept, not
#: a wait per read (a client trickling a byte every few seconds held the loop for minutes)
READ_TIMEOUT = 5.0
#: connections read at once; more wait in the socket's backlog for the next `serve`
MAX_CLIENTS = 16


def refusal(phase: str, current: int, role: str, n: int, kind: Kind) -> str:
    """Why the report of role (of this kind) for round n cannot be taken while the ticket is
    in phase and round current; '' when it can."""
    if n != current:
        return (f"this report is for round {n}, but the ticket is in round {current}; "
                "read your newest brief")
    if phase != awaited(kind):
        return f"the ticket is {phase}, not waiting for the {role}'s report"
    return ""


class Request:
    """What a peer's `handoff submit` hands over. (Plain classes here, not dataclasses: the
    peer's process would import `dataclasses` and `typing`, most of its start-up.) It carries
    no credential: who sent it is what the kernel says (pid), judged by the orchestrator
    (handoff.loop.filer)."""

    __slots__ = ("file", "pid", "report", "role", "round")

    def __init__(self, role: str, round_: int | None, report: str, file: str, pid: int) -> None:
        self.role = role
        self.round = round_
        self.report = report  # the report's text, read by the peer's process
        self.file = file  # the draft it was read from, for messages
        self.pid = pid  # the submitting process, from the kernel (SO_PEERCRED); 0 unknown

    @classmethod
    def from_json(cls, data: object, pid: int) -> Request:
        if not isinstance(data, dict):
            raise ValueError("not an object")
        role, round_, report = data.get("role"), data.get("round"), data.get("report")
        file = data.get("file", "")
        if not (isinstance(role, str) and isinstance(report, str) and isinstance(file, str)
                and (round_ is None or (isinstance(round_, int) and not isinstance(round_, bool)))):
            raise ValueError("a field is missing or of the wrong type")
        return cls(role, round_, report, file, pid)


class Reply:
    __slots__ = ("filed", "problems")

    def __init__(self, filed: str | None, problems: list[str]) -> None:
        self.filed = filed  # the report's path in the ticket directory, when accepted
        self.problems = problems

    def to_json(self) -> bytes:
        return json.dumps({"filed": self.filed, "problems": self.problems}).encode() + b"\n"


Judge = Callable[[Request], Reply]


class Cut:
    """A connection `serve` closed unjudged: its client did not send its whole request within
    READ_TIMEOUT of being accepted."""

    __slots__ = ("pid", "why")

    def __init__(self, pid: int, why: str) -> None:
        self.pid = pid  # the connected process, from the kernel (SO_PEERCRED); 0 unknown
        self.why = why


class Intake:
    """The orchestrator's listening socket (non-blocking): `fileno()` is readable when a peer
    has connected; `serve(judge)` answers every peer waiting; `cut()` names those it closed
    for being too slow."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._sock: socket.socket | None = None
        self._cut: list[Cut] = []
        self.error = ""

    def open(self) -> Intake:
        """Listen; a socket file left by an orchestrator that died is replaced (the ticket lock,
        held by the caller, means no other orchestrator listens here). Where it cannot listen,
        `error` says why, and no report can be filed until one listens."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(os.path.join(self.folder, os.path.dirname(SOCKET)), 0o700)
        with Address(self.folder, SOCKET) as address:
            _unlink(address.path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(address.path)
                os.chmod(address.path, 0o600)
                sock.listen(16)
                sock.setblocking(False)
            except OSError as exc:
                sock.close()
                self.error = f"cannot listen at {address.path}: {exc.strerror or exc}"
                return self
        self._sock = sock
        return self

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    def serve(self, judge: Judge) -> list[Reply]:
        """Answer every peer waiting now (none: an empty list), each as soon as its whole
        request is in. A request that cannot be read gets its problem as the verdict; a peer
        that hung up before the verdict gets none, and nothing it sent is filed (see
        `_judge_if_waiting`).

        It never waits on one client: those it accepted are read side by side, each with
        READ_TIMEOUT from its accept to send its whole request; one that does not is closed and
        kept for `cut()`. New connections are taken for READ_TIMEOUT, so one call returns
        within twice that (and the judging) whatever the clients do; later ones wait in the
        backlog, whose readiness wakes the orchestrator again."""
        verdicts: list[Reply] = []
        if self._sock is None:
            return verdicts
        clients: list[_Client] = []
        taking_until = time.monotonic() + READ_TIMEOUT
        try:
            while True:
                taking = time.monotonic() < taking_until and len(clients) < MAX_CLIENTS
                if taking:
                    self._take(clients, verdicts)
                for client in list(clients):
                    finished = self._progress(client, judge, verdicts)
                    if finished:
                        clients.remove(client)
                        client.conn.close()
                if not clients:
                    return verdicts
                _wait(clients, self._sock if taking else None)
        finally:
            for client in clients:
                client.conn.close()

    def cut(self) -> list[Cut]:
        """The connections `serve` closed for being too slow since the last call."""
        cut, self._cut = self._cut, []
        return cut

    def _take(self, clients: list[_Client], verdicts: list[Reply]) -> None:
        """Accept what waits, up to MAX_CLIENTS in all; a process of another user is answered
        at once."""
        assert self._sock is not None
        while len(clients) < MAX_CLIENTS:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            try:
                uid, pid = _peer(conn)
            except OSError:
                conn.close()
                continue
            if uid is not None and uid != os.getuid():
                verdict = Reply(None, [f"the submitting process runs as uid {uid}, not as the "
                                         "ticket's owner"])
                with conn:
                    try:
                        _send(conn, verdict)
                    except OSError:  # it hung up: nobody to answer
                        continue
                verdicts.append(verdict)
                continue
            clients.append(_Client(conn, pid, time.monotonic() + READ_TIMEOUT))

    def _progress(self, client: _Client, judge: Judge, verdicts: list[Reply]) -> bool:
        """Read what client sent since; answer it once its request is whole, cut it once its
        time is up. True when it is done with."""
        try:
            done = _read_line(client)
        except OSError:  # it hung up hard: nobody to answer
            return True
        if done:
            verdict = _answer(client, judge)
            if verdict is not None:
                verdicts.append(verdict)
            return True
        if time.monotonic() < client.deadline:
            return False
        why = (f"sent {client.size} bytes but not a whole request within {READ_TIMEOUT:g} s "
               "of connecting: closed unjudged")
        self._cut.append(Cut(client.pid, why))
        # best effort, never waiting: a real `handoff submit` that was merely slow says why
        _send(client.conn, Reply(None, [f"the request did not reach the orchestrator whole "
                                          f"within {READ_TIMEOUT:g} s; nothing was filed"]),
              wait=False)
        return True

    def close(self) -> None:
        if self._sock is None:
            return
        self._sock.close()
        self._sock = None
        with Address(self.folder, SOCKET) as address:
            _unlink(address.path)

    def __enter__(self) -> Intake:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class _Client:
    """A connection being read: what it sent so far, and when its time is up."""

    __slots__ = ("chunks", "conn", "deadline", "line", "pid", "size")

    def __init__(self, conn: socket.socket, pid: int, deadline: float) -> None:
        self.conn = conn
        self.pid = pid
        self.deadline = deadline
        self.chunks: list[bytes] = []
        self.size = 0
        self.line: bytes | None = None  # the whole request, once read


def _answer(client: _Client, judge: Judge) -> Reply | None:
    """Judge client's request (`line`; None: cut short or too large) and send the verdict;
    None when there is nobody to answer."""
    verdict = _judge_if_waiting(client.conn, client.line, client.pid, judge)
    if verdict is not None:
        try:
            _send(client.conn, verdict)
        except OSError:  # it hung up meanwhile
            return None
    return verdict


def _send(conn: socket.socket, verdict: Reply, wait: bool = True) -> None:
    """A verdict is a few hundred bytes, taken by the socket's buffer at once; a client that
    reads nothing is still given up on after READ_TIMEOUT. wait=False: only what the buffer
    takes now, errors ignored."""
    if not wait:
        with contextlib.suppress(OSError):
            conn.send(verdict.to_json())
        return
    conn.settimeout(READ_TIMEOUT)
    try:
        conn.sendall(verdict.to_json())
    finally:
        conn.setblocking(False)


def _judge_if_waiting(conn: socket.socket, line: bytes | None, pid: int,
                      judge: Judge) -> Reply | None:
    if line is None:
        return Reply(None, ["the request to the orchestrator was cut short or too large"])
    try:
        request = Request.from_json(json.loads(line), pid)
    except ValueError as exc:
        return Reply(None, [f"the request to the orchestrator is malformed ({exc})"])
    if _hung_up(conn):
        # the peer gave up waiting (it says so, and that nothing was filed): keep it true
        return None
    return judge(request)


def _read_line(client: _Client) -> bool:
    """Take what client has sent since, without waiting. True once it is done: its request
    line whole in `client.line`, or None there when it ended (hung up) before one or sent more
    than REQUEST_LIMIT."""
    while True:
        try:
            chunk = client.conn.recv(65536)
        except (BlockingIOError, InterruptedError):
            return False
        if not chunk:
            return True
        newline = chunk.find(b"\n")
        if newline >= 0:
            client.chunks.append(chunk[:newline])
            client.line = b"".join(client.chunks)
            return True
        client.chunks.append(chunk)
        client.size += len(chunk)
        if client.size > REQUEST_LIMIT:
            return True


def _wait(clients: list[_Client], listening: socket.socket | None) -> None:
    """Until a client sends, a new one connects (when listening is given), or the first
    client's time is up."""
    poller = select.poll()
    for client in clients:
        poller.register(client.conn, select.POLLIN)
    if listening is not None:
        poller.register(listening, select.POLLIN)
    due = min(client.deadline for client in clients) - time.monotonic()
    with contextlib.suppress(InterruptedError):
        poller.poll(max(0, int(due * 1000) + 1))


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _hung_up(conn: socket.socket) -> bool:
    timeout = conn.gettimeout()
    conn.setblocking(False)  # with a timeout, recv would first wait for data up to it
    try:
        return conn.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    finally:
        conn.settimeout(timeout)


def _peer(conn: socket.socket) -> tuple[int | None, int]:
    """The connected process's uid and pid, where the kernel tells them (Linux)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None, 0
    import struct

    pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option,
                                                      struct.calcsize("3i")))
    return uid, pid
