"""handoff.record.events: the append-only audit trail, torn lines, and concurrent writers."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from handoff.errors import ExternalFailure
from handoff.record.events import EventLog
from tests.conftest import PYTHON
from tests.faults.test_record_faults import fill, small_disk
from tests.unit.record import test_events as unit_tests

#: the fixtures this module's unit tests define, shared
log = unit_tests.log


WRITER = """
import sys
from pathlib import Path
from handoff.record.events import EventLog
log = EventLog(Path(sys.argv[1]))
writer, count = sys.argv[2], int(sys.argv[3])
sys.stdin.readline()  # start together
for seq in range(count):
    log.append("tick", writer=writer, seq=seq, payload=writer * 3000)
"""


def test_concurrent_appends_from_several_processes_give_whole_lines(log: EventLog) -> None:
    writers, count = 6, 150
    children = [
        subprocess.Popen([PYTHON, "-c", WRITER, str(log.path), f"w{i}", str(count)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        for i in range(writers)
    ]
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in children:
        _, err = child.communicate(timeout=120)
        assert child.returncode == 0, err

    events, bad = log.read()
    assert bad == []
    assert len(events) == writers * count
    assert len(log.path.read_bytes().splitlines()) == writers * count
    seen: dict[str, list[int]] = {}
    for event in events:
        writer, seq = event["writer"], event["seq"]
        assert isinstance(writer, str) and isinstance(seq, int)
        assert event["payload"] == writer * 3000
        seen.setdefault(writer, []).append(seq)
    # every writer's events are all there, each once, in the order it wrote them
    assert seen == {f"w{i}": list(range(count)) for i in range(writers)}


def test_an_append_on_a_full_disk_leaves_whole_lines_only(tmp_path: Path) -> None:
    """The disk fills in the middle of an event: the part that fitted is taken back, so the log
    never holds a torn line of handoff's own making."""
    with small_disk(tmp_path / "disk", "64k") as disk:
        log = EventLog(disk / "T-1" / "events.jsonl")
        log.append("created", repo="/src")
        fill(disk)
        with pytest.raises(ExternalFailure) as caught:
            log.append("gate", summary="x" * 20_000)  # more than the last page has room for
        assert "No space left on device" in caught.value.message
        events, bad = log.read()
        assert bad == [] and [e["kind"] for e in events] == ["created"]
        assert log.path.read_bytes().endswith(b"\n")
