"""handoff.cli.filing: `handoff submit` as a peer runs it: the flags or the peer's environment
say where, the ticket's state refuses a report out of turn at once, the report is handed to the
orchestrator over its socket and its verdict printed. Real sockets; the orchestrator's side is
handoff.protocol.intake (tests/unit/protocol/test_intake.py), or a plain listener here."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from handoff.cli import filing
from handoff.errors import HandoffError, UsageError
from handoff.inputs import REPORT_LIMIT
from handoff.protocol import intake
from handoff.protocol.intake import Intake
from tests.unit.protocol.test_intake import ticket_folder


def answering(folder: Path, reply: bytes) -> Callable[[], None]:
    """A listener on the ticket's socket that reads one request and answers reply, in a
    thread; the returned function waits for it."""
    (folder / intake.SOCKET).parent.mkdir(exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / intake.SOCKET))
    listener.listen(1)

    def serve() -> None:
        with listener, listener.accept()[0] as conn:
            data = b""
            while not data.endswith(b"\n"):
                data += conn.recv(65536)
            json.loads(data)
            conn.sendall(reply)

    thread = threading.Thread(target=serve)
    thread.start()
    return lambda: thread.join(timeout=30)


def test_where_and_who_come_from_the_flags_else_the_peers_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert filing.context("/t/T-1", "reviewer") == ("/t/T-1", "reviewer")
    with pytest.raises(UsageError, match="needs the ticket directory and role"):
        filing.context(None, None)
    monkeypatch.setenv("HANDOFF_TICKET_DIR", "/t/T-2")
    monkeypatch.setenv("HANDOFF_ROLE", "implementer")
    assert filing.context(None, None) == ("/t/T-2", "implementer")
    assert filing.context(None, "security") == ("/t/T-2", "security")
    with pytest.raises(UsageError):
        filing.context(None, "../escape")


def test_a_report_accepted_is_said_with_where_it_was_filed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = ticket_folder(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("done\n")
    done = answering(folder, b'{"filed": "impl-report-1.md", "problems": []}\n')
    assert filing.submit(report, str(folder), "implementer", 1) == 0
    done()
    assert capsys.readouterr().out == "handoff: report accepted, filed as impl-report-1.md\n"


@pytest.mark.parametrize("reply", [b"not json\n", b'{"filed": 3, "problems": []}\n',
                                   b'{"filed": null}\n'])
def test_an_answer_that_is_not_a_verdict_is_a_clear_error(tmp_path: Path, reply: bytes) -> None:
    folder = ticket_folder(tmp_path)
    done = answering(folder, reply)
    with pytest.raises(HandoffError, match="answered something that is not a verdict"):
        filing.hand_over(folder, {"role": "implementer", "round": 1, "report": "r",
                                  "file": "f"})
    done()


def test_an_orchestrator_that_hangs_up_has_filed_nothing_it_says(tmp_path: Path) -> None:
    folder = ticket_folder(tmp_path)
    done = answering(folder, b"")
    assert filing.hand_over(folder, {"role": "implementer", "round": 1, "report": "r",
                                     "file": "f"}) is None
    done()


def test_with_no_orchestrator_running_nothing_is_filed_and_the_peer_is_told_when_to_retry(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = ticket_folder(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("done\n")
    assert filing.submit(report, str(folder), "implementer", None) == 1
    err = capsys.readouterr().err
    assert "NOT accepted (1 problem(s))" in err and "no orchestrator is running" in err
    assert f"handoff resume {folder.name}" in err and report.read_text() == "done\n"


def test_a_report_that_cannot_be_read_is_refused_before_anything_else(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = ticket_folder(tmp_path)
    assert filing.submit(tmp_path / "missing.md", str(folder), "implementer", None) == 1
    assert "missing.md" in capsys.readouterr().err
    big = tmp_path / "big.md"
    big.write_text("x" * (REPORT_LIMIT + 1))
    assert filing.submit(big, str(folder), "implementer", None) == 1
    assert "NOT accepted" in capsys.readouterr().err


def test_a_role_the_ticket_does_not_have_and_a_folder_that_is_no_ticket_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = ticket_folder(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("x\n")
    assert filing.submit(report, str(folder), "security", None) == 1
    assert "this ticket has no role 'security' (its roles: implementer, reviewer)" in (
        capsys.readouterr().err)
    plain = tmp_path / "plain"
    plain.mkdir()
    assert filing.submit(report, str(plain), "implementer", None) == 1
    assert "is not a handoff ticket directory (no state.json)" in capsys.readouterr().err


def test_main_says_an_error_with_its_exit_code(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert filing.main([str(tmp_path / "r.md")]) == 2, "no --dir, --role nor environment"
    assert capsys.readouterr().err.startswith("handoff: error: submit needs the ticket")
    assert filing.main(["--help"]) is None


def test_a_report_out_of_turn_is_refused_without_waiting_for_the_orchestrator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The orchestrator answers only while it waits for a report: a reviewer's report while
    the ticket is implementing is refused from state.json, with nobody serving."""
    folder = ticket_folder(tmp_path)
    report = tmp_path / "report.md"
    report.write_text("x\n")
    with Intake(str(folder)):
        assert filing.main([str(report), "--dir", str(folder), "--role", "reviewer"]) == 1
        assert "the ticket is implementing, not waiting for the reviewer's report" in (
            capsys.readouterr().err)
        assert filing.main([str(report), "--dir", str(folder), "--role", "implementer",
                            "--round", "3"]) == 1
        assert "this report is for round 3, but the ticket is in round 1" in (
            capsys.readouterr().err)


def test_no_listener_or_a_dead_ones_socket_means_no_orchestrator(tmp_path: Path) -> None:
    folder = ticket_folder(tmp_path)
    request = {"role": "implementer", "round": 1, "report": "r", "file": "f"}
    assert filing.hand_over(folder, request) is None, "no socket file at all"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    (folder / intake.SOCKET).parent.mkdir(exist_ok=True)
    dead.bind(str(folder / intake.SOCKET))
    dead.close()  # what a kill -9 leaves: the file, nobody listening
    assert filing.hand_over(folder, request) is None
    with Intake(str(folder)) as gate:  # the next orchestrator replaces the stale file
        assert not gate.error and gate.fileno() >= 0


def test_only_a_plain_submit_takes_the_lean_path() -> None:
    assert filing.parse(["r.md", "--dir", "/t", "--role=reviewer", "--round", "2"]) == (
        "r.md", {"dir": "/t", "role": "reviewer", "round": "2"})
    for argv in (["--help"], ["r.md", "--bogus"], ["r.md", "--dir"], ["a.md", "b.md"], [],
                 ["r.md", "--round", "two"], ["r.md", "--role", "a", "--role", "b"]):
        assert filing.parse(argv) is None, argv
