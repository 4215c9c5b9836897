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
import socket
from collections.abc import Callable
from types import TracebackType

from handoff.phases import awaited
from handoff.record.address import Address
from handoff.role import Kind

SOCKET = "intake.sock"
#: a report is at most 1 MiB (handoff.inputs.REPORT_LIMIT); JSON may escape each byte to 6
REQUEST_LIMIT = 7 * 1024 * 1024
#: how long the orchestrator waits for a connected peer to send its request
READ_TIMEOUT = 5.0


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
    peer's process would import `dataclasses` and `typing`, most of its start-up.)"""

    __slots__ = ("file", "pid", "report", "role", "round", "seal")

    def __init__(self, role: str, round_: int | None, report: str, seal: str, file: str,
                 pid: int) -> None:
        self.role = role
        self.round = round_
        self.report = report  # the report's text, read by the peer's process
        self.seal = seal  # the submitting process's HANDOFF_SEAL
        self.file = file  # the draft it was read from, for messages
        self.pid = pid  # the submitting process, from the kernel (SO_PEERCRED); 0 unknown

    @classmethod
    def from_json(cls, data: object, pid: int) -> Request:
        if not isinstance(data, dict):
            raise ValueError("not an object")
        role, round_, report = data.get("role"), data.get("round"), data.get("report")
        seal, file = data.get("seal", ""), data.get("file", "")
        if not (isinstance(role, str) and isinstance(report, str) and isinstance(seal, str)
                and isinstance(file, str)
                and (round_ is None or (isinstance(round_, int) and not isinstance(round_, bool)))):
            raise ValueError("a field is missing or of the wrong type")
        return cls(role, round_, report, seal, file, pid)


class Verdict:
    __slots__ = ("filed", "problems")

    def __init__(self, filed: str | None, problems: list[str]) -> None:
        self.filed = filed  # the report's path in the ticket directory, when accepted
        self.problems = problems

    def to_json(self) -> bytes:
        return json.dumps({"filed": self.filed, "problems": self.problems}).encode() + b"\n"


Judge = Callable[[Request], Verdict]


class Intake:
    """The orchestrator's listening socket (non-blocking): `fileno()` is readable when a peer
    has connected; `serve(judge)` answers every peer waiting, one after the other."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._sock: socket.socket | None = None
        self.error = ""

    def open(self) -> Intake:
        """Listen; a socket file left by an orchestrator that died is replaced (the ticket lock,
        held by the caller, means no other orchestrator listens here). Where it cannot listen,
        `error` says why and peers' `handoff submit` judges reports itself."""
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

    def serve(self, judge: Judge) -> list[Verdict]:
        """Answer every peer waiting now (none: an empty list). A request that cannot be read
        gets its problem as the verdict; a peer that hung up before the verdict gets none, and
        nothing it sent is filed (see `_judge_if_waiting`)."""
        verdicts: list[Verdict] = []
        while self._sock is not None:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                break
            with conn:
                verdict = _answer(conn, judge)
                if verdict is not None:
                    verdicts.append(verdict)
        return verdicts

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


def _answer(conn: socket.socket, judge: Judge) -> Verdict | None:
    conn.setblocking(True)
    conn.settimeout(READ_TIMEOUT)
    try:
        uid, pid = _peer(conn)
        verdict: Verdict | None
        if uid is not None and uid != os.getuid():
            verdict = Verdict(None, [f"the submitting process runs as uid {uid}, not as "
                                     "the ticket's owner"])
        else:
            line = _read_line(conn)
            verdict = _judge_if_waiting(conn, line, pid, judge)
        if verdict is not None:
            conn.sendall(verdict.to_json())
        return verdict
    except OSError:  # it hung up, or sent nothing in time: nobody to answer
        return None


def _judge_if_waiting(conn: socket.socket, line: bytes | None, pid: int,
                      judge: Judge) -> Verdict | None:
    if line is None:
        return Verdict(None, ["the request to the orchestrator was cut short or too large"])
    try:
        request = Request.from_json(json.loads(line), pid)
    except ValueError as exc:
        return Verdict(None, [f"the request to the orchestrator is malformed ({exc})"])
    if _hung_up(conn):
        # the peer gave up waiting (it says so, and that nothing was filed): keep it true
        return None
    return judge(request)


def _read_line(conn: socket.socket) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline >= 0:
            chunks.append(chunk[:newline])
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > REQUEST_LIMIT:
            return None


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
