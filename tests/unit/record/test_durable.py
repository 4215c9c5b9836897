"""handoff.record.durable: saves that wait for the disk on a worker, with a real ticket folder."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from handoff.errors import ExternalFailure
from handoff.record import durable
from handoff.record.ticket import State, ticket_dir


def test_a_deferred_save_is_in_place_at_once_and_its_backup_follows(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "D-1")
    tdir.path.mkdir(parents=True)
    state = State(ticket="D-1", repo="/r", repo_key="repo-0123456789")
    release = threading.Event()

    def busy() -> None:
        release.wait(10)

    with durable.deferred(tdir.path) as flusher:
        flusher.submit(busy)  # the worker is busy: nothing of ours is done yet
        for n in range(1, 4):
            state.round = n
            tdir.save(state)
            assert json.loads(tdir.state_file.read_text())["round"] == n, "readers see it now"
        assert not tdir.backup_file.exists(), "the backup waits for the worker"
        release.set()
    # the `with` ends when every save is durable, the backup of the last one written
    assert json.loads(tdir.backup_file.read_text())["round"] == 3
    assert durable.flusher_of(tdir.path) is None


def test_without_deferral_a_save_writes_both_files_before_it_returns(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "D-2")
    tdir.path.mkdir(parents=True)
    tdir.save(State(ticket="D-2", repo="/r", repo_key="repo-0123456789", round=2))
    assert tdir.state_file.read_text() == tdir.backup_file.read_text()


def test_a_failure_on_the_worker_is_raised_to_the_saver(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "D-3")
    tdir.path.mkdir(parents=True)
    tdir.backup_file.mkdir()  # the backup cannot be written: a directory stands in its place
    with pytest.raises(ExternalFailure, match=r"state\.json\.bak"), durable.deferred(tdir.path):
        tdir.save(State(ticket="D-3", repo="/r", repo_key="repo-0123456789"))
    assert json.loads(tdir.state_file.read_text())["ticket"] == "D-3"


def test_jobs_run_in_the_order_they_came() -> None:
    done: list[int] = []
    flusher = durable.Flusher()
    for n in range(50):
        flusher.submit(lambda n=n: done.append(n))  # type: ignore[misc]
    flusher.close()
    assert done == list(range(50))
