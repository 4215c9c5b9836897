"""handoff.record.starts: an orchestrator's first step waits for the starts in flight, within a
bound, and a start that died holds nobody back. Holders are real processes."""

from __future__ import annotations

from pathlib import Path

from handoff.record.starts import InFlight, wait_for_starts


def test_no_start_InFlight_is_no_wait(tmp_path: Path) -> None:
    assert wait_for_starts(tmp_path, bound=5.0) < 0.5
    with InFlight(tmp_path):  # our own start: a lock of this process's, released after
        pass
    assert wait_for_starts(tmp_path, bound=5.0) < 0.5
    assert oct((tmp_path / "starts.lock").stat().st_mode & 0o777) == "0o600"


def test_a_home_it_cannot_write_holds_nobody_back(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "home"
    with InFlight(missing):
        assert wait_for_starts(missing, bound=5.0) == 0.0
    assert not missing.exists()
