"""handoff.signs: the names a peer's state is read by, light enough for the scripted agent to
start without the providers."""

from __future__ import annotations

from handoff import signs


def test_each_hook_event_and_each_line_of_the_agent_is_its_own() -> None:
    events = (signs.PROMPT, signs.STOP, signs.NOTIFICATION, signs.PERMISSION)
    assert len(set(events)) == 4 and all(e and e == e.strip() for e in events)
    lines = (signs.TOOK, signs.WAITING, signs.QUOTA)
    assert len(set(lines)) == 3
    # a line read as one of the others would judge a peer wrongly (busy as idle)
    assert not any(a != b and b.startswith(a) for a in lines for b in lines)

