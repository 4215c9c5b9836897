"""handoff.machinery.reaper: what a peer left running past its pane is ended, and nothing else is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from handoff.machinery import reaper
from handoff.machinery.peers import Peers, allowlisted_env, session_name
from handoff.machinery.tmux import Tmux
from handoff.providers.base import Launch, Provider
from tests.conftest import wait_until

# ignores SIGTERM and SIGHUP, like Gemini CLI's node processes do
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
           "signal.signal(signal.SIGHUP, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"


def start(value: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, reaper.MARKER: value}
    child = subprocess.Popen([sys.executable, "-c", STUBBORN], env=env, start_new_session=True,
                             stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"up\n"
    return child


def test_reap_ends_only_the_marked_processes_even_stubborn_ones(tmp_path: Path) -> None:
    ours = start(reaper.marker(tmp_path / "T-1", "reviewer"))
    other_role = start(reaper.marker(tmp_path / "T-1", "implementer"))
    other_ticket = start(reaper.marker(tmp_path / "T-10", "reviewer"))
    try:
        found = reaper.reap(reaper.marker(tmp_path / "T-1", "reviewer"), grace=0.5)
        assert found == [ours.pid]
        assert ours.wait(timeout=5) == -9, "TERM was ignored, KILL ended it"
        assert other_role.poll() is None and other_ticket.poll() is None
        every = reaper.reap(f"{tmp_path / 'T-1'}#", grace=0.5)
        assert every == [other_role.pid], "a ticket's roles, not a ticket with a longer name"
        assert other_ticket.poll() is None
    finally:
        for child in (ours, other_role, other_ticket):
            child.kill()
            child.wait()


class Leaving(Provider):
    """A CLI that starts a helper in a session of its own, as Codex does with a command."""

    name = "leaving"

    def missing(self) -> str | None:
        return None

    def argv(self, launch: Launch) -> list[str]:
        code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                f"{STUBBORN!r}], start_new_session=True); time.sleep(600)")
        return [sys.executable, "-c", code]


def test_retiring_a_peer_ends_what_it_left_running(socket: str, handoff_home: Path,
                                                   tmp_path: Path) -> None:
    tdir = handoff_home / "repo-0123456789" / "T-1"
    tdir.mkdir(parents=True)
    peers = Peers(Tmux(socket, handoff_home), session_name("T-1", "repo-0123456789"), tdir)
    peers.ensure_session(tmp_path, [sys.executable, "-c", "import time; time.sleep(600)"])
    peers.launch(Leaving(), Launch("T-1", "reviewer", tmp_path, tmp_path / "brief-1.md"),
                 allowlisted_env({}))
    mark = reaper.marker(tdir, "reviewer")
    wait_until(lambda: len(reaper.marked(mark)) == 2, what="the CLI and its helper")

    assert peers.retire("reviewer", tdir / "transcripts" / "reviewer-1.log")

    assert reaper.marked(mark) == []
    assert peers.stop() is True
