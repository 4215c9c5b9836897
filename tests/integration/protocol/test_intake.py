"""The orchestrator's intake: `handoff submit` hands a report over a Unix socket and reads the
verdict. Real sockets, real processes; the judge here is a recording function."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from handoff.protocol import intake
from handoff.protocol.intake import Intake, Reply
from tests.conftest import wait_until
from tests.unit.protocol.test_intake import Recorder, ticket_folder


def submit_process(folder: Path, report: Path, *flags: str,
                   env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "handoff", "submit", str(report), "--dir",
                             str(folder), "--role", "implementer", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def serve_until_done(gate: Intake, judge: Recorder,
                     process: subprocess.Popen[str]) -> tuple[str, str]:
    """Serve the intake until the submitting process has its verdict and ends (bounded)."""
    wait_until(lambda: gate.serve(judge) or process.poll() is not None, timeout=30,
               what="the submit process to connect")
    return process.communicate(timeout=30)


def test_a_report_handed_over_gets_the_orchestrators_verdict(tmp_path: Path) -> None:
    folder = ticket_folder(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("the report's text\n")
    judge = Recorder(Reply(str(folder / "impl-report-1.md"), []))
    with Intake(str(folder)) as gate:
        assert (folder / intake.SOCKET).is_socket()
        assert (folder / intake.SOCKET).stat().st_mode & 0o777 == 0o600
        process = submit_process(folder, report, "--round", "1",
                                 env={"HANDOFF_SEAL": "s3cret"})  # an old peer's: not sent
        out, err = serve_until_done(gate, judge, process)
    assert process.returncode == 0, err
    assert f"filed as {folder / 'impl-report-1.md'}" in out
    [request] = judge.requests
    assert (request.role, request.round, request.report, request.file) == (
        "implementer", 1, "the report's text\n", str(report))
    assert not hasattr(request, "seal"), "a submit carries no credential"
    assert request.pid == process.pid, "the kernel's word on who connected"
    assert not (folder / intake.SOCKET).exists(), "closing the intake removes its socket"


def test_every_problem_of_the_verdict_is_printed_and_the_exit_status_is_1(
        tmp_path: Path) -> None:
    folder = ticket_folder(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("x\n")
    judge = Recorder(Reply(None, ["first problem", "second problem"]))
    with Intake(str(folder)) as gate:
        process = submit_process(folder, report)
        _, err = serve_until_done(gate, judge, process)
    assert process.returncode == 1
    assert "NOT accepted (2 problem(s))" in err
    assert "  - first problem" in err and "  - second problem" in err
    assert judge.requests[0].round is None, "no --round: the ticket's current round is meant"



# ---- a client too slow to send its request -------------------------------------------------

TRICKLE = """
import socket, sys, time
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(sys.argv[1])
# one byte at a time, each well within the old per-read timeout, never a whole line; gives up
# after 8 s (so the old, unbounded reading ended too, and a test of it failed, not hung)
deadline = time.monotonic() + 8
try:
    while time.monotonic() < deadline:
        sock.send(b"{")
        time.sleep(0.2)
except OSError:
    pass
"""


def test_a_trickling_client_is_cut_at_its_deadline_while_an_honest_one_is_answered_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "READ_TIMEOUT", 1.5)
    folder = ticket_folder(tmp_path)
    judge = Recorder(Reply("filed.md", []))
    answered: list[tuple[float, bytes]] = []
    with Intake(str(folder)) as gate, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as honest:
        trickler = subprocess.Popen([sys.executable, "-c", TRICKLE, str(folder / intake.SOCKET)])
        try:
            # it waits in the backlog before the honest peer does: it is accepted first
            wait_until(lambda: select.select([gate.fileno()], [], [], 0)[0], timeout=30,
                       what="the trickling client to connect")
            honest.connect(str(folder / intake.SOCKET))
            honest.sendall(json.dumps({"role": "implementer", "round": 1, "report": "r",
                                       "file": "f"}).encode() + b"\n")
            reader = threading.Thread(target=lambda: answered.append(
                (time.monotonic(), honest.recv(65536))))
            reader.start()
            started = time.monotonic()
            verdicts = gate.serve(judge)
            took = time.monotonic() - started
            reader.join(timeout=30)
            [cut] = gate.cut()
        finally:
            trickler.kill()
            trickler.wait()
    assert [v.filed for v in verdicts] == ["filed.md"] and len(judge.requests) == 1
    [(when, reply)] = answered
    assert json.loads(reply) == {"filed": "filed.md", "problems": []}
    assert when - started < 0.75, \
        f"the honest request waited {when - started:.2f} s behind the trickling one"
    assert 1.4 < took < 3.5, f"serve took {took:.2f} s: the trickling client's deadline is 1.5 s"
    assert cut.pid == trickler.pid, "the kernel's word on who connected"
    assert "within 1.5 s" in cut.why and "bytes" in cut.why
    assert gate.cut() == [], "each cut is told once"


def test_many_silent_clients_hold_serve_for_at_most_twice_the_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(intake, "READ_TIMEOUT", 1.0)
    folder = ticket_folder(tmp_path)
    judge = Recorder(Reply("filed.md", []))
    silent: list[socket.socket] = []
    with Intake(str(folder)) as gate:
        try:
            while len(silent) < 64:  # as many as the kernel queues (the backlog, and one)
                client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                client.setblocking(False)
                silent.append(client)
                try:
                    client.connect(str(folder / intake.SOCKET))
                except BlockingIOError:
                    silent.pop().close()
                    break
            started = time.monotonic()
            assert gate.serve(judge) == []
            took = time.monotonic() - started
            first = gate.cut()
            gate.serve(judge)
            second = gate.cut()
        finally:
            for client in silent:
                client.close()
    assert len(silent) > intake.MAX_CLIENTS, "more than one serve reads at once"
    assert took < 2 * 1.0 + 1.0, f"one serve took {took:.2f} s"
    assert len(first) >= intake.MAX_CLIENTS
    assert len(first) + len(second) == len(silent), "each was cut, at this serve or the next"
    assert all(c.pid == os.getpid() and "sent 0 bytes" in c.why for c in first + second)
    assert judge.requests == []
