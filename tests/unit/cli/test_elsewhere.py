"""handoff.cli.elsewhere's OnItsHost: a command about a ticket on a host goes there as the
person typed it, but --repo (a path of this machine), read as click reads the words. Here the
host's `ssh` is a stand-in that says what it was asked to run; the whole round trip over a
real sshd is tests/integration/operations/test_hosts.py's."""

from __future__ import annotations

from typing import Any

import pytest

from handoff.cli import app, elsewhere


def params(name: str) -> list[Any]:
    return list(app.command().commands[name].params)


@pytest.mark.parametrize(("name", "typed", "sent"), [
    ("stop", ["T-1", "--repo", "/here/repo"], ["T-1"]),
    ("stop", ["--repo=/here/repo", "T-1"], ["T-1"]),
    ("log", ["T-1", "-f", "--json"], ["T-1", "-f", "--json"]),
    ("resume", ["T-1", "--yes", "--more-rounds", "2", "--onto", "main"],
     ["T-1", "--yes", "--more-rounds", "2", "--onto", "main"]),
    # a value is its option's, whatever it looks like
    ("attach", ["T-1", "--role", "--repo", "--repo", "/x"], ["T-1", "--role", "--repo"]),
    # after `--` every word is an argument, --repo too
    ("answer", ["--repo", "/x", "T-1", "--", "--repo is wrong"],
     ["T-1", "--", "--repo is wrong"]),
])
def test_the_words_typed_go_to_the_host_but_this_machines_repo(
        name: str, typed: list[str], sent: list[str]) -> None:
    assert elsewhere.for_the_host(typed, params(name)) == sent


def test_the_commands_about_one_ticket_run_where_it_runs() -> None:
    """Those that act on a ticket where it runs go there as typed; close and finish of a
    ticket on a host fetch its work here first, so they are not handed over whole."""
    commands = app.command().commands
    there = {name for name, command in commands.items() if isinstance(command,
                                                                      elsewhere.OnItsHost)}
    assert there == {"resume", "log", "attach", "recycle", "answer", "stop", "diff"}
    assert commands["attach"].terminal_with == elsewhere.ALWAYS
    assert commands["log"].terminal_with == "follow"
    assert commands["resume"].here_with == ("every", "foreground")
    assert commands["stop"].terminal_with == "" and commands["stop"].here_with == ()
