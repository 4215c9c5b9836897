"""handoff.loop.monitor: judging a peer from its hooks and its screen, each judgement with evidence."""

from __future__ import annotations

from pathlib import Path

from handoff.loop.monitor import (
    HOOKED_LOOK,
    STARTING_LOOK,
    WORKING_LOOK,
    Decision,
    PeerMonitor,
    Timing,
)
from handoff.providers.screen import (
    BLOCKED,
    BUSY,
    DIALOG,
    READY,
    STARTING,
    Blocker,
    Dialog,
    Reading,
)
from handoff.providers.signals import Signal

TRUST = Dialog("trust", ("trust this folder",), ("Down", "Enter"), "trust it yourself", "trusted")
NEVER = Dialog("settings-error", ("Settings Error",), (), "mend the settings")
OFFLINE = Blocker("unreachable", "ECONNREFUSED", "check the network", patience=30.0)
TIMING = Timing(start=60.0, stall=600.0, grace=5.0, nudges=1)


def monitor(answer: frozenset[str] = frozenset()) -> PeerMonitor:
    return PeerMonitor(launched=1000.0, timing=TIMING, answer=answer)


def actions(decisions: list[Decision]) -> list[tuple[str, str]]:
    return [(d.action, d.state) for d in decisions]


def busy() -> Reading:
    return Reading(BUSY, draft="", evidence=("✻ Working… (3s · esc to interrupt)",))


def ready(ended: bool = False) -> Reading:
    return Reading(READY, draft="", turn_ended=ended,
                   evidence=("✻ Worked for 3s",) if ended else ("❯",))


def signal(event: str, data: dict[str, object] | None = None) -> Signal:
    return Signal(event, Path(f"/x/{event}.json"), 0, dict(data or {}))


def test_a_working_peer_is_noted_once_with_the_screen_line_it_was_read_from() -> None:
    m = monitor()
    first = m.observe(1001.0, busy())
    assert actions(first) == [("note", "working")]
    assert "esc to interrupt" in first[0].evidence
    assert m.observe(1002.0, busy()) == [], "the same state is not noted twice"


def test_a_turn_that_ends_without_a_report_is_nudged_after_the_grace_then_escalated() -> None:
    m = monitor()
    m.observe(1001.0, busy())
    assert actions(m.observe(1002.0, ready(ended=True))) == [("note", "turn-ended")]
    assert m.observe(1006.0, ready(ended=True)) == [], "still within the grace"
    nudge = m.observe(1008.0, ready(ended=True))
    assert actions(nudge) == [("nudge", "turn-ended")]
    assert "Worked for 3s" in nudge[0].evidence and "no report 6s later" in nudge[0].evidence

    m.after_nudge_or_answer(1008.5)
    assert actions(m.observe(1009.0, busy())) == [("note", "working")]
    m.observe(1010.0, ready(ended=True))
    escalated = m.observe(1016.0, ready(ended=True))
    assert actions(escalated) == [("escalate", "turn-ended")]
    assert "after 1 nudge(s)" in escalated[0].evidence and escalated[0].fix


def test_hooks_come_first_the_stop_hook_ends_a_turn_without_any_screen() -> None:
    m = monitor()
    assert actions(m.observe(1001.0, None, [signal("prompt")])) == [("note", "working")]
    ended = m.observe(1002.0, None, [signal("stop")])
    assert actions(ended) == [("note", "turn-ended")]
    assert "hook Stop" in ended[0].evidence
    assert actions(m.observe(1008.0, None)) == [("nudge", "turn-ended")]


def test_a_bare_input_line_does_not_end_a_turn_its_prompt_hook_started() -> None:
    """Gemini CLI and opencode show their input line while they work: after the prompt hook,
    only the Stop hook (or a screen that says the turn ended) ends the turn at once; a bare
    input line does only when it lasts, so a lost Stop hook still ends it."""
    m = monitor()
    m.observe(1001.0, None, [signal("prompt")])
    assert m.observe(1002.0, ready()) == [] and m.observe(1020.0, ready()) == []
    assert m.next_look(1020.0, hooks=True) <= 12.0, "looked at again when the bare line is due"
    assert m.observe(1025.0, busy()) == [], "still working, as its prompt hook said"
    assert m.observe(1026.0, ready()) == [], "the bare line's clock starts again"
    late = m.observe(1057.0, ready())
    assert actions(late) == [("note", "turn-ended")] and "with no Stop hook" in late[0].evidence
    hooked = monitor()
    hooked.observe(1001.0, None, [signal("prompt")])
    hooked.observe(1002.0, ready())
    assert actions(hooked.observe(1003.0, None, [signal("stop")])) == [("note", "turn-ended")]
    marked = monitor()
    marked.observe(1001.0, None, [signal("prompt")])
    assert actions(marked.observe(1002.0, ready(ended=True))) == [("note", "turn-ended")]


def test_the_evidence_names_the_hook_as_the_cli_calls_it() -> None:
    m = monitor()
    arrived = m.observe(1001.0, None, [signal("prompt", {"hook_event_name": "BeforeAgent"})])
    assert arrived[0].evidence == "hook BeforeAgent: the prompt arrived"
    ended = m.observe(1002.0, None, [signal("stop", {"hook_event_name": "AfterAgent"})])
    assert ended[0].evidence == "hook AfterAgent: the turn ended"
    odd = monitor().observe(1001.0, None, [signal("prompt", {"hook_event_name": "x\x1b[2J"})])
    assert odd[0].evidence == "hook UserPromptSubmit: the prompt arrived", "never a raw escape"


def test_a_stop_hook_before_any_prompt_arrived_is_not_a_finished_turn() -> None:
    m = monitor()
    assert [d for d in m.observe(1001.0, None, [signal("stop")]) if d.action != "note"] == []
    assert m.observe(1010.0, None) == []


def test_an_allowed_dialog_is_answered_with_its_keys_a_bounded_number_of_times() -> None:
    m = monitor(frozenset({"trust"}))
    shown = Reading(DIALOG, dialog=TRUST, evidence=("Yes, I trust this folder",))
    first = m.observe(1001.0, shown)
    assert actions(first) == [("answer", "dialog (trust)")]
    assert first[0].keys == ("Down", "Enter") and "trust this folder" in first[0].evidence
    assert actions(m.observe(1002.0, shown)) == [("answer", "dialog (trust)")]
    third = m.observe(1003.0, shown)
    assert actions(third) == [("escalate", "dialog (trust)")]
    assert "answered twice already" in third[0].evidence


def test_a_dialog_not_allowed_by_config_goes_to_a_person_with_its_fix() -> None:
    decided = monitor().observe(1001.0, Reading(DIALOG, dialog=TRUST,
                                                evidence=("Yes, I trust this folder",)))
    assert actions(decided) == [("escalate", "dialog (trust)")]
    assert decided[0].fix == "trust it yourself"


def test_a_dialog_handoff_never_answers_is_escalated_even_when_listed() -> None:
    decided = monitor(frozenset({"settings-error"})).observe(
        1001.0, Reading(DIALOG, dialog=NEVER, evidence=("Settings Error",)))
    assert actions(decided) == [("escalate", "dialog (settings-error)")]
    assert "never answers" in decided[0].evidence


def test_a_blocker_counts_only_once_it_outlasted_the_clis_own_retries() -> None:
    m = monitor()
    offline = Reading(BLOCKED, blocker=OFFLINE, evidence=("ECONNREFUSED · retrying in 7s",))
    assert actions(m.observe(1001.0, offline)) == [("note", "blocked (unreachable)")]
    assert m.observe(1020.0, offline) == []
    escalated = m.observe(1031.0, offline)
    assert actions(escalated) == [("escalate", "blocked (unreachable)")]
    assert escalated[0].fix == "check the network" and "ECONNREFUSED" in escalated[0].evidence


def test_a_blocker_that_clears_starts_its_patience_afresh() -> None:
    m = monitor()
    offline = Reading(BLOCKED, blocker=OFFLINE, evidence=("ECONNREFUSED",))
    m.observe(1001.0, offline)
    m.observe(1020.0, busy())
    assert [d.action for d in m.observe(1040.0, offline)] == ["note"]


def test_a_peer_that_never_shows_its_prompt_is_escalated_after_the_start_timeout() -> None:
    m = monitor()
    assert m.observe(1030.0, Reading(STARTING)) == []
    late = m.observe(1061.0, Reading(STARTING))
    assert actions(late) == [("escalate", "starting")]
    assert "61s after launch" in late[0].evidence


def test_a_submitted_prompt_on_an_idle_screen_is_a_finished_turn() -> None:
    """A turn quicker than one look: never seen busy, but our message shows as sent."""
    m = monitor()
    assert actions(m.observe(1001.0, ready(), submitted=True)) == [("note", "turn-ended")]


def test_a_screen_that_never_changes_is_a_stall_but_a_ticking_spinner_is_not_progress() -> None:
    m = monitor()
    m.observe(1001.0, busy(), screen="● Bash(sleep 999)\n✻ Pondering… (1s · esc to interrupt)")
    assert m.observe(1500.0, busy(), screen="● Bash(sleep 999)\n✢ Pondering… (500s · esc to "
                                            "interrupt)") == []
    stalled = m.observe(1602.0, busy(), screen="● Bash(sleep 999)\n✶ Pondering… (601s · esc "
                                               "to interrupt)")
    assert actions(stalled) == [("escalate", "stalled")]
    assert "601s" in stalled[0].evidence


def test_new_output_on_screen_is_progress() -> None:
    m = monitor()
    m.observe(1001.0, busy(), screen="● Bash(make)\n")
    m.observe(1500.0, busy(), screen="● Bash(make)\n  ⎿  compiling a.c\n")
    assert m.observe(1602.0, busy(), screen="● Bash(make)\n  ⎿  compiling a.c\n") == []


def test_a_notification_hook_is_noted_with_what_it_said() -> None:
    decided = monitor().observe(1001.0, None, [signal("notification", {
        "message": "Claude needs your permission to use Bash"})])
    assert actions(decided) == [("note", "notified")]
    assert "needs your permission" in decided[0].evidence


def test_a_turn_finishing_its_own_hooks_is_not_new_work() -> None:
    m = monitor()
    m.observe(1001.0, None, [signal("prompt")])
    m.observe(1002.0, None, [signal("stop")])
    settling = Reading(BUSY, draft="", settling=True,
                       evidence=("✽ Jitterbugging… (running Stop hook · 0s)",))
    assert m.observe(1003.0, settling) == []
    assert actions(m.observe(1007.5, ready(ended=True))) == [("nudge", "turn-ended")]


def test_a_screen_lagging_behind_the_stop_hook_does_not_reopen_the_turn() -> None:
    m = monitor()
    m.observe(1001.0, None, [signal("prompt"), signal("stop")])
    assert m.observe(1001.1, busy()) == [], "the spinner is still drawn: not new work"
    assert actions(m.observe(1007.0, ready(ended=True))) == [("nudge", "turn-ended")]
    m.after_nudge_or_answer(1007.5)
    assert actions(m.observe(1008.0, None, [signal("prompt")])) == [("note", "working")]
    assert actions(m.observe(1008.5, busy())) == [], "a prompt hook opened the new turn"


def test_a_permission_notification_asks_a_person() -> None:
    decided = monitor().observe(1001.0, None, [signal("notification", {
        "notification_type": "permission_prompt",
        "message": "Claude needs your permission to use Bash"})])
    assert actions(decided) == [("escalate", "waiting for permission")]
    assert "needs your permission" in decided[0].evidence and "bypass" in decided[0].fix


def test_a_permission_notification_with_its_dialog_on_screen_is_one_escalation() -> None:
    """The hook woke the orchestrator; the screen names the question asked."""
    asking = Dialog("permission", ("Do you want to proceed?",), (), "bypass or answer it")
    decided = monitor().observe(1001.0, Reading(DIALOG, draft="", dialog=asking,
                                                evidence=("Do you want to proceed?",)),
                                [signal("notification", {"notification_type": "permission_prompt",
                                                         "message": "Claude needs permission"})])
    assert actions(decided) == [("escalate", "dialog (permission)")]
    assert "Do you want to proceed?" in decided[0].evidence


def test_a_starting_peer_is_looked_at_often_a_working_one_rarely() -> None:
    """Start-up screens show only on screen; once a peer works, its hooks (or, without any, a
    slower look at its screen) tell the rest."""
    m = monitor()
    assert m.next_look(1001.0, hooks=True) == STARTING_LOOK, "not arrived yet"
    m.observe(1001.0, None, [signal("prompt")])
    # a turn's first request is where an unreachable API or a spent quota shows, on screen
    assert m.next_look(1001.0, hooks=True) == WORKING_LOOK
    assert m.next_look(1001.0 + HOOKED_LOOK - 1, hooks=True) == WORKING_LOOK
    assert m.next_look(1001.0 + HOOKED_LOOK, hooks=True) == HOOKED_LOOK
    assert m.next_look(1001.0 + HOOKED_LOOK, hooks=False) == WORKING_LOOK
    m.observe(1001.0 + 2 * HOOKED_LOOK, None, [signal("prompt")])
    assert m.next_look(1001.0 + 2 * HOOKED_LOOK, hooks=True) == WORKING_LOOK, "a new turn"
    assert STARTING_LOOK < WORKING_LOOK < HOOKED_LOOK <= TIMING.stall


def test_the_next_look_comes_when_a_clock_runs_out() -> None:
    m = monitor()
    m.observe(1001.0, busy())
    m.observe(1002.0, ready(ended=True))  # the turn ended without a report: grace 5 s
    assert m.next_look(1003.0, hooks=True) == 4.0, "at the end of the grace, for the nudge"
    assert m.next_look(1009.0, hooks=True) == 0.0, "overdue: now"
    stalling = PeerMonitor(launched=1000.0, timing=Timing(stall=10.0))
    stalling.observe(1000.0, busy(), screen="same")
    assert stalling.next_look(1004.0, hooks=True) == 6.0, "when the stall would be judged"


def test_a_blocked_peer_is_looked_at_as_often_as_one_without_hooks() -> None:
    m = monitor()
    m.observe(1001.0, busy())
    m.observe(1002.0, Reading(BLOCKED, draft="", blocker=OFFLINE, evidence=("ECONNREFUSED",)))
    assert m.next_look(1002.0, hooks=True) == WORKING_LOOK


def unreadable() -> Reading:
    """A live screen none of the CLI's rules match: no input line, no work, no dialog."""
    return Reading(STARTING)


def test_a_peer_nothing_can_be_read_of_is_said_once_with_its_fix() -> None:
    m = PeerMonitor(launched=1000.0, timing=Timing(start=600.0, unrecognised=60.0))
    assert m.observe(1059.0, unreadable()) == []
    decided = m.observe(1061.0, unreadable())
    assert actions(decided) == [("unrecognised", "screen-unrecognised")]
    assert "no hook signal and no screen rule matched for 61s" in decided[0].evidence
    assert "roles.<role>.markers" in decided[0].fix
    assert m.observe(1200.0, unreadable()) == [], "once per spell"
    m.observe(1201.0, busy())  # read again: the next spell is said again
    assert m.observe(1260.0, unreadable()) == []
    assert actions(m.observe(1262.0, unreadable())) == [("unrecognised", "screen-unrecognised")]


def test_hook_signals_or_a_readable_screen_keep_a_peer_recognised() -> None:
    m = PeerMonitor(launched=1000.0, timing=Timing(start=600.0, unrecognised=60.0))
    m.observe(1050.0, unreadable(), [signal("prompt")])
    assert "screen-unrecognised" not in [s for _, s in actions(m.observe(1100.0, unreadable()))]
    assert m.next_look(1100.0, hooks=True) == 10.0, "looked at when the spell would be said"
    assert actions(m.observe(1111.0, unreadable()))[-1] == ("unrecognised", "screen-unrecognised")
    gone = PeerMonitor(launched=1000.0, timing=Timing(start=600.0, unrecognised=60.0))
    assert gone.observe(1100.0, None) == [], "no screen (a dead pane) is no unread screen"
    working = PeerMonitor(launched=1000.0, timing=Timing(start=600.0, unrecognised=60.0))
    for now in (1030.0, 1060.0, 1090.0):
        assert "screen-unrecognised" not in [s for _, s in actions(working.observe(now, busy()))]


def test_a_permission_request_hook_asks_a_person() -> None:
    decided = monitor().observe(1001.0, None, [signal("permission", {
        "hook_event_name": "PermissionRequest", "tool_name": "shell"})])
    assert actions(decided) == [("escalate", "waiting for permission")]
    assert decided[0].evidence == "hook PermissionRequest: permission (shell)"
    assert "bypass" in decided[0].fix
