"""handoff.cli.output: how every command speaks besides its own output (notes and a ticket's
failure in a batch on stderr, stdout left to the answer; NO_COLOR)."""

from __future__ import annotations

import pytest

from handoff.cli import output
from handoff.errors import UsageError


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
