"""handoff.loop.gating: the gate stage of a round on a real ticket, with real test commands and
scanners run at the round's commit in the gate's own checkout (no peer, no tmux session)."""

from __future__ import annotations

from pathlib import Path

from handoff.loop.gate import GateResult
from handoff.loop.gating import gate_note, gate_summary
from handoff.loop.scanners import ScanResult, ScanState


def scan(name: str, state: str, required: bool = True) -> ScanResult:
    return ScanResult(name, required, ScanState(state), (name,), f"{name} {state}")


def test_the_gate_summary_names_the_test_and_each_scanner_that_did_not_pass() -> None:
    test = GateResult(("make", "test"), 1, 2.0, False, "")
    said = gate_summary(test, [scan("secrets", "passed"), scan("lint", "failed")])
    assert said == "`make test` failed (exit 1) in 2.0s; lint failed"
    assert gate_summary(None, [scan("secrets", "passed"), scan("lint", "passed")]) == \
        "2 scanner(s) passed"
    assert gate_summary(None, [scan("advice", "passed", required=False)]) == \
        "advice passed; 1 scanner(s) passed", "an optional scanner is always named"
    assert gate_summary(None, []) == "nothing to run"


def test_a_failed_gates_note_ends_with_the_end_of_its_output(tmp_path: Path) -> None:
    output = "".join(f"line {i}\n" for i in range(5000))
    title, text = gate_note("`make` failed (exit 2)", "0123456789abcdef", tmp_path / "gate-1.log",
                            output)
    assert title == "The verification gate failed"
    assert text.startswith("`make` failed (exit 2) at 0123456")
    assert "line 4999" in text and "line 0\n" not in text
