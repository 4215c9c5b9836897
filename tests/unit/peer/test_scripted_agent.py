"""handoff.peer.scripted_agent's entry point, without a process."""

from __future__ import annotations

import pytest

from handoff.peer.scripted_agent import main

# --- main ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    [],
    ["the boss"],
    ["the boss", "Read and follow /tmp/brief-1.md"],
    ["reviewer", "Read and follow /tmp/brief-1.md", "extra"],
])
def test_main_with_bad_arguments_returns_2(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2

    captured = capsys.readouterr()
    assert "usage:" in captured.err
    assert captured.out == ""
