"""handoff.cli.options: what a TAB completes TICKET, ROLE and a window to, read from the ticket
folders and the configuration here, and never failing. (The whole chain through bash is
tests/project/test_cli_conventions.py's.)"""

from __future__ import annotations

from pathlib import Path

from handoff.cli.options import ticket_ids


def folder(home: Path, key: str, ticket: str, state: str = "{}") -> None:
    (home / key / ticket).mkdir(parents=True)
    (home / key / ticket / "state.json").write_text(state)


def test_ticket_ids_are_the_folders_of_every_repository(handoff_home: Path) -> None:
    folder(handoff_home, "repo-0123456789", "C-1")
    folder(handoff_home, "repo-0123456789", "C-2", state="{broken")  # any state at all
    folder(handoff_home, "other-abcdef0123", "C-3")
    folder(handoff_home, "other-abcdef0123", "D-1")
    folder(handoff_home, "other-abcdef0123", "CX-1")
    (handoff_home / "repo-0123456789" / "C-9").mkdir()  # no state.json: no ticket
    assert ticket_ids("C-") == ["C-1", "C-2", "C-3"]
    assert ticket_ids("") == ["C-1", "C-2", "C-3", "CX-1", "D-1"]
    assert ticket_ids("X") == []


def test_no_state_folder_yet_completes_to_nothing(handoff_home: Path) -> None:
    assert not handoff_home.exists()
    assert ticket_ids("") == []
