"""handoff.providers.signals: the hook script drops whole files, the reader orders them."""

from __future__ import annotations

import os
from pathlib import Path

from handoff.providers import signals
from handoff.providers.signals import read_signals


def test_a_broken_or_half_written_signal_is_still_a_signal_without_data(tmp_path: Path) -> None:
    (tmp_path / "stop.x1.json").write_text("{not json")
    (tmp_path / ".stop.tmp123").write_text("{}")  # still being written: not read
    found = read_signals(tmp_path, 0)
    assert [(s.event, s.data) for s in found] == [("stop", {})]
    assert read_signals(tmp_path / "missing", 0) == []


def test_at_most_max_signals_are_read_the_oldest_first(tmp_path: Path) -> None:
    for i in range(signals.MAX_SIGNALS + 5):
        path = tmp_path / f"stop.{i:04d}.json"
        path.write_text("{}")
        os.utime(path, ns=(10**9 * (100 + i), 10**9 * (100 + i)))
    found = read_signals(tmp_path, 0)
    assert len(found) == signals.MAX_SIGNALS
    assert found[0].path.name == "stop.0000.json"
    rest = read_signals(tmp_path, found[-1].mtime_ns + 1)
    assert [s.path.name for s in rest] == [f"stop.{i:04d}.json" for i in
                                           range(signals.MAX_SIGNALS, signals.MAX_SIGNALS + 5)]
