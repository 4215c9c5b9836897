"""handoff.operations.remote: handoff between machines, both ends. What a host says reaches
this terminal harmless; the words a ticket's command sends keep --repo MIRROR an option;
a host's mirror is made once, private, and a closed ticket's refs in it go. Everything over a
real sshd is tests/integration/operations/test_hosts.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.build import code_digest, version
from handoff.cli import app
from handoff.config import Host
from handoff.errors import UsageError
from handoff.operations import remote
from handoff.record.placed import Placement

PLACEMENT = Placement(ticket="T-1", host="build1", repo="/here/repo", mirror="/there/repo-1",
                      base="main", base_commit="0" * 40)


def test_what_a_host_says_reaches_this_terminal_without_control_characters() -> None:
    said = {"reason": "ok\x1b]0;owned\x07\x1b[2J\rdone\n\tnext", "run\x9b": ["a\x00b", 3, None]}
    assert remote.printable(said) == {"reason": "ok]0;owned[2Jdone\n\tnext",
                                      "run": ["ab", 3, None]}


@pytest.mark.parametrize("args", [["stop", "T-1"], ["answer", "T-1", "--", "--it is -x"],
                                  ["log", "T-1", "--follow"]])
def test_the_hosts_handoff_reads_the_mirror_as_its_repo_whatever_follows(
        args: list[str]) -> None:
    """--repo MIRROR goes right after the command's name: after a `--` it would be an
    argument. Parsed here by the same command line the host runs."""
    sent = remote.mirrored(args, PLACEMENT)
    assert sent[:3] == [args[0], "--repo", "/there/repo-1"]
    command = app.command().commands[args[0]]
    parsed = command.make_context(args[0], sent[1:]).params
    assert str(parsed["repo"]) == "/there/repo-1" and parsed["ticket"] == "T-1"
    if args[0] == "answer":
        assert parsed["text"] == "--it is -x"


def test_the_ssh_url_of_a_host_names_its_destination() -> None:
    for destination, url in (("me@build1", "ssh://me@build1/m"), ("build1", "ssh://build1/m"),
                             ("me@::1", "ssh://me@[::1]/m")):
        assert remote.Remote(Host("b", ("ssh", "-p", "22", destination))).url("/m") == url


def test_a_host_of_another_handoff_is_not_ready_and_says_which() -> None:
    same = remote.HostState("b", True, handoff=version(), code=code_digest())
    assert same.same and same.problem() == ""
    other = remote.HostState("b", True, handoff="0.0.1", code="abc")
    assert not other.same and "it runs handoff 0.0.1 (code abc)" in other.problem()
    assert remote.HostState("b", False, "unreachable: no route").problem() == \
        "unreachable: no route"


def test_a_failed_commands_last_words_are_short() -> None:
    assert remote.last_words("\n\none\ntwo\n\nthree\nfour\n", 1) == "two / three / four"
    assert remote.last_words("  \n", 255) == "exit 255"
    assert len(remote.last_words("x" * 1000, 1)) == 400


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden", "x" * 121])
def test_a_mirror_name_that_could_leave_the_mirrors_folder_is_refused(
        handoff_home: Path, name: str) -> None:
    with pytest.raises(UsageError, match="is not a mirror's name"):
        remote.make_mirror(handoff_home, name)
    assert not (handoff_home / remote.MIRRORS).exists() or \
        not any((handoff_home / remote.MIRRORS).iterdir())
