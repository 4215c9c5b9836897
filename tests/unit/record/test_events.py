"""handoff.record.events: the append-only audit trail, torn lines, and concurrent writers."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from handoff.record.events import EventLog


@pytest.fixture
def log(tmp_path: Path) -> EventLog:
    return EventLog(tmp_path / "ticket" / "events.jsonl")


def test_reading_a_missing_log_gives_nothing(log: EventLog) -> None:
    assert log.read() == ([], [])


def test_append_then_read_round_trips(log: EventLog) -> None:
    first = log.append("created", base_commit="abc123")
    second = log.append("verdict", round=2, role="reviewer", verdict="fail",
                        must_fix=["calc.py:2: wrong sign"])
    events, bad = log.read()
    assert bad == []
    assert events == [first, second]
    assert events[0]["kind"] == "created" and events[0]["base_commit"] == "abc123"
    assert events[1]["round"] == 2 and events[1]["role"] == "reviewer"
    assert events[1]["must_fix"] == ["calc.py:2: wrong sign"]


def test_every_event_has_kind_round_role_and_an_aware_time(log: EventLog) -> None:
    log.append("orchestrator", pid=42)
    [event], _ = log.read()
    assert event["kind"] == "orchestrator"
    assert event["round"] == 0
    assert event["role"] == ""
    assert datetime.fromisoformat(str(event["time"])).tzinfo is not None


def test_appending_never_rewrites_what_is_there(log: EventLog) -> None:
    log.append("created")
    before = log.path.read_bytes()
    log.append("phase")
    after = log.path.read_bytes()
    assert after.startswith(before)
    assert after.count(b"\n") == 2


def test_values_json_cannot_hold_are_written_as_text(log: EventLog, tmp_path: Path) -> None:
    log.append("brief", brief=tmp_path / "inbox" / "brief-1.md")
    [event], bad = log.read()
    assert bad == []
    assert event["brief"] == str(tmp_path / "inbox" / "brief-1.md")


def test_line_separators_inside_values_stay_on_one_line(log: EventLog) -> None:
    tricky = "a\nb\r\nc\u2028d\u2029e\x85f\x0bg ü 票"
    log.append("answer", text=tricky)
    log.append("phase")
    events, bad = log.read()
    assert bad == []
    assert [e["kind"] for e in events] == ["answer", "phase"]
    assert events[0]["text"] == tricky


def test_a_torn_last_line_is_skipped_and_reported(log: EventLog) -> None:
    for kind in ("created", "phase", "launch"):
        log.append(kind)
    with log.path.open("ab") as handle:
        handle.write(b'{"time": "2024-01-01T00:00:00", "kind": "ver')  # a crash mid-write
    events, bad = log.read()
    assert [e["kind"] for e in events] == ["created", "phase", "launch"]
    assert bad == [4]


def test_corrupt_lines_in_the_middle_are_reported_by_number(log: EventLog) -> None:
    log.append("created")
    with log.path.open("ab") as handle:
        handle.write(b"not json at all\n")
        handle.write(b"[1, 2, 3]\n")  # valid JSON, but not an event
        handle.write(b"\n")  # blank lines are neither events nor damage
        handle.write(b"\xff\xfe garbage bytes\n")
    log.append("stopped")
    events, bad = log.read()
    assert [e["kind"] for e in events] == ["created", "stopped"]
    assert bad == [2, 3, 5]


def test_an_event_appended_after_a_torn_line_is_kept(log: EventLog) -> None:
    log.append("created")
    with log.path.open("ab") as handle:
        handle.write(b'{"kind": "ver')
    log.append("orchestrator")
    events, bad = log.read()
    assert [e["kind"] for e in events] == ["created", "orchestrator"]
    assert bad == [2]


def test_every_line_on_disk_is_one_json_object(log: EventLog) -> None:
    for i in range(20):
        log.append("peer", i=i)
    lines = log.path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    assert [json.loads(line)["i"] for line in lines[:-1]] == list(range(20))


def test_the_log_is_private_whatever_the_umask(log: EventLog) -> None:
    old = os.umask(0o022)
    try:
        log.append("created")
    finally:
        os.umask(old)
    assert log.path.stat().st_mode & 0o777 == 0o600
    assert log.path.parent.stat().st_mode & 0o777 == 0o700
