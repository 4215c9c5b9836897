"""handoff.record.placed: where this machine remembers its tickets on hosts."""

from __future__ import annotations

import stat
from pathlib import Path

from handoff.record import placed
from handoff.record.placed import Placement


def test_a_placement_is_kept_privately_until_forgotten(tmp_path: Path) -> None:
    home = tmp_path / "state"
    one = Placement("P-1", "build1", "/work/repo", "/h/state/mirrors/repo-0123", "HEAD",
                    "a" * 40, "main")
    placed.save(home, one)
    placed.save(home, Placement("P-0", "build2", "/work/repo", "/m", "main", "b" * 40))
    assert placed.load(home, "P-1") == one
    assert [p.ticket for p in placed.every(home)] == ["P-0", "P-1"]
    assert stat.S_IMODE(placed.path(home, "P-1").stat().st_mode) == 0o600
    assert stat.S_IMODE((home / placed.FOLDER).stat().st_mode) == 0o700
    placed.forget(home, "P-1")
    assert placed.load(home, "P-1") is None and [p.ticket for p in placed.every(home)] == ["P-0"]


def test_a_damaged_placement_is_none_not_a_crash(tmp_path: Path) -> None:
    home = tmp_path / "state"
    (home / placed.FOLDER).mkdir(parents=True)
    placed.path(home, "X-1").write_text("{not json", encoding="utf-8")
    placed.path(home, "X-2").write_text('{"ticket": "X-2"}', encoding="utf-8")
    assert placed.load(home, "X-1") is None and placed.load(home, "X-2") is None
    assert placed.every(home) == [] and placed.every(tmp_path / "none") == []
