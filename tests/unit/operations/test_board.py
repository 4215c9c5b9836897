"""The rows of `handoff watch` (handoff/operations/board.py), from ticket directories the real commands
made with the scripted agents: phases, the marks on what needs a person, each peer's state
with the evidence the orchestrator recorded, and reading only the tickets that changed."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from handoff.operations.board import Row


def test_time_in_phase_reads_at_a_glance() -> None:
    row = Row("k", "T", "/r", "implementing", 1, 3, "2026-11-30T05:00:00.000+00:00", "", {}, None)
    at = datetime.fromisoformat
    assert row.in_phase(at("2026-11-30T05:00:59+00:00")) == "<1m"
    assert row.in_phase(at("2026-11-30T05:12:30+00:00")) == "12m"
    assert row.in_phase(at("2026-11-30T08:05:00+00:00")) == "3h05m"
    assert row.in_phase(at("2026-12-02T09:00:00+00:00")) == "2d04h"
    assert replace(row, phase_since="").in_phase(at("2026-11-30T05:00:00+00:00")) == "-"
