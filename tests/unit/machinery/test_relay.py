"""handoff.machinery.relay: commands handed to the warm process (handoff.cli.warm), with real
processes, a real tmux server and real tickets."""

from __future__ import annotations

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
