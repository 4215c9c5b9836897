"""State saves whose wait for the disk is off the loop's path.

An orchestrator saves its state at every step, and each save waited for the disk (fsync) before
the step's event: with twenty tickets on one disk that wait was most of a hand-over (p50 9 ms of
a 16 ms one, measured: docs/performance.md). While an orchestrator runs (`deferred`), a save
puts state.json in place at once (written, renamed: every reader and a crash of any process
see it whole) and a worker thread of its own then makes it durable and writes state.json.bak
durably after it, in the order of the saves. A power cut can so catch at most the newest
state.json before it is on disk, and only after the backup of the save before it is: the two
files are never both bad. The run waits for the worker before it ends; a failure of the worker
(a full disk) is raised by the next save or at the end, as the save's own would have been.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

Job = Callable[[], None]


class Flusher:
    """One worker thread running jobs in the order they came."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="handoff-durable", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        self.raise_failure()
        self._jobs.put(job)

    def close(self) -> None:
        """Wait for every job; raise the first failure."""
        self._jobs.put(None)
        self._thread.join()
        self.raise_failure()

    def raise_failure(self) -> None:
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                job()
            except Exception as exc:  # handed to the saving thread: nothing is lost silently
                if self._failed is None:
                    self._failed = exc


#: the ticket folders whose saves are deferred in this process, and their workers
_deferring: dict[Path, Flusher] = {}


def flusher_of(folder: Path) -> Flusher | None:
    return _deferring.get(folder)


@contextlib.contextmanager
def deferred(folder: Path) -> Iterator[Flusher]:
    """Saves of the ticket in folder wait for the disk on a worker while in the `with`; every
    one is durable when it ends."""
    flusher = Flusher()
    _deferring[folder] = flusher
    try:
        yield flusher
    finally:
        del _deferring[folder]
        flusher.close()


def sync(path: Path) -> None:
    """path's data on disk (fsync on a descriptor of its own)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
