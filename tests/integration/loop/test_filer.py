"""handoff.loop.filer: who filed a report, read from real process trees (a stand-in CLI that
runs its commands as coding CLIs do: directly, through a shell, and a test run under it)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.loop import filer
from tests.conftest import wait_until
from tests.harness import running

#: the stand-in CLI: starts its "commands" and waits
CLI = """
import subprocess, sys, time
tag = sys.argv[1]
subprocess.Popen(["sleep", tag + "1"])                                  # its own command
subprocess.Popen(["sh", "-c", f"sleep {tag}2; :"])                      # through its shell
subprocess.Popen(["sh", "-c", f"{sys.executable} -c 'import subprocess; "
                  f"subprocess.run([\\\"sleep\\\", \\\"{tag}3\\\"])'; :"])  # under a test run
time.sleep(120)
"""


def sleeping(seconds: str) -> int | None:
    return running("sleep", seconds)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    tag = f"7{os.getpid() % 1000:03d}."
    cli = subprocess.Popen([sys.executable, "-c", CLI, tag], start_new_session=True)
    try:
        wait_until(lambda: all(sleeping(f"{tag}{n}") for n in (1, 2, 3)), 20,
                   "the three commands")
        yield cli, tag
    finally:
        os.killpg(cli.pid, 9)
        cli.wait()


def test_a_command_of_the_cli_itself_may_file(tree: tuple[subprocess.Popen[bytes], str]) -> None:
    cli, tag = tree
    granted = {filer.identity(cli.pid)}
    for n in (1, 2):  # directly, and through a shell the CLI started
        pid = sleeping(f"{tag}{n}")
        assert pid is not None
        verdict = filer.judge(pid, "reviewer", cli.pid, granted)
        assert verdict.why == "", verdict
        assert str(cli.pid) in verdict.evidence


def test_a_program_a_command_ran_may_not(tree: tuple[subprocess.Popen[bytes], str]) -> None:
    cli, tag = tree
    pid = sleeping(f"{tag}3")
    assert pid is not None
    verdict = filer.judge(pid, "reviewer", cli.pid, {filer.identity(cli.pid)})
    assert "another program of the reviewer's session" in verdict.why, verdict
    assert "python" in verdict.evidence


def test_a_process_outside_the_session_or_not_granted_may_not(
        tree: tuple[subprocess.Popen[bytes], str]) -> None:
    cli, tag = tree
    outside = filer.judge(os.getpid(), "reviewer", cli.pid, {filer.identity(cli.pid)})
    assert "did not run in the reviewer's own session" in outside.why
    own = sleeping(f"{tag}1")
    assert own is not None
    stale = filer.judge(own, "reviewer", cli.pid, {"1:2:3"})
    assert "not the one handoff started" in stale.why, "a grant names one process, for good"
    assert "no live process" in filer.judge(own, "reviewer", None, set()).why


def test_below_a_launcher_the_cli_is_the_program_its_provider_names(tmp_path: Path) -> None:
    """Codex's npm `codex` is a node launcher that runs the native binary: the CLI is that."""
    launcher = subprocess.Popen(["sh", "-c", "exec sleep 7781"], start_new_session=True)
    wrapper = subprocess.Popen(["sh", "-c", "sleep 7782; :"], start_new_session=True)
    try:
        wait_until(lambda: sleeping("7781") and sleeping("7782"), 20, "the two trees")
        assert filer.cli_of(launcher.pid) == launcher.pid, "its own program: itself"
        child = sleeping("7782")
        assert filer.cli_of(wrapper.pid, ("sleep",)) == child, "down to the named program"
        assert filer.cli_of(wrapper.pid, ("codex",)) == 0, "not there: none"
    finally:
        for process in (launcher, wrapper):
            os.killpg(process.pid, 9)
            process.wait()


def test_shells_in_between_and_a_cli_that_starts_itself_again(tmp_path: Path) -> None:
    """Gemini CLI starts node again as its child, which runs a command in a shell that runs it
    in a subshell: all of that is still the CLI's own command."""
    inner = ("import subprocess, time; subprocess.Popen(['sh', '-c', \"sh -c 'sleep 7791; :'; :\"]); "
             "time.sleep(120)")
    relaunch = subprocess.Popen([sys.executable, "-c",
                                 f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                                 f"{inner!r}])"], start_new_session=True)
    try:
        pid = wait_until(lambda: sleeping("7791"), 20, "the command")
        cli = filer.cli_of(relaunch.pid, relaunches=True)
        assert cli != relaunch.pid and cli in [int(x) for x in Path(
            f"/proc/{relaunch.pid}/task/{relaunch.pid}/children").read_text().split()]
        assert filer.cli_of(relaunch.pid) == relaunch.pid, "without it: the first one"
        granted = {filer.identity(relaunch.pid)}
        assert filer.judge(pid, "implementer", relaunch.pid, granted, relaunches=True).why == ""
        assert "another program" in filer.judge(pid, "implementer", relaunch.pid,
                                                granted).why, "the launcher runs no command"
    finally:
        os.killpg(relaunch.pid, 9)
        relaunch.wait()
