"""handoff.machinery.proc, what needs no process: what a failed command's error keeps of what
it said. The runs themselves (bounds, process groups, environments) are in
tests/integration/machinery/test_proc.py."""

from __future__ import annotations

from handoff.machinery.proc import SAID_LIMIT, failure_said


def test_a_failed_command_is_said_whole_not_by_its_last_line() -> None:
    """git puts the cause before its last line: a full disk under a push reads "No space left
    on device" first, then "fatal: the remote end hung up unexpectedly"."""
    err = ("remote: error: unable to write file: No space left on device\n"
           "error: remote unpack failed\n\nfatal: the remote end hung up unexpectedly\n")
    assert failure_said(err, "", 128) == (
        "remote: error: unable to write file: No space left on device; error: remote unpack "
        "failed; fatal: the remote end hung up unexpectedly")
    assert failure_said("", "only on stdout\n", 1) == "only on stdout"
    assert failure_said("  \n", "", 3) == "exit 3"


def test_a_flood_keeps_its_end() -> None:
    said = failure_said("x" * 5000 + "\nthe cause at the end\n", "", 1)
    assert said.startswith("… ") and said.endswith("the cause at the end")
    assert len(said) == SAID_LIMIT + 2
