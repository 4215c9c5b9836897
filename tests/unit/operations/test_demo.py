"""handoff.operations.demo: the demo's throwaway repository, its plan (a bug the scripted
implementer fixes in two rounds, the second caught only by review), and its removal. The whole
demo runs in tests/e2e/test_loop.py."""

from __future__ import annotations

import pytest

from handoff.operations.demo import (
    SOCKET,
    demo_socket,
)


def test_the_demo_runs_on_its_own_tmux_socket_unless_the_person_names_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HANDOFF_TMUX_SOCKET", "mine")
    assert demo_socket() == "mine"
    monkeypatch.delenv("HANDOFF_TMUX_SOCKET")
    assert demo_socket() == SOCKET
