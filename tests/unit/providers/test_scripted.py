"""handoff.providers.scripted: the built-in scripted agent as a provider (a real program in the
pane, no model, no network)."""

from __future__ import annotations

import sys
from pathlib import Path

from handoff.providers import REGISTRY, Launch, RoleSpec, get
from handoff.signs import SIGNALS_VARIABLE, TOOK, WAITING


def start(tmp_path: Path, signals: bool = True) -> Launch:
    return Launch(ticket="T-1", role="reviewer", worktree=tmp_path, brief=tmp_path / "brief.txt",
                  signals=tmp_path / "signals" if signals else None)


def test_it_is_always_there_and_runs_as_this_python() -> None:
    scripted = get(RoleSpec(provider="scripted"))
    assert REGISTRY["scripted"] is type(scripted)
    assert scripted.missing() is None and scripted.executable() == sys.executable
    from handoff import __version__

    assert scripted.version() == __version__


def test_its_signal_folder_reaches_it_through_one_variable(tmp_path: Path) -> None:
    scripted = get(RoleSpec(provider="scripted"))
    assert scripted.signals is True
    assert scripted.env(start(tmp_path)) == {SIGNALS_VARIABLE: str(tmp_path / "signals")}
    assert scripted.env(start(tmp_path, signals=False)) == {}


def test_a_message_was_taken_when_the_agent_says_it_took_it() -> None:
    scripted = get(RoleSpec(provider="scripted"))
    message = "Read and follow /x/brief-2.md"
    assert scripted.taken(f"header\n{TOOK} {message}\n{WAITING}\n", message)
    assert not scripted.taken(f"header\n{message}\n", message), "typed is not taken"
    assert not scripted.taken(f"{TOOK} Read and follow /x/brief-1.md\n", message)


def test_its_screen_reads_busy_then_its_turns_end() -> None:
    scripted = get(RoleSpec(provider="scripted"))
    assert scripted.read("handoff scripted agent — implementer\n").state == "starting"
    took = f"{TOOK} Read and follow /x/b.md\n"
    assert scripted.read(took).state == "busy"
    ended = scripted.read(f"{took}{WAITING}\n")
    assert (ended.state, ended.turn_ended) == ("ready", True)
    assert scripted.read(f"{took}{WAITING}\n{TOOK} next\n").state == "busy", "the next turn"
