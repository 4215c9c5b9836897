"""handoff.machinery.patience: how long a watcher bears a tmux that does not answer."""

from __future__ import annotations

import pytest

from handoff.machinery.patience import Patience
from handoff.machinery.tmux import TIMEOUT_VARIABLE, TmuxFailure


def test_patience_tells_once_per_silence_then_gives_up() -> None:
    failure = TmuxFailure("tmux list-panes on socket s did not answer within 15s", "look at it")
    patient = Patience("T-1", limit=600)
    assert patient.answered() is None
    assert patient.failed(failure) is True
    assert patient.failed(failure) is False
    assert patient.answered() is not None
    assert patient.failed(failure) is True, "a new silence is told again"

    with pytest.raises(TmuxFailure, match="has not answered for") as caught:
        Patience("T-1", limit=0).failed(failure)
    assert "look at it" in caught.value.hint and "'handoff resume T-1'" in caught.value.hint


def test_the_patience_is_two_calls_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    assert Patience("T-1").limit == 30.0
    monkeypatch.setenv(TIMEOUT_VARIABLE, "4.5")
    assert Patience("T-1").limit == 9.0
    assert Patience("T-1", limit=600).limit == 600
