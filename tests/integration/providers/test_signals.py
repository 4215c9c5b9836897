"""handoff.providers.signals: the hook script drops whole files, the reader orders them."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

from handoff.providers.signals import Signal, read_signals, signal_argv, signal_command


def test_a_hook_command_keeps_its_stdin_as_one_whole_file(tmp_path: Path) -> None:
    folder = tmp_path / "sig nals"  # a space: the command line quotes its paths
    payload = json.dumps({"hook_event_name": "Stop", "session_id": "abc"})
    done = subprocess.run(signal_command(folder, "stop"), shell=True, input=payload, text=True,
                          capture_output=True, timeout=10)
    assert done.returncode == 0 and done.stdout == "", "a hook prints nothing"
    found = read_signals(folder, 0)
    assert [s.event for s in found] == ["stop"]
    assert found[0].data == {"hook_event_name": "Stop", "session_id": "abc"}
    assert not [p for p in folder.iterdir() if p.name.startswith(".")], "no temp file left"


def test_a_notify_program_gets_its_json_as_the_last_argument(tmp_path: Path) -> None:
    payload = json.dumps({"type": "agent-turn-complete", "turn-id": "7"})
    subprocess.run([*signal_argv(tmp_path, "stop"), payload], check=True, timeout=10,
                   stdin=subprocess.DEVNULL)
    found = read_signals(tmp_path, 0)
    assert found[0].data["type"] == "agent-turn-complete"
    assert found[0].detail() == "stop (agent-turn-complete)"


def test_signals_come_oldest_first_and_older_ones_can_be_left_out(tmp_path: Path) -> None:
    for i, event in enumerate(("prompt", "stop", "prompt")):
        subprocess.run(signal_command(tmp_path, event), shell=True, input="{}", text=True,
                       check=True, timeout=10)
        path = sorted(tmp_path.glob(f"{event}.*.json"), key=os.path.getmtime)[-1]
        os.utime(path, ns=(10**9 * (100 + i), 10**9 * (100 + i)))
    assert [s.event for s in read_signals(tmp_path, 0)] == ["prompt", "stop", "prompt"]
    assert [s.event for s in read_signals(tmp_path, 10**9 * 101)] == ["stop", "prompt"]


def test_a_fifo_a_link_and_a_huge_file_in_the_folder_neither_block_nor_leak(
        tmp_path: Path) -> None:
    """The folder is the peer's to write: a FIFO there once held the orchestrator in open()
    for ever; a link carried another file's words into the event log (a signal's detail)."""
    folder = tmp_path / "signals"
    folder.mkdir()
    os.mkfifo(folder / "stop.fifo.json")
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"message": "the person's secret"}))
    (folder / "stop.link.json").symlink_to(secret)
    with (folder / "notification.huge.json").open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte read whole before
    subprocess.run(signal_command(folder, "stop"), shell=True, input='{"message": "mine"}',
                   text=True, check=True, timeout=10)
    found: list[list[Signal]] = []
    reader = threading.Thread(target=lambda: found.append(read_signals(folder, 0)),
                              daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():
        os.close(os.open(folder / "stop.fifo.json", os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("read_signals blocked on a FIFO")
    [read] = found
    assert sorted((s.event, str(s.data)) for s in read) == [
        ("notification", "{}"), ("stop", "{'message': 'mine'}")], \
        "the huge one is a signal without data; the FIFO and the link are none"
    assert (folder / "stop.fifo.json").exists() and (folder / "stop.link.json").is_symlink(), \
        "what it does not read, it leaves alone"
