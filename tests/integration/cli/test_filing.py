"""handoff.cli.filing: `handoff submit` as a peer runs it: the flags or the peer's environment
say where, the ticket's state refuses a report out of turn at once, the report is handed to the
orchestrator over its socket and its verdict printed. Real sockets; the orchestrator's side is
handoff.protocol.intake (tests/unit/protocol/test_intake.py), or a plain listener here."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.cli import filing
from handoff.errors import HandoffError
from handoff.protocol.intake import Intake
from tests.unit.protocol.test_intake import ticket_folder


def test_an_orchestrator_that_does_not_answer_in_time_is_a_clear_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = ticket_folder(tmp_path)
    monkeypatch.setattr(filing, "VERDICT_WAIT", 0.3)
    with Intake(str(folder)), pytest.raises(HandoffError) as raised:  # listening, never serving
        filing.hand_over(folder, {"role": "implementer", "round": 1, "report": "r",
                                  "file": "f"})
    assert "did not answer within" in raised.value.message
    assert "nothing was filed" in raised.value.message
