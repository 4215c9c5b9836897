"""Diagnostics: `--verbose` / HANDOFF_DEBUG=1 logs every subprocess and event; an unexpected
failure is one line, a crash log and its own exit status; the command line runs in-process."""

from __future__ import annotations

import pytest

from handoff.cli import app as cli


def test_the_command_line_runs_in_process_and_returns_its_status(
        isolated: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("handoff 0.1.0")
    assert cli.main(["status", "NO-SUCH"]) == 3
    assert "handoff: error:" in capsys.readouterr().err
    assert cli.main(["no-such-command"]) == 2
