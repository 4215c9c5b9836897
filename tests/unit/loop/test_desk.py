"""handoff.loop.desk: reports in, on a real ticket with no peer (a `FakeCrew` records whom the
desk would start afresh). Reports are filed here as `handoff submit` files them: the text and
its signed receipt (handoff.loop.submission); the whole submit path is in test_e2e_submit."""

from __future__ import annotations

import os
import time
from pathlib import Path

from handoff.loop.desk import SETTLE, report_settled

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
