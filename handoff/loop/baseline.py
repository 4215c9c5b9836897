"""How many tests the ticket's base runs: the plan's test command, run once at the base commit
in the gate's own checkout and fence, while the implementer works on round 1.

A change that quietly runs fewer tests (a `-k` in a pytest.ini, a conftest.py that drops
collected items, a skipped module) passes its gate all the same. Each round's gate is compared
with this count (handoff.loop.testcount), and a drop is shown to every reviewer as a weakened
test they must answer (handoff.loop.weakened.with_fewer_tests).

It runs in a thread beside the implementer's round (the gate's checkout is idle then), so it
costs no time on the ticket's path: the round's gate waits for it only if it is still running,
and never two gates run at once (they share the checkout and the running-gate record, which
lets a later orchestrator end one that an orchestrator left behind when it died).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from handoff.loop.gate import GateResult, run_gate
from handoff.loop.testcount import Count, read
from handoff.loop.workspace import Workspace
from handoff.machinery.worktrees import GATE

#: the gate log's round number for the base run (rounds start at 1)
BASE_ROUND = 0
#: the key of the base's count among a ticket's test counts (State.tests_ran)
BASE = "base"


class Baseline:
    """One run of the plan's test command at the base, started once and awaited once."""

    def __init__(self, ws: Workspace, base_commit: str, test: Sequence[str]) -> None:
        self.ws = ws
        self.base_commit = base_commit
        self.test = list(test)
        self.result: GateResult | None = None
        self.error = ""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="baseline", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tdir = self.ws.tdir
        try:
            self.ws.worktrees.point(GATE, self.base_commit,
                                    tdir.scratch_patch(GATE, BASE_ROUND))
            self.result = run_gate(self.test, self.ws.worktrees.path(GATE), self.ws.gate_env(),
                                   self.ws.config.gate_timeout, tdir.gate_log(BASE_ROUND),
                                   record=tdir.gate_running, fence=self.ws.gate_fence(),
                                   nice=self.ws.config.peer_nice)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def wait(self) -> None:
        """Until the run is over (it is bounded by gate_timeout itself)."""
        if self._thread is not None:
            self._thread.join()

    def count(self) -> Count | None:
        return read(self.result.output) if self.result is not None else None
