"""handoff.machinery.watch: wake up on file changes (inotify on Linux, watchdog elsewhere: both
run here), rescan on every wake-up."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from handoff.machinery.watch import Watcher
from tests.conftest import PYTHON
from tests.harness import with_inotify_watches
from tests.paths import ROOT
from tests.unit.machinery.test_watch import BY, linux_only, wait_for


@linux_only
def test_a_folder_inotify_cannot_watch_turns_the_whole_watcher_to_polling(
        tmp_path: Path) -> None:
    """One watch allowed, two folders: the second folder would never wake `wait`, so none is
    watched, and the watcher says why; a file in that folder is still seen by polling."""
    script = (
        "import json, sys, time\n"
        "from pathlib import Path\n"
        "from handoff.machinery.watch import Watcher\n"
        "a, b = Path(sys.argv[1]), Path(sys.argv[2])\n"
        "with Watcher([a, b]) as w:\n"
        "    (b / 'report.md').write_text('x')\n"
        "    start = time.monotonic()\n"
        "    woke = w.wait(30)\n"
        "    print(json.dumps({'polling': w.polling, 'woke': woke,\n"
        "                      'waited': time.monotonic() - start}))\n")
    done = subprocess.run(
        with_inotify_watches(1, [PYTHON, "-c", script, str(tmp_path / "a"),
                                 str(tmp_path / "b")]),
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["polling"].startswith("inotify_add_watch: "), seen
    assert "fs.inotify.max_user_watches" in seen["polling"], seen
    assert seen["woke"] is False and seen["waited"] < 5, \
        "a polling watcher returns within its poll interval, for the caller to look"


@linux_only
@BY
def test_wait_wakes_when_another_process_writes(tmp_path: Path, by: str) -> None:
    inbox = tmp_path / "inbox"
    code = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('done')"
    with Watcher([inbox], by=by) as watcher:
        assert watcher.polling == ""
        child = subprocess.Popen([PYTHON, "-c", code, str(inbox / "report.md")])
        try:
            started = time.monotonic()
            woke = watcher.wait(20)
            elapsed = time.monotonic() - started
        finally:
            child.wait(timeout=20)
    assert woke is True
    assert elapsed < 10
    assert (inbox / "report.md").read_text(encoding="utf-8") == "done"


def test_wait_is_false_on_timeout(tmp_path: Path) -> None:
    with Watcher([tmp_path / "quiet"]) as watcher:
        started = time.monotonic()
        woke = watcher.wait(0.3)
        elapsed = time.monotonic() - started
    assert woke is False
    assert elapsed >= 0.25
    assert elapsed < 10


def test_watchdog_wakes_for_changes_but_not_for_reading(tmp_path: Path) -> None:
    """watchdog also reports a file opened or read; the caller's own rescan after each wake-up
    would then wake it again, for ever."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "plan.md").write_text("x", encoding="utf-8")
    with Watcher([inbox], by="watchdog") as watcher:
        assert watcher.polling == ""
        for _ in range(3):
            assert (inbox / "plan.md").read_text(encoding="utf-8") == "x"
            assert watcher.wait(0.3) is False, "reading a file woke the watcher"
        (inbox / "plan.md").unlink()
        assert watcher.wait(20) is True, "a file removed did not"


def test_wait_for_is_none_on_timeout(tmp_path: Path) -> None:
    calls: list[float] = []

    def check() -> str | None:
        calls.append(time.monotonic())
        return None

    started = time.monotonic()
    value = wait_for(check, [tmp_path / "inbox"], timeout=0.5, tick=0.1)
    elapsed = time.monotonic() - started
    assert value is None
    assert elapsed >= 0.45
    assert elapsed < 10
    assert len(calls) >= 2  # it looks again on every tick, not only once


@linux_only
def test_wait_wakes_when_the_followed_process_exits(tmp_path: Path) -> None:
    """A peer's death wakes the waiting orchestrator at once, with no look at tmux."""
    child = subprocess.Popen([PYTHON, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        with Watcher([tmp_path]) as watcher:
            assert watcher.follow(child.pid) is True
            assert watcher.wait(0.2) is False and not watcher.exited, "woke while it lived"
            assert child.stdin is not None
            child.stdin.close()  # the child reads EOF and exits
            started = time.monotonic()
            woke = watcher.wait(20)
            elapsed = time.monotonic() - started
            assert woke is True and watcher.exited
            assert elapsed < 10
            # reported once: a dead process's pidfd stays readable, and must not spin the loop
            assert watcher.wait(0.2) is False
            assert watcher.follow(child.pid) is False, "the same dead pid is not followed again"
    finally:
        child.wait(timeout=20)


@linux_only
def test_following_a_process_that_is_gone_says_so(tmp_path: Path) -> None:
    child = subprocess.Popen([PYTHON, "-c", "pass"])
    child.wait(timeout=20)  # reaped: the pid names nothing now
    with Watcher([tmp_path]) as watcher:
        assert watcher.follow(child.pid) is False
        assert watcher.follow(None) is False


@linux_only
def test_one_wait_follows_several_processes_each_under_its_key(tmp_path: Path) -> None:
    """The reviewers work side by side: each one's exit wakes the wait, and says which."""
    children = {key: subprocess.Popen([PYTHON, "-c", "import sys; sys.stdin.read()"],
                                      stdin=subprocess.PIPE) for key in ("reviewer", "security")}
    try:
        with Watcher([tmp_path]) as watcher:
            for key, child in children.items():
                assert watcher.follow(child.pid, key) is True
            assert watcher.wait(0.2) is False and watcher.gone == set()
            stdin = children["security"].stdin
            assert stdin is not None
            stdin.close()
            assert watcher.wait(20) is True
            assert watcher.gone == {"security"}, "only the one that ended"
            assert watcher.follow(None, "security") is False and watcher.gone == set()
            stdin = children["reviewer"].stdin
            assert stdin is not None
            stdin.close()
            assert watcher.wait(20) is True and watcher.gone == {"reviewer"}
    finally:
        for child in children.values():
            child.wait(timeout=20)
