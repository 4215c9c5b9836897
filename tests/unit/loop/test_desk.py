"""handoff.loop.desk: reports in, on a real ticket with no peer (a `FakeCrew` records whom the
desk would start afresh). Reports are filed here as `handoff submit` files them: the text and
its signed receipt (handoff.loop.submission); the whole submit path is in test_e2e_submit."""

from __future__ import annotations

import os
import time
from pathlib import Path

from handoff.loop.context import TicketContext
from handoff.loop.desk import SETTLE, ReportDesk, report_settled
from handoff.operations.render import event_line
from handoff.phases import Phase
from handoff.protocol.intake import Request
from tests.paper import paper_ticket
from tests.rooms import FakeCrew

WHOLE = ("---\nstatus: done\ncommit: 'abcdef1'\n---\n## Changes\nx\n## Verification\nx\n"
         "## Deviations\nNone\n## Open questions\nNone\n")


# ---- a report filed in place: when it is whole -------------------------------------------------


def test_a_report_still_being_written_in_place_is_not_judged_yet(tmp_path: Path) -> None:
    path = tmp_path / "impl-report-1.md"
    path.write_text(WHOLE[:40])
    assert not report_settled(path, "implementer"), "half a report, just written: wait for the rest"

    old = time.time() - SETTLE - 1
    os.utime(path, (old, old))
    assert report_settled(path, "implementer"), "untouched for a while: judge it (and reject it)"


def test_a_whole_report_is_judged_at_once(tmp_path: Path) -> None:
    path = tmp_path / "impl-report-1.md"
    path.write_text(WHOLE)
    assert report_settled(path, "implementer")
    assert not report_settled(tmp_path / "missing.md", "implementer")


# ---- a submit refused: kept in the record, and said when the turn ends --------------------


def test_a_refused_submit_is_recorded_and_remembered_for_the_role(
        handoff_home: Path) -> None:
    """A submit from no live peer of the role is refused (handoff.loop.filer): the peer is told
    why, and now the record says it too, for `log`, the board and a later escalation."""
    ws = paper_ticket(handoff_home, Phase.REVIEWING)
    ctx = TicketContext(ws)
    desk = ReportDesk(ctx, FakeCrew(ctx))
    reply = desk.judge_handed(Request("reviewer", 1, "---\nverdict: pass\n---\n", "r.md",
                                      os.getpid()))
    assert reply.filed is None and reply.problems
    assert desk.refused == {"reviewer": reply.problems}
    [said] = [e for e in ctx.tdir.events.read()[0] if e["kind"] == "submission"]
    assert (said["role"], said["accepted"], said["filed"], said["problems"]) == \
        ("reviewer", False, False, reply.problems)
    assert event_line(said).endswith("handoff submit refused: " + reply.problems[0])
