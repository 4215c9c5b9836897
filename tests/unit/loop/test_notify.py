"""Telling a ticket's person: the tmux message, the desktop notifier and the user's `notify`
command, for tickets run with the scripted agents in real tmux and git."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from handoff import config as config_mod
from handoff.errors import UsageError
from handoff.loop import notify
from handoff.phases import Phase


def tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                          timeout=15).stdout


def notice(phase: str = "needs-human") -> notify.Notice:
    return notify.Notice(ticket="T-9", repo="/nowhere", phase=phase, round=2, kind=phase,
                         message="the implementer is blocked", time="2026-01-01T00:00:00")


def test_only_needing_and_ending_phases_are_told() -> None:
    from handoff.phases import PHASES
    from handoff.record.ticket import State
    told = {p for p in PHASES if notify.notice_for(State(ticket="T", repo="/r", repo_key="k",
                                                         phase=Phase(p))) is not None}
    assert told == {"awaiting-approval", "needs-human", "escalated", "passed"}


@pytest.mark.parametrize("phase", sorted(notify.TOLD))
def test_a_notice_says_what_to_do_next_as_status_does(phase: str) -> None:
    """The notice's next step is the one handoff.next_steps gives `status` and the refusals."""
    from handoff.next_steps import next_step
    from handoff.record.ticket import State
    found = notify.notice_for(State(ticket="T", repo="/r", repo_key="k", phase=Phase(phase),
                                    reason="why", branch="handoff/T"))
    assert found is not None
    assert found.message == f"why — next: {next_step(phase, 'T')}"
    quiet = notify.notice_for(State(ticket="T", repo="/r", repo_key="k", phase=Phase(phase),
                                    branch="handoff/T"))
    assert quiet is not None and quiet.message.endswith(f" — next: {next_step(phase, 'T')}")


@pytest.mark.parametrize("value", ["notify-me --json", [], ["notify-me", ""], ["x", 3],
                                   {"argv": ["x"]}])
def test_a_bad_notify_value_is_a_usage_error(handoff_home: Path, value: Any) -> None:
    handoff_home.mkdir(parents=True)
    (handoff_home / "config.yaml").write_text(json.dumps({"notify": value}), encoding="utf-8")
    if value == []:  # an empty list: nobody is to be told by a command
        assert config_mod.load(handoff_home, None).notify == ()
        return
    with pytest.raises(UsageError, match="'notify' must be a command as a list of non-empty "
                                         "strings") as raised:
        config_mod.load(handoff_home, None)
    assert "stdin" in (raised.value.hint or "")


def test_the_init_template_offers_notify(tmp_path: Path, handoff_home: Path) -> None:
    written = config_mod.config_template(tmp_path)
    assert written is not None and "# notify: []" in written.read_text(encoding="utf-8")
    text = written.read_text(encoding="utf-8").replace("# notify: []", 'notify: ["me"]')
    written.write_text(text, encoding="utf-8")
    assert config_mod.load(handoff_home, tmp_path).notify == ("me",)
