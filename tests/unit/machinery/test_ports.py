"""handoff.machinery.ports: TCP ports for worktrees, never the same for two live ones."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from handoff.errors import ExternalFailure
from handoff.machinery.ports import PortBook, free
from tests.faults.catalog import fault

LOW, HIGH = 24100, 24299  # room for the 20 tickets × 3 worktrees × 2 ports one test books


def alive(owner: str) -> bool:
    return not owner.startswith("dead")


def test_a_worktree_keeps_its_ports_and_gets_more_when_it_needs_more(tmp_path: Path) -> None:
    book = PortBook(tmp_path, tmp_path / "claims")
    first = book.take("T#implementer", 2, LOW, HIGH, alive)
    assert len(first) == 2 and len(set(first)) == 2 and all(LOW <= p <= HIGH for p in first)
    assert book.take("T#implementer", 2, LOW, HIGH, alive) == first, "the same, asked again"
    other = book.take("T#reviewer", 2, LOW, HIGH, alive)
    assert not set(other) & set(first)
    assert book.take("T#implementer", 3, LOW, HIGH, alive)[:2] == first
    assert book.held("T#") == {"T#implementer": sorted(book.take("T#implementer", 3, LOW, HIGH,
                                                                 alive)),
                               "T#reviewer": other}


def test_a_port_something_listens_on_is_passed_over(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", LOW))
        busy.listen()
        assert not free(LOW)
        assert LOW not in PortBook(tmp_path, tmp_path / "claims").take("T#gate", 3, LOW, HIGH, alive)
    assert free(LOW)


def test_release_gives_a_tickets_ports_back_and_only_its(tmp_path: Path) -> None:
    book = PortBook(tmp_path, tmp_path / "claims")
    mine = book.take("/h/T-1#implementer", 2, LOW, HIGH, alive)
    theirs = book.take("/h/T-10#implementer", 2, LOW, HIGH, alive)
    assert book.release("/h/T-1#") == sorted(mine)
    assert book.held("/h/") == {"/h/T-10#implementer": theirs}
    assert book.take("/h/T-2#gate", 2, LOW, HIGH, alive) == sorted(mine), "given again"


def test_a_dead_tickets_ports_are_taken_back(tmp_path: Path) -> None:
    book = PortBook(tmp_path, tmp_path / "claims")
    dead = book.take("dead-T#gate", 2, LOW, LOW + 2, alive)
    taken = book.take("T#gate", 2, LOW, LOW + 2, alive)
    assert set(dead) & set(taken), "the range holds three: the dead ticket's went back"


def test_a_range_with_too_few_free_ports_says_how_to_mend_it(tmp_path: Path) -> None:
    with pytest.raises(ExternalFailure) as caught:
        PortBook(tmp_path, tmp_path / "claims").take("T#gate", 5, LOW, LOW + 3, alive)
    assert "only 4 of the 5 ports" in caught.value.message
    assert "port_range" in (caught.value.hint or "")


@fault("", "two handoff homes of one machine (a second HANDOFF_HOME, another user) book ports "
       "at once",
       "never the same port: each booking is claimed machine-wide (a file a port in a sticky "
       "folder, made once); a claim whose booking is gone is taken back",
       "each home's book and the worktrees' ports")
def test_two_homes_of_one_machine_never_book_the_same_port(tmp_path: Path) -> None:
    """Each home has a book of its own; the claims folder they share is the machine's."""
    claims = tmp_path / "claims"
    one, two = PortBook(tmp_path / "one", claims), PortBook(tmp_path / "two", claims)
    for home in (one.home, two.home):
        home.mkdir()
    first = one.take("/a/T-1#gate", 2, LOW, LOW + 3, alive)
    second = two.take("/b/T-1#gate", 2, LOW, LOW + 3, alive)
    assert not set(first) & set(second), "the same ports were booked by two homes"
    assert oct(claims.stat().st_mode & 0o7777) == "0o1777", "every user's, sticky as /tmp is"
    assert sorted(int(p.name) for p in claims.iterdir()) == sorted(first + second)
    assert one.release("/a/T-1#") == sorted(first)
    assert sorted(int(p.name) for p in claims.iterdir()) == sorted(second), "given back"
    assert sorted(two.take("/b/T-2#gate", 2, LOW, LOW + 3, alive)) == sorted(first)


def test_a_claim_whose_booking_is_gone_is_taken_back(tmp_path: Path) -> None:
    claims = tmp_path / "claims"
    gone = PortBook(tmp_path / "gone", claims)
    gone.home.mkdir()
    taken = gone.take("/g/T-1#gate", 1, LOW, LOW, alive)
    (gone.home / "ports.json").unlink()  # its home was removed with its book
    assert PortBook(tmp_path, claims).take("T#gate", 1, LOW, LOW, alive) == taken


def test_a_claim_whose_ticket_is_gone_from_another_home_is_taken_back(tmp_path: Path) -> None:
    """A home that still exists but whose booking's ticket is closed or removed (the tickets a
    person left unclosed, their records gone since) holds its ports no longer."""
    claims = tmp_path / "claims"
    other = PortBook(tmp_path / "other", claims)
    other.home.mkdir()
    taken = other.take("/o/T-1#gate", 1, LOW, LOW, alive)
    assert PortBook(tmp_path, claims).take("T#gate", 1, LOW, LOW + 1, alive) != taken, \
        "a live booking of another home is respected"
    ours = PortBook(tmp_path / "ours", claims)
    ours.home.mkdir()
    assert ours.take("T#gate", 1, LOW, LOW, lambda owner: owner != "/o/T-1#gate") == taken


def test_without_a_usable_claims_folder_the_home_book_alone_decides(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "claims").symlink_to(tmp_path / "target")  # a link another user planted
    assert len(PortBook(tmp_path, tmp_path / "claims").take("T#gate", 2, LOW, HIGH, alive)) == 2
    assert list((tmp_path / "target").iterdir()) == [], "nothing written through the link"
