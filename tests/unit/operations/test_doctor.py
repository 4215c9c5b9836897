"""handoff.operations.doctor, what needs no process: a setting shown in the words of the file
it came from, never as a Python repr. The checks themselves, on real tools, repositories and
CLIs, are in tests/integration/operations/test_doctor.py."""

from __future__ import annotations

from pathlib import Path

from handoff.config import Config, Limits, Sandbox, Scanner
from handoff.operations.doctor import shown_value
from handoff.providers import RoleSpec


def test_a_setting_is_shown_as_the_file_says_it_never_as_a_repr() -> None:
    scanners = (Scanner(name="bandit", command=("bandit", "-r", ".")),
                Scanner(name="gitleaks", command=("gitleaks", "detect"), required=False))
    assert shown_value(scanners) == "bandit, gitleaks"
    assert shown_value({"implementer": RoleSpec(provider="claude"),
                        "reviewer": RoleSpec(provider="codex")}) == \
        "implementer: claude, reviewer: codex"
    assert shown_value(Limits(processes=None, memory=512 * 2**20)) == \
        "processes: no limit, memory: 512 MiB, tmp: 1 GiB"
    assert shown_value(True) == "true" and shown_value(None) == "none"
    assert shown_value(()) == "none" and shown_value(Path("/x/y")) == "/x/y"
    for value in (scanners, Sandbox(), Config().roles):
        assert "(" not in shown_value(value).replace("(from", ""), shown_value(value)


def test_a_long_setting_is_cut_to_one_line() -> None:
    shown = shown_value(tuple(Scanner(name=f"scanner-{n}", command=("x",)) for n in range(20)))
    assert len(shown) == 80 and shown.endswith("...")
