"""handoff.record.grants: which process may file which report, and the receipts' key."""

from __future__ import annotations

import stat
from pathlib import Path

from handoff.record.grants import Grants


def test_a_grant_names_one_process_for_one_role_and_round(tmp_path: Path) -> None:
    book = Grants(tmp_path)
    book.grant("reviewer", 2, "101:5000:boot")
    book.grant("reviewer", 2, "101:5000:boot")  # a second paste of the same brief
    book.grant("reviewer", 3, "202:6000:boot")
    assert book.granted("reviewer", 2) == {"101:5000:boot"}
    assert book.granted("reviewer", 3) == {"202:6000:boot"}
    assert book.granted("implementer", 2) == set()
    assert (tmp_path / "grants" / "reviewer-2").read_text() == "101:5000:boot\n"


def test_the_key_is_the_tickets_own_made_once_and_private(tmp_path: Path) -> None:
    book = Grants(tmp_path)
    signature = book.sign("the receipt's fields")
    key = tmp_path / "grants" / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert Grants(tmp_path).signed("the receipt's fields", signature), "the same key later"
    assert not book.signed("the receipt's fields, changed", signature)
    assert not book.signed("the receipt's fields", "")
    assert not Grants(tmp_path / "other").signed("the receipt's fields", signature), \
        "another ticket's key signs nothing of this one's"
