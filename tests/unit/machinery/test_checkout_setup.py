"""handoff.machinery.checkout_setup: a checkout's shared folders and post_create, run once per
worktree, fenced and given its environment; run again until once complete; never written
through a link the commit holds; no bytecode written in a detached checkout."""

from __future__ import annotations

from handoff.machinery.checkout_setup import bytecode_env


def test_only_a_detached_checkout_writes_no_bytecode() -> None:
    for name in ("qa", "security", "reviewer", "gate"):
        assert bytecode_env(name) == {"PYTHONDONTWRITEBYTECODE": "1"}
    assert bytecode_env("implementer") == {}, "its own checkout, never reset by handoff"
