"""handoff.machinery.relay: commands handed to the warm process (handoff.cli.warm), with real
processes, a real tmux server and real tickets."""

from __future__ import annotations

import os

import pytest

from handoff.machinery import relay


def test_a_request_is_read_back_as_it_was_sent() -> None:
    request = relay.Request([b"start", b"T-1", b"--plan", "pl\u00e4n.md".encode()],
                            {b"A": b"1", b"EMPTY": b"", b"EQ": b"a=b"}, b"/tmp/x y", 10)
    payload = request.encode()
    head, _, body = payload.partition(b"\n")
    assert int(head) == len(body)
    back = relay.Request.decode(body)
    assert (back.argv, back.env, back.cwd, back.nice) == \
        (request.argv, request.env, request.cwd, request.nice)
    for bad in (b"", b"other/1\0/\x000\x000", relay.PROTOCOL + b"\0/\x000\x003\0a"):
        try:
            relay.Request.decode(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was taken for a request")


def test_a_command_that_may_ask_its_person_at_a_terminal_is_not_relayed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its prompt stays the terminal's own process's: Ctrl-C reaches the read at once."""
    monkeypatch.delenv(relay.ENV, raising=False)
    monkeypatch.setattr(os, "isatty", lambda fd: True)
    assert not relay.relayable(["start", "T-1", "--plan", "p.md"])
    assert not relay.relayable(["resume", "T-1"])
    assert relay.relayable(["start", "T-1", "--plan", "p.md", "--yes"])
    assert relay.relayable(["close", "T-1"])
    assert relay.relayable(["resume", "T-1"], window=True), "its window's launcher relays it"
    monkeypatch.setattr(os, "isatty", lambda fd: False)
    assert relay.relayable(["start", "T-1", "--plan", "p.md"]), "nobody to ask: it waits"
