"""The orchestrator's intake: `handoff submit` hands a report over a Unix socket and reads the
verdict. Real sockets, real processes; the judge here is a recording function."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from handoff.cli import filing
from handoff.protocol import intake
from handoff.protocol.intake import Intake, Reply, Request
from tests.conftest import wait_until


class Recorder:
    """A judge that keeps what it was asked and answers with a set verdict."""

    def __init__(self, verdict: Reply) -> None:
        self.verdict = verdict
        self.requests: list[Request] = []

    def __call__(self, request: Request) -> Reply:
        self.requests.append(request)
        return self.verdict


def ticket_folder(tmp_path: Path, name: str = "T-1") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "state.json").write_text(json.dumps({"phase": "implementing", "round": 1}))
    return folder



def test_a_long_ticket_path_is_reached_through_its_folders_descriptor(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    folder = ticket_folder(deep)
    assert len(str(folder / intake.SOCKET)) > 108, "longer than any sun_path"
    judge = Recorder(Reply("filed.md", []))
    with Intake(str(folder)) as gate:
        assert not gate.error, gate.error
        assert (folder / intake.SOCKET).is_socket(), "bound at its real place"
        answer: list[tuple[str | None, list[str]] | None] = []
        client = threading.Thread(target=lambda: answer.append(filing.hand_over(folder, {
            "role": "implementer", "round": 1, "report": "r", "file": "f"})))
        client.start()
        wait_until(lambda: gate.serve(judge), timeout=30, what="the client to connect")
        client.join(timeout=30)
    assert answer == [("filed.md", [])]




def test_a_peer_that_hung_up_before_its_verdict_has_nothing_judged(tmp_path: Path) -> None:
    folder = ticket_folder(tmp_path)
    judge = Recorder(Reply("filed.md", []))
    with Intake(str(folder)) as gate:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
            peer.connect(str(folder / intake.SOCKET))
            peer.sendall(json.dumps({"role": "implementer", "round": 1, "report": "r",
                                     "file": "f"}).encode() + b"\n")
        assert gate.serve(judge) == []
    assert judge.requests == [], "it said nothing was filed: so it is"


@pytest.mark.parametrize("line", [b"not json\n", b"[1, 2]\n",
                                  b'{"role": "implementer", "round": "1", "report": "r"}\n',
                                  b'{"role": "implementer", "round": true, "report": "r"}\n'])
def test_a_malformed_request_gets_a_problem_not_a_judgement(tmp_path: Path, line: bytes) -> None:
    folder = ticket_folder(tmp_path)
    judge = Recorder(Reply("filed.md", []))
    with Intake(str(folder)) as gate, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
        peer.connect(str(folder / intake.SOCKET))
        peer.sendall(line)
        [verdict] = gate.serve(judge)
        reply = json.loads(peer.recv(65536))
    assert verdict.filed is None and "malformed" in verdict.problems[0]
    assert reply == {"filed": None, "problems": verdict.problems}
    assert judge.requests == []
