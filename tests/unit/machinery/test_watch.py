"""handoff.machinery.watch: wake up on file changes (inotify on Linux, watchdog elsewhere: both
run here), rescan on every wake-up."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import pytest

from handoff.machinery.watch import Watcher

T = TypeVar("T")


def wait_for(
    check: Callable[[], T | None], folders: Iterable[Path], timeout: float, tick: float = 0.5,
) -> T | None:
    """check() after every wake-up of a Watcher (and every tick) until it returns a value or
    time runs out: how the loop's waits use it."""
    deadline = time.monotonic() + timeout
    with Watcher(folders) as watcher:
        while True:
            value = check()
            if value is not None:
                return value
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            watcher.wait(min(tick, left))

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="inotify wake-ups exist on Linux only")


#: the two ways folders are watched; watchdog is what macOS gets, proven here on Linux
BY = pytest.mark.parametrize("by", ["inotify", "watchdog"])


def put(folder: Path, name: str, text: str) -> None:
    """Write a whole file into folder at once (written aside, then renamed in)."""
    staging = folder.parent / f".staging-{name}"
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, folder / name)


def reader(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


@linux_only
def test_watches_by_inotify_on_linux(tmp_path: Path) -> None:
    with Watcher([tmp_path]) as watcher:
        assert watcher.polling == ""


@linux_only
def test_creates_missing_folders(tmp_path: Path) -> None:
    folder = tmp_path / "inbox" / "reviewer"
    with Watcher([folder]):
        assert folder.is_dir()


@linux_only
@BY
def test_wait_wakes_when_a_thread_creates_a_file(tmp_path: Path, by: str) -> None:
    inbox = tmp_path / "inbox"
    with Watcher([inbox], by=by) as watcher:
        assert (watcher.by, watcher.polling) == (by, "")
        writer = threading.Thread(target=lambda: (inbox / "report.md").write_text("done"))
        started = time.monotonic()
        writer.start()
        woke = watcher.wait(20)
        elapsed = time.monotonic() - started
        writer.join(timeout=10)
    assert woke is True
    assert elapsed < 10


@linux_only
@BY
def test_wait_watches_every_folder(tmp_path: Path, by: str) -> None:
    first, second = tmp_path / "implementer", tmp_path / "reviewer"
    with Watcher([first, second], by=by) as watcher:
        put(second, "report.md", "x")
        assert watcher.wait(20) is True


@linux_only
def test_wait_drains_events_it_woke_for(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    with Watcher([inbox]) as watcher:
        for n in range(5):
            (inbox / f"file-{n}.md").write_text("x", encoding="utf-8")
        assert watcher.wait(20) is True
        assert watcher.wait(0.2) is False


@BY
def test_close_twice_is_harmless(tmp_path: Path, by: str) -> None:
    watcher = Watcher([tmp_path], by=by)
    watcher.close()
    watcher.close()
    assert watcher.wait(0) is False


def test_wait_for_returns_the_checks_value_after_a_change(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    target = inbox / "report.md"
    writers: list[threading.Thread] = []

    def check() -> str | None:
        if not writers:  # the watch is up: only now does the file get written
            writers.append(threading.Thread(target=put, args=(inbox, "report.md", "verdict: pass")))
            writers[0].start()
            return None
        return reader(target)

    started = time.monotonic()
    value = wait_for(check, [inbox], timeout=60, tick=15)
    elapsed = time.monotonic() - started
    writers[0].join(timeout=10)
    assert value == "verdict: pass"
    if sys.platform.startswith("linux"):
        assert elapsed < 10, "wait_for slept through the change instead of waking on it"


def test_wait_for_sees_a_file_written_before_it_started(tmp_path: Path) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "report.md").write_text("already here", encoding="utf-8")
    started = time.monotonic()
    value = wait_for(lambda: reader(inbox / "report.md"), [inbox], timeout=30, tick=15)
    assert value == "already here"
    assert time.monotonic() - started < 10


def test_wait_for_returns_falsy_values_that_are_not_none(tmp_path: Path) -> None:
    started = time.monotonic()
    assert wait_for(lambda: 0, [tmp_path], timeout=30, tick=15) == 0
    assert time.monotonic() - started < 10
