"""handoff.operations.gc.sessions: a tmux session on handoff's sockets goes when its ticket is
closed or its ticket directory is gone; one no record names goes only when its panes say it is
this HANDOFF_HOME's, and what a kept session's panes work in is kept too. Real tmux."""

from __future__ import annotations

import subprocess
from pathlib import Path

from handoff.operations.gc.found import Options
from handoff.operations.gc.sessions import session_leftovers
from handoff.phases import Phase
from tests.integration.operations.gc.test_gc import has_session
from tests.unit.operations.gc.test_found import KEY, saved
from tests.unit.operations.gc.test_sessions import session


def tag(socket: str, name: str, value: str) -> None:
    """What a peer's pane carries: its brief, in its ticket directory."""
    subprocess.run(["tmux", "-L", socket, "set-option", "-p", "-t", f"={name}:", "@handoff",
                    value], check=True, timeout=15)


def test_a_closed_tickets_session_goes_a_live_ones_stays_with_what_it_works_in(
        handoff_home: Path, socket: str, tmp_path: Path) -> None:
    closed = saved(handoff_home, "T-1", phase=Phase.CLOSED, socket=socket, session="s-1")
    live = saved(handoff_home, "T-2", socket=socket, session="s-2")
    work = tmp_path / "work"
    work.mkdir()
    session(socket, "s-1", tmp_path)
    session(socket, "s-2", work)
    found, busy = session_leftovers(handoff_home, [closed, live], Options(dry_run=True))
    assert [(i.kind, i.path, i.why, i.removable, i.removed) for i in found] == \
        [("session", f"{socket}:s-1", "ticket T-1 is closed", True, False)]
    assert has_session(socket, "s-1")
    assert busy.user_of(work) == f"tmux session {socket}:s-2"
    assert busy.user_of(tmp_path / "elsewhere") == ""
    assert busy.user_of(tmp_path) == f"tmux session {socket}:s-2", "a folder holding it too"
    [removed], _ = session_leftovers(handoff_home, [closed, live], Options())
    assert removed.removed and not has_session(socket, "s-1") and has_session(socket, "s-2")


def test_a_session_whose_panes_name_a_vanished_ticket_goes(handoff_home: Path, socket: str,
                                                          tmp_path: Path) -> None:
    gone = handoff_home / KEY / "T-3"
    session(socket, "s-3", tmp_path)
    tag(socket, "s-3", str(gone / "inbox" / "implementer" / "brief-1.md"))
    [item], _ = session_leftovers(handoff_home, [], Options())
    assert item.why == f"the directory of its ticket T-3 is gone ({gone})"
    assert item.removed and not has_session(socket, "s-3")


def test_a_session_that_tells_nothing_is_named_and_another_homes_is_none_of_ours(
        handoff_home: Path, socket: str, tmp_path: Path) -> None:
    session(socket, "mine", tmp_path)  # its pane has this HANDOFF_HOME, nothing more
    session(socket, "theirs", tmp_path, "-e", f"HANDOFF_HOME={tmp_path / 'other-home'}")
    unnamed = handoff_home / KEY / "T-4"
    unnamed.mkdir(parents=True)
    session(socket, "empty", tmp_path, "-e", f"HANDOFF_TICKET_DIR={unnamed}")
    found, busy = session_leftovers(handoff_home, [], Options())
    said = {i.path: i for i in found}
    assert set(said) == {f"{socket}:mine", f"{socket}:empty"}
    assert said[f"{socket}:mine"].why == f"nothing ties it to a ticket of {handoff_home}: " \
        "left alone"
    assert said[f"{socket}:empty"].why == f"its ticket directory {unnamed} holds no state: " \
        "left alone"
    assert not any(i.removable for i in found)
    assert all(has_session(socket, s) for s in ("mine", "theirs", "empty"))
    assert busy.user_of(tmp_path).startswith(f"tmux session {socket}:")
