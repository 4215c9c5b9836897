"""handoff.machinery.tmux.Tmux against a real tmux server on the test's private socket."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.machinery.tmux import (
    BASE_ENV,
    TIMEOUT_VARIABLE,
    TMUX_TIMEOUT,
    Tmux,
    call_timeout,
    failure_kind,
)

# Programs run in panes. Each writes what it saw atomically (tmp file + rename) so the test
# never reads half a file, then blocks on its terminal until told otherwise.
BLOCK = "import sys; sys.stdin.readline()"


@pytest.fixture
def tmux(socket: str, handoff_home: Path) -> Tmux:
    return Tmux(socket, handoff_home)


# --- the server's environment (issue 6, item 2) -------------------------------------------------

SECRET_ENV = {"AWS_SECRET_ACCESS_KEY": "aws-test-secret-value", "GITHUB_TOKEN": "ghp_test_secret"}


@pytest.fixture
def short_tmpdir(socket: str) -> Iterator[Path]:
    """A TMUX_TMPDIR of the test's own, short: a socket's path has at most 107 bytes."""
    folder = Path(tempfile.mkdtemp(prefix="hx-", dir="/tmp"))
    yield folder
    # its server first: without its socket nobody could reach it to end it
    sockets = folder / f"tmux-{os.getuid()}"
    if sockets.is_dir():
        sockets.chmod(0o700)  # a test may have made it unsafe, which tmux refuses
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=15,
                   env={**os.environ, "TMUX_TMPDIR": str(folder)})
    shutil.rmtree(folder, ignore_errors=True)


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


@pytest.mark.parametrize(("said", "kind"), [
    # what tmux 3.3a prints, seen on this machine
    ("can't find session: T-1-abcdef", "gone"),
    ("can't find window: T-1-abcdef", "gone"),
    ("can't find pane: %12", "gone"),
    ("no server running on /tmp/tmux-0/handoff", "no-server"),
    ("error connecting to /tmp/tmux-0/handoff (No such file or directory)", "no-server"),
    ("error connecting to /tmp/tmux-0/handoff (Connection refused)", "no-server"),
    ("server exited unexpectedly", "no-server"),
    ("error connecting to /tmp/tmux-0/handoff (Permission denied)", "failed"),
    ("directory /tmp/x/tmux-0 has unsafe permissions", "failed"),
    ("unknown command: frobnicate", "failed"),
    ("", "failed"),
])
def test_failure_kind_reads_what_tmux_said(said: str, kind: str) -> None:
    assert failure_kind(said) == kind


def test_a_call_s_timeout_comes_from_the_environment_when_it_sets_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIMEOUT_VARIABLE, raising=False)
    assert call_timeout() == TMUX_TIMEOUT == 15.0
    monkeypatch.setenv(TIMEOUT_VARIABLE, " 4.5 ")
    assert call_timeout() == 4.5
    # a tmux client needs it no more than the server does: the bound is handoff's own
    assert TIMEOUT_VARIABLE not in BASE_ENV


@pytest.mark.parametrize("given", ["0", "601", "nan", "inf", "-3", "fifteen"])
def test_a_call_s_timeout_out_of_its_range_is_refused_with_the_way_back(
        monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    monkeypatch.setenv(TIMEOUT_VARIABLE, given)
    with pytest.raises(UsageError, match=r"HANDOFF_TMUX_TIMEOUT=.* is not a number of seconds "
                                         "up to 600") as caught:
        call_timeout()
    assert "HANDOFF_TMUX_TIMEOUT=30" in caught.value.hint
    assert "unset it for the default 15" in caught.value.hint

