"""handoff.loop.gate.run_gate: the orchestrator's own test run — argv only, timeout, capped log."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.inputs import clip
from handoff.loop.gate import EXCERPT, end_left_gate, excerpt
from handoff.record.ticket import TicketDir
from tests.conftest import PYTHON


def alive(pid: int) -> bool:
    """True while pid runs (a zombie waiting to be reaped counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def spawned(tmp_path: Path) -> Iterator[Path]:
    """A pid file for a grandchild; kills that pid (only) if a test leaves it running."""
    pid_file = tmp_path / "grandchild.pid"
    yield pid_file
    if pid_file.exists():
        text = pid_file.read_text(encoding="utf-8").strip()
        if text.isdigit() and alive(int(text)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text), signal.SIGKILL)


def test_a_log_is_cut_keeping_head_and_tail() -> None:
    text = "H" * 100 + "m" * 1000 + "T" * 100
    capped = clip(text, 200)
    assert capped.startswith("H" * 100)
    assert capped.endswith("T" * 100)
    assert "m" not in capped.replace("cut by handoff", "")
    assert "1000" in capped
    assert clip("short", 200) == "short"


def test_a_log_is_cut_counting_bytes_not_characters() -> None:
    text = "€" * 1000  # 3 bytes each
    capped = clip(text, 300)
    assert len(capped.encode()) < 300 + 60
    assert capped.startswith("€" * 50) and capped.endswith("€" * 50)
    assert "[2700 bytes cut by handoff]" in capped


def test_excerpt_is_the_last_lines_within_a_byte_limit() -> None:
    lines = "\n".join(f"line {i}" for i in range(100))
    assert excerpt(lines, lines=3) == "line 97\nline 98\nline 99"
    huge = "start\n" + "z" * 10_000_000 + "\nthe end"
    short = excerpt(huge, lines=15, limit=EXCERPT)
    assert len(short.encode()) < EXCERPT + 100
    assert short.endswith("z\nthe end")
    assert "bytes cut by handoff" in short and "start" not in short


# An orchestrator in a process of its own: run_gate with a record, SIGTERM raising as in
# handoff.loop.orchestrator, so a test can stop it or kill -9 it mid-gate.
ORCHESTRATOR = (
    "import signal, sys\n"
    "from pathlib import Path\n"
    "from handoff.loop.gate import run_gate\n"
    "from handoff.record.ticket import TicketDir\n"
    "def stop(signum, frame): raise SystemExit('stopped')\n"
    "signal.signal(signal.SIGTERM, stop)\n"
    "folder = Path(sys.argv[1])\n"
    "hang = [sys.executable, '-c', 'import subprocess, sys, time; '\n"
    "        'subprocess.Popen([sys.executable, \"-c\", \"import time; time.sleep(300)\"]); '\n"
    "        'print(\"gate up\", flush=True); time.sleep(300)']\n"
    "run_gate(hang, folder, {'PATH': '/usr/bin:/bin'}, 300, folder / 'gate.log',\n"
    "         record=TicketDir(folder).gate_running)\n"
)


@pytest.fixture
def orchestrator(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A process running a hanging gate with its record in tmp_path; its gate's group is ended
    (only if it is the recorded one) when a test leaves it running."""
    child = subprocess.Popen([PYTHON, "-c", ORCHESTRATOR, str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = TicketDir(tmp_path).gate_running
    try:
        yield child, record
    finally:
        child.kill()
        child.wait()
        end_left_gate(record, grace=1.0)


def test_a_torn_record_is_removed_and_kills_nothing(tmp_path: Path) -> None:
    record = TicketDir(tmp_path).gate_running
    record.write_text('{"pid": 1, "pg', encoding="utf-8")
    ended = end_left_gate(record)
    assert ended is not None and ended["ended"] == {}
    assert not record.exists()
