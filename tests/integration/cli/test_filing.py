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


def test_a_peers_submit_loads_no_dataclasses_typing_or_the_cli_framework(tmp_path: Path) -> None:
    """Every peer runs `handoff submit` for every report: its process imports the standard
    library's light parts and handoff's stdlib-only modules (dataclasses, with inspect and
    ast, was a quarter of its CPU; bench/scenarios/startup.py measures it)."""
    import subprocess
    import sys

    report = tmp_path / "report.md"
    report.write_text("---\nstatus: done\n---\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "handoff", "submit",
                           str(report), "--dir", str(tmp_path / "no-ticket"), "--role",
                           "implementer"], capture_output=True, text=True, timeout=60)
    assert "NOT accepted" in done.stdout + done.stderr, done.stderr[-300:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
              if line.startswith("import time:")}
    assert "handoff.cli.filing" in loaded
    heavy = {m for m in loaded if m.split(".")[0] in (
        "dataclasses", "typing", "inspect", "typer", "click", "yaml", "git", "libtmux")}
    assert heavy == set(), heavy
