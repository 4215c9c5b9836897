"""handoff.cli.output: how every command speaks besides its own output (notes and a ticket's
failure in a batch on stderr, stdout left to the answer; NO_COLOR)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.cli import output
from handoff.errors import UsageError
from handoff.operations.results import Closed, Running, Stopped

RECORD = Path("/state/repo-1/T-1")


def test_notes_go_to_stderr_one_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    output.notes(["2 uncommitted change(s) are not part of T-1", "the base moved"])
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "note: 2 uncommitted change(s) are not part of T-1\nnote: the base moved\n"


def test_a_failed_ticket_of_a_batch_is_said_as_an_error_with_its_id_first(
        capsys: pytest.CaptureFixture[str]) -> None:
    output.failed("T-2", UsageError("no plan", "pass --plan"))
    output.failed("T-3", UsageError("no repo"))
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("handoff: error: T-2: no plan\n  hint: pass --plan\n"
                   "handoff: error: T-3: no repo\n")


@pytest.mark.parametrize(("value", "plain"), [(None, False), ("", False), ("1", True),
                                              ("0", True)])
def test_no_color_is_any_value_but_empty(value: str | None, plain: bool,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", value)
    assert output.plain() is plain


def test_a_result_shows_its_notes_on_stderr_and_its_lines_on_stdout(
        capsys: pytest.CaptureFixture[str]) -> None:
    output.show(Stopped("T-1", 4242, True, notes=("the reviewer's screen was kept",)))
    out, err = capsys.readouterr()
    assert out == "T-1 stopped (orchestrator: 4242, peers: stopped)\n"
    assert err == "note: the reviewer's screen was kept\n"
    output.show(Closed("T-1", RECORD, (), "", None, None, (), repo_gone=True))
    out, err = capsys.readouterr()
    assert out.count("\n") == 1 and out.startswith("T-1 closed; its repository is gone")
    assert err == ""


def test_the_board_shows_a_result_on_one_line_without_the_terminals_details() -> None:
    running = Running("T-1", "handoff-T-1", RECORD, sandbox="sandbox: bubblewrap",
                      notes=("the base moved",))
    assert output.line(running) == ("sandbox: bubblewrap; T-1: the orchestrator runs in tmux "
                                    "session handoff-T-1.; the base moved")
    assert "\n" not in output.line(Closed("T-1", RECORD, ("implementer",), "handoff/T-1", None,
                                          RECORD / "x.patch", (), False))


def test_a_page_is_every_line_indented_ones_too_then_the_notes() -> None:
    running = Running("T-1", "T-1-abc", Path("/h/T-1"), notes=("the base moved",))
    shown = output.page(running).splitlines()
    assert shown[0] == "T-1: the orchestrator runs in tmux session T-1-abc."
    assert "  watch:  handoff attach T-1" in shown, "a page keeps a terminal's detail"
    assert shown[-1] == "note: the base moved"
