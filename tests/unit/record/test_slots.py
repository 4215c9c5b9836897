"""The machine's slots (handoff.record.slots): real files, real locks, real processes."""

from __future__ import annotations

import os
from pathlib import Path

from handoff.machinery.launcher import hold_slot
from handoff.record import slots
from handoff.record.lock import TicketLock
from handoff.record.slots import Slot


def slot(home: Path, name: str, order: str, limit: int, now: bool = False) -> Slot:
    return Slot(home, home / "repo-1" / name, order, limit, now=now)


def test_a_limit_of_two_lets_two_work_and_the_third_waits_until_one_gives_back(
        tmp_path: Path) -> None:
    a, b, c = (slot(tmp_path, t, f"2026-01-0{i}", 2) for i, t in enumerate("ABC", 1))
    assert a.take() is None and b.take() is None
    waits = c.take()
    assert waits is not None and waits.place(c.ticket) == 1 and len(waits.at_work) == 2
    assert "2 of 2 tickets at work" in waits.why(c.ticket)
    assert c.take() is not None, "still nothing free"
    b.release()
    assert c.take() is None and c.held
    seen = slots.standing(tmp_path)
    assert sorted(h.name for h in seen.at_work) == ["A", "C"] and not seen.waiting
    assert seen.limit == 2, "status reads the limit the holders wrote"


def test_waiters_start_in_the_order_their_tickets_were_made_not_the_order_they_asked(
        tmp_path: Path) -> None:
    first = slot(tmp_path, "A", "2026-01-01", 1)
    assert first.take() is None
    late = slot(tmp_path, "Z", "2026-01-09", 1)
    assert late.take() is not None  # asks first, but was made last
    early = slot(tmp_path, "M", "2026-01-05", 1)
    queue = early.take()
    assert queue is not None and [h.name for h in queue.waiting] == ["M", "Z"]
    first.release()
    assert late.take() is not None, "M is owed the slot: it was made before Z"
    assert early.take() is None
    early.release()
    assert late.take() is None


def test_now_takes_a_slot_over_the_limit_and_still_counts(tmp_path: Path) -> None:
    a = slot(tmp_path, "A", "1", 1)
    assert a.take() is None
    urgent = slot(tmp_path, "U", "3", 1, now=True)
    assert urgent.take() is None, "--now does not wait"
    b = slot(tmp_path, "B", "2", 1)
    assert b.take() is not None
    a.release()
    assert b.take() is not None, "U counts: 1 of 1 is at work"
    urgent.release()
    assert b.take() is None


def test_release_gives_back_the_slot_and_the_file_and_is_harmless_twice(
        tmp_path: Path) -> None:
    a = slot(tmp_path, "A", "1", 1)
    assert a.take() is None
    a.release()
    a.release()
    assert not a.held and not list(slots.folder(tmp_path).iterdir())
    assert slots.standing(tmp_path).at_work == ()


def test_the_default_limit_follows_cores_and_memory() -> None:
    cores = os.cpu_count() or 1
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = slots.default_limit()
    assert 1 <= limit <= 2 * cores
    assert limit <= max(1, memory // (1 << 30))
    assert limit in (2 * cores, max(1, memory // (1 << 30)))


def test_a_batch_let_go_together_takes_the_slots_in_the_order_it_was_made(
        tmp_path: Path) -> None:
    """`start --plans`: every orchestrator of the batch stands in line before any asks, so the
    first plans get the free slots whichever orchestrator asks first."""
    made = [slot(tmp_path, f"P-{n}", f"2026-01-01T00:00:0{n}", 2) for n in range(1, 5)]
    for one in made:
        one.stand_in_line()
    asked_last_first = list(reversed(made))  # the last plan's orchestrator asks first
    took = [one.ticket.name for one in asked_last_first if one.take() is None]
    assert sorted(took) == ["P-1", "P-2"], "the first two plans get the two slots"
    queue = made[3].take()
    assert queue is not None and [h.name for h in queue.waiting] == ["P-3", "P-4"]
    for one in made:
        one.release()
    assert slots.standing(tmp_path) == slots.Standing((), (), 0)


def test_a_live_peer_keeps_its_tickets_slot_while_no_orchestrator_holds_the_ticket(
        tmp_path: Path) -> None:
    """A peer's launcher locks its ticket's PEER file for the peer's life (done here as the
    launcher does it): once the ticket's orchestrator is gone (kill -9), the ticket is still
    at work and another waits; while an orchestrator holds the ticket (it gave its slot back
    to ask a person), its idle peers take no slot."""
    ticket = tmp_path / "repo-1" / "K-1"
    ticket.mkdir(parents=True)
    record = ticket / "state.json"
    record.write_text('{"phase": "implementing"}', encoding="utf-8")  # as the kill left it
    hold = slots.peer_hold(tmp_path, ticket, "2026-01-01", 1, "implementer")
    hold_slot(hold["path"], hold["holder"])  # this process plays the peer: it keeps the lock
    other = slot(tmp_path, "K-2", "2026-01-02", 1)
    queue = other.take()
    assert queue is not None, "the limit holds: the killed ticket's peer works on"
    assert [h.name for h in queue.at_work] == ["K-1"]
    assert [h.pid for h in queue.at_work] == [os.getpid()], "the peer's pid, for status"
    record.write_text('{"phase": "needs-human"}', encoding="utf-8")
    with TicketLock(ticket / "lock"):  # its orchestrator gave its slot back to ask a person
        assert other.take() is None, "its idle peers do not count"
    other.release()
    record.write_text('{"phase": "passed"}', encoding="utf-8")
    assert other.take() is None, "a finished ticket's leftover process keeps no slot"
    other.release()
    record.write_text('{"phase": "implementing"}', encoding="utf-8")
    mine = Slot(tmp_path, ticket, "2026-01-01", 1)
    assert mine.take() is None, "resumed, the ticket takes its slot back past its own peer"
    mine.release()
