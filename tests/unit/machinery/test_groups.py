"""handoff.machinery.groups: ending a process group of ours (TERM, a grace, then KILL) and the
handoff process that holds a lock, never another program. Real processes, real locks."""

from __future__ import annotations

from pathlib import Path

from handoff.machinery.groups import end_lock_holder


def test_nobody_holding_the_lock_is_nothing_to_end(tmp_path: Path) -> None:
    assert end_lock_holder(tmp_path / "none.lock", "the lock", timeout=1) is None
    (tmp_path / "free.lock").write_text("12345\n")  # a pid written, no lock held
    assert end_lock_holder(tmp_path / "free.lock", "the lock", timeout=1) is None
